"""The macOS build, checked on Linux as far as Linux allows (nothing here runs on Apple hardware).

- Every C++ source of the project compiles for macOS, arm64 and x86-64, with a real clang and Apple's own libc and
  libc++ headers (the `ziglang` package ships both): the fiber code, the runtime, the core, the C API, the examples
  and every kernel's emulator units. Not covered: pyx/_native.cpp (Cython's output is compiled against this
  machine's Python and NumPy headers, which are Linux's). objc/ compiles there too, with macOS's libc and libc++
  but against our declarations of the Metal and Foundation API (tests/static/apple_sdk, as
  tests/compile/test_static_checks.py). The macOS workflow builds all of it with Apple's own toolchain and SDK.
- The fiber switch's Mach-O objects hold the very instructions of the ELF ones, which the arm64 build runs under
  qemu (tests/emu/build_and_run_arm64.sh), and never name x18, the register Apple reserves.
- setup.py's macOS choices (tools/macos.py): the deployment target, one architecture for a universal2 Python, and
  an offline Metal compile whose every failure falls back to compiling the kernels at run time.

Without ziglang or llvm-objdump these tests fail in CI (env CI set) and are skipped elsewhere, with the reason;
on macOS, where the build itself is the check, they are skipped.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import emu_units  # noqa: E402
import kernel_table  # noqa: E402
import macos  # noqa: E402
import sources  # noqa: E402

TARGETS = {"arm64": "aarch64-macos", "x86_64": "x86_64-macos"}
ELF_TARGETS = {"arm64": "aarch64-linux-gnu", "x86_64": "x86_64-linux-gnu"}


def require(found, what):
    if sys.platform == "darwin":
        pytest.skip("Linux stand-ins for a Mac's toolchain; on macOS the build itself compiles these sources")
    if not found:
        reason = f"{what} is not installed"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the macOS build checks", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def zig(tmp_path_factory):
    try:
        import ziglang  # noqa: F401
    except ImportError:
        require(False, "the ziglang package (pip install ziglang: clang with Apple's libc headers)")
    # Its own cache, so that parallel test workers do not share one.
    cache = tmp_path_factory.mktemp("zig-cache")
    env = dict(os.environ, ZIG_GLOBAL_CACHE_DIR=str(cache), ZIG_LOCAL_CACHE_DIR=str(cache))

    def compile(target, source, *flags, out=None):
        lang = "cc" if str(source).endswith(".c") else "c++"
        std = "-std=c11" if lang == "cc" else "-std=c++17"
        out = out or cache / (pathlib.Path(source).name + ".o")
        cmd = [sys.executable, "-m", "ziglang", lang, "-target", target, std, "-c", "-Wall", "-Werror", *flags,
               str(source), "-o", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return proc.returncode, proc.stdout, out

    return compile


def macos_target(arch):
    return f"{TARGETS[arch]}.{macos.DEPLOYMENT_TARGET}"


INCLUDES = ["-Iinclude", "-Isrc/emu", "-Ipyx", "-Imetal"]
HAND_WRITTEN = sorted(
    [ROOT / p for p in sources.sources()]
    + list((ROOT / "tests" / "emu").glob("*.cpp")) + list((ROOT / "tests" / "capi").glob("*.c*"))
    + list((ROOT / "examples").rglob("*.c*")))


@pytest.mark.parametrize("arch", TARGETS)
def test_hand_written_sources_compile_for_macos(zig, arch, tmp_path):
    assert len(HAND_WRITTEN) > 30, HAND_WRITTEN
    # The public headers as they are installed (<mtlinv/core/...>), which the examples and API tests include.
    sources.stage_headers(tmp_path / "include")
    # Both fiber implementations: the assembly switch, and the ucontext fallback that macOS declares only to code
    # defining _XOPEN_SOURCE first.
    jobs = [(src, []) for src in HAND_WRITTEN]
    gen = tmp_path / "gen"  # the kernel table the plans include, generated as the builds do
    kernel_table.write(gen / "kernel_table.h")
    jobs += [(ROOT / "src/emu/fiber.cpp", ["-DEMU_PORTABLE_FIBERS=1"]),
             (ROOT / "src/emu/scheduler.cpp", ["-DEMU_PORTABLE_FIBERS=1"])]
    failures = []
    for src, flags in jobs:
        rc, out, _ = zig(macos_target(arch), src, *INCLUDES, f"-I{tmp_path / 'include'}", f"-I{gen}",
                         *flags, out=tmp_path / "unit.o")
        if rc != 0:
            failures.append(f"{src.relative_to(ROOT)} {' '.join(flags)}:\n{out}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("arch", TARGETS)
def test_kernel_units_compile_for_macos(zig, arch, tmp_path):
    """Every kernel as the emulator builds it (the MSL pre-pass's C++, fast and checked), with Apple's headers: the
    shim's half/bfloat, vector and math code meets macOS's libc++ here. -O0: the headers matter, not the code."""
    units = emu_units.generate(ROOT, tmp_path)
    assert len(units) >= 20, units
    failures = []
    for unit in units:
        rc, out, _ = zig(macos_target(arch), unit, f"-I{tmp_path}", *INCLUDES, "-O0", out=tmp_path / "unit.o")
        if rc != 0:
            failures.append(f"{unit.name}:\n{out}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("metallib", [False, True], ids=["source", "metallib"])
def test_objc_compiles_with_apples_headers(zig, arch, metallib, tmp_path):
    """The Metal backend with macOS's own libc and libc++ (and its availability rules for them); Metal and
    Foundation are still the declarations of tests/static/apple_sdk, which only a Mac's SDK can confirm."""
    gen = tmp_path / "gen"
    gen.mkdir()
    subprocess.run([sys.executable, str(ROOT / "tools/embed_metal.py"), "--out", str(gen / "metal_source.inc")],
                   check=True)
    flags = ["-x", "objective-c++", "-fobjc-arc", "-fblocks", "-Wextra", "-isystem", "tests/static/apple_sdk",
             f"-I{gen}", "-DMTLINV_WITH_METAL=1"]
    if metallib:
        flags.append('-DMTLINV_METALLIB_PATH="mtlinv.metallib"')
    sources = sorted((ROOT / "objc").glob("*.mm"))
    assert sources
    for mm in sources:
        rc, out, _ = zig(macos_target(arch), mm, *flags, out=tmp_path / "objc.o")
        assert rc == 0, out
    planted = ROOT / "tests/static/fixtures/bad_selector.mm"  # a misspelt selector must fail here too
    rc, out, _ = zig(macos_target(arch), planted, *flags, out=tmp_path / "planted.o")
    assert rc != 0 and "newBufferWithLength:option:" in out, out


def test_posix_memalign_replaces_aligned_alloc(zig, tmp_path):
    """std::aligned_alloc exists in macOS's libc only from 10.15; the x86-64 half of a universal2 Python's build
    targets older releases. The emulator's allocator must compile there, where aligned_alloc is refused."""
    old_release = ["-Werror=unguarded-availability-new"]
    rc, out, _ = zig("x86_64-macos.10.9", ROOT / "src/emu/backend_emu.cpp", *INCLUDES, *old_release,
                     out=tmp_path / "backend_emu.o")
    assert rc == 0, out
    probe = tmp_path / "aligned_alloc_probe.cpp"  # what backend_emu.cpp once did: the check must catch it
    probe.write_text("#include <cstdlib>\nvoid* f() { return std::aligned_alloc(64, 64); }\n")
    rc, out, _ = zig("x86_64-macos.10.9", probe, *old_release, out=tmp_path / "probe.o")
    assert rc != 0 and "aligned_alloc" in out, out


# ---- the fiber switch: one instruction sequence in both object formats ----

def llvm_tool(name):
    found = shutil.which(name) or next(
        (shutil.which(f"{name}-{v}") for v in range(21, 13, -1) if shutil.which(f"{name}-{v}")), None)
    require(found, f"{name} (Debian: apt-get install llvm-19)")
    return found


@pytest.fixture(scope="module")
def objdump():
    return llvm_tool("llvm-objdump")


def switch_instructions(objdump, obj, prefix):
    """{function: [instructions]} of the fiber switch's two functions, with symbol names unprefixed. Each runs
    from its symbol to the next symbol of the text section (Mach-O records no sizes)."""
    nm = subprocess.run([llvm_tool("llvm-nm"), "--numeric-sort", "--defined-only", str(obj)],
                        stdout=subprocess.PIPE, text=True, check=True).stdout
    text = [(int(addr, 16), name) for addr, kind, name in (ln.split() for ln in nm.splitlines())
            if kind.lower() == "t"]
    functions = {}
    for start, name in text:
        if name.removeprefix(prefix) not in ("emu_fiber_switch", "emu_fiber_trampoline"):
            continue
        after = [addr for addr, _ in text if addr > start]  # Mach-O adds local labels at the same addresses
        stop = [f"--stop-address={min(after):#x}"] if after else []
        out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "--no-leading-addr",
                              f"--start-address={start:#x}", *stop, str(obj)],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        body = out.split("Disassembly of section", 1)[1].splitlines()[1:]
        # Padding after a function differs by format, and a branch target is printed by the symbol before it
        # (Mach-O's local label or the function), so only its offset from there is kept; nothing else differs.
        functions[name.removeprefix(prefix)] = [
            re.sub(r"0x[0-9a-f]+ <[^>+]*(\+0x[0-9a-f]+)?>", r"\1", " ".join(ln.split())) for ln in body
            if ln.strip() and not ln.strip().endswith(">:") and not ln.split()[0].startswith("nop")]
    return functions


@pytest.mark.parametrize("arch", TARGETS)
def test_fiber_switch_is_one_instruction_sequence(zig, objdump, arch, tmp_path):
    src = ROOT / "src/emu/fiber.cpp"
    rc, out, macho = zig(macos_target(arch), src, "-O2", out=tmp_path / "macho.o")
    assert rc == 0, out
    rc, out, elf = zig(ELF_TARGETS[arch], src, "-O2", out=tmp_path / "elf.o")
    assert rc == 0, out
    on_mac, on_linux = switch_instructions(objdump, macho, "_"), switch_instructions(objdump, elf, "")
    assert set(on_linux) == {"emu_fiber_switch", "emu_fiber_trampoline"}, on_linux
    assert on_mac == on_linux
    assert len(on_mac["emu_fiber_switch"]) > 20, on_mac
    if arch == "arm64":
        used = " ".join(on_mac["emu_fiber_switch"] + on_mac["emu_fiber_trampoline"])
        assert not re.search(r"\b[xw]18\b", used), "x18 is Apple's platform register: " + used
        assert "FPCR" in used  # the fiber's own rounding and flush modes travel with it
    symbols = subprocess.run([llvm_tool("llvm-nm"), "-m", str(macho)], stdout=subprocess.PIPE, text=True).stdout
    # Global within the library, invisible outside it: Mach-O's .private_extern, as ELF's .hidden.
    for name in ("_emu_fiber_switch", "_emu_fiber_trampoline"):
        assert re.search(rf"\(__TEXT,__text\) private external {name}$", symbols, re.M), symbols


# ---- setup.py's macOS choices (tools/macos.py) ----

def test_deployment_target_and_architecture():
    env = {}
    notes = macos.configure(env, "macosx-10.9-universal2", "arm64")
    assert env == {"MACOSX_DEPLOYMENT_TARGET": "14.0", "ARCHFLAGS": "-arch arm64"}, env
    assert any("arm64 only" in n for n in notes), notes
    env = {"MACOSX_DEPLOYMENT_TARGET": "15.0", "ARCHFLAGS": "-arch arm64 -arch x86_64"}
    macos.configure(env, "macosx-11.0-universal2", "arm64")
    assert env == {"MACOSX_DEPLOYMENT_TARGET": "15.0", "ARCHFLAGS": "-arch arm64 -arch x86_64"}, "the user's choice"
    env = {}
    assert macos.configure(env, "macosx-14.0-arm64", "arm64") == [] and "ARCHFLAGS" not in env
    env = {}
    notes = macos.configure(env, "macosx-10.9-universal2", "x86_64")
    assert env["ARCHFLAGS"] == "-arch x86_64"
    assert any("Apple-silicon GPU" in n and "emulator" in n for n in notes), notes


def test_cmake_deployment_target_matches():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r'set\(CMAKE_OSX_DEPLOYMENT_TARGET "([\d.]+)"', cmake)
    assert m and m.group(1) == macos.DEPLOYMENT_TARGET, "CMakeLists.txt and tools/macos.py name one release"
    assert cmake.index("CMAKE_OSX_DEPLOYMENT_TARGET") < cmake.index("project(mtlinv"), "project() reads it"


def fake_xcrun(tmp_path, metal_script):
    """An `xcrun` on PATH that records its arguments: `--find` succeeds (as it does where only the Metal toolchain
    is missing), `metal` runs metal_script, `metallib` writes its output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "xcrun.log"
    (bin_dir / "xcrun").write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$*" in
  *--find*) echo /usr/bin/metal ;;
  *" metal "*) {metal_script} ;;
  *" metallib "*) for last; do :; done; echo lib > "$last" ;;
esac
""")
    (bin_dir / "xcrun").chmod(0o755)
    return bin_dir, log


@pytest.mark.parametrize("metal_script, expected", [
    # Xcode 26 without the separately downloaded Metal toolchain.
    ('echo "error: cannot execute tool \'metal\' due to missing Metal Toolchain; use: xcodebuild '
     '-downloadComponent MetalToolchain" >&2; exit 72', "missing Metal Toolchain"),
    ('echo "mtlinv.metal:12:3: error: unknown type name \'bfloat\'" >&2; exit 1', "unknown type name"),
])
def test_metallib_failure_falls_back(tmp_path, monkeypatch, metal_script, expected):
    bin_dir, _ = fake_xcrun(tmp_path, metal_script)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    stale = tmp_path / "mtlinv.metallib"
    stale.write_text("an older build's kernels")
    built, why = macos.build_metallib(str(tmp_path / "k.metal"), str(tmp_path / "k.air"), str(stale))
    assert not built and expected in why, why
    assert not stale.exists(), "a failed build must not leave an older metallib to be loaded"


def test_metallib_without_xcrun_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    built, why = macos.build_metallib(str(tmp_path / "k.metal"), str(tmp_path / "k.air"), str(tmp_path / "k.lib"))
    assert not built and "xcrun" in why, why


def test_metallib_flags(tmp_path, monkeypatch):
    bin_dir, log = fake_xcrun(tmp_path, 'for last; do :; done; echo air > "$last"')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    lib = tmp_path / "k.metallib"
    built, why = macos.build_metallib(str(tmp_path / "k.metal"), str(tmp_path / "k.air"), str(lib))
    assert built and lib.exists(), why
    metal_call = next(line for line in log.read_text().splitlines() if " metal " in f" {line} ")
    for flag in ("-std=metal3.1", "-fno-fast-math", f"-mmacosx-version-min={macos.DEPLOYMENT_TARGET}"):
        assert flag in metal_call.split(), metal_call


# ---- the MLX extension's GPU evaluation, against the macOS mlx wheel ----

@pytest.fixture(scope="module")
def macos_mlx():
    """The macOS arm64 mlx-metal wheel of the installed MLX's version (MLX's headers with its Metal backend, metal-cpp,
    libmlx.dylib), downloaded once into build/macos-mlx and unpacked there."""
    import fcntl
    import zipfile
    mlx = pytest.importorskip("mlx.core")
    out = ROOT / "build" / "macos-mlx" / mlx.__version__
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "download.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "mlx" / "lib" / "libmlx.dylib").exists():
            r = subprocess.run([sys.executable, "-m", "pip", "download", f"mlx-metal=={mlx.__version__}", "--no-deps",
                                "--only-binary=:all:", "--platform", "macosx_14_0_arm64", "-d", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            require(r.returncode == 0, f"the macOS mlx-metal wheel ({r.stdout[-500:]})")
            with zipfile.ZipFile(next(out.glob("mlx_metal-*.whl"))) as wheel:
                wheel.extractall(out, [n for n in wheel.namelist() if n.startswith(("mlx/include/", "mlx/lib/"))])
    return out / "mlx"


def test_mlx_extension_compiles_for_macos(zig, macos_mlx, tmp_path):
    """mtlinv/mlx_ext's C++ with MLX built with Metal (_METAL_, as the wheel's MLXConfig.cmake sets it): eval_gpu's
    encoding on MLX's command encoder compiles against the wheel's headers and metal-cpp (CoreFoundation,
    CoreGraphics and IOSurface, of which metal-cpp needs a few type names, are tests/static/apple_sdk's), and every
    MLX symbol it needs is exported by the wheel's libmlx.dylib. Not compiled: bindings.cpp (Python's and
    nanobind's headers for macOS are not here). Never run: that needs a Mac."""
    include = macos_mlx / "include"
    flags = ["-std=c++20", "-D_METAL_", "-isystem", str(include), "-isystem", str(include / "metal_cpp"),
             "-isystem", "tests/static/apple_sdk", "-I."]
    needed = set()
    for name in ("eval_gpu.cpp", "graph_ops.cpp", "primitives.cpp"):
        rc, out, obj = zig(macos_target("arm64"), ROOT / "mtlinv" / "mlx_ext" / name, *flags,
                           out=tmp_path / f"{name}.o")
        assert rc == 0, f"{name}:\n{out}"
        nm = subprocess.run([llvm_tool("llvm-nm"), "--undefined-only", "-j", str(obj)], stdout=subprocess.PIPE,
                            text=True, check=True).stdout
        needed |= {s for s in nm.split() if re.match(r"__ZN?K?T?[IVS]?N?3mlx4core", s)}
    assert any("5metal14CommandEncoder21dispatch_threadgroups" in s for s in needed), sorted(needed)
    exported = subprocess.run([llvm_tool("llvm-nm"), "--defined-only", "--extern-only", "-j",
                               str(macos_mlx / "lib" / "libmlx.dylib")], stdout=subprocess.PIPE, text=True,
                              check=True).stdout.split()
    assert not needed - set(exported), sorted(needed - set(exported))
