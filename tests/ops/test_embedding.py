"""The C++ library for embedding: CMake builds the core, the emulator and the C API without Python; the examples
(examples/programs: C++, C, and exact speculative decoding on the decoder) and the API test programs (tests/capi)
run against it, and the consumer projects of examples/ build the examples against mtlinv as a user finds it:
  (a) find_package from a `cmake --install` prefix,
  (b) FetchContent of this checkout (a second, static build of the library),
  (c) find_package from the headers and library inside the installed Python package (mtlinv.get_cmake_dir()),
  (d) pkg-config, from the install prefix and from the package.
(c) uses this checkout's own build of the package (setup.py puts the files where the wheel takes them);
MTLINV_TEST_WHEEL=1 also builds the wheel with pip and installs it into a folder of its own, which costs a link of
the whole library and a copy of the package."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import cmake_build

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import sources  # noqa: E402  (tools/sources.py: the staged headers, the version)

pytestmark = pytest.mark.slow


def cmake_tool():
    cmake = shutil.which("cmake")
    if cmake is None:
        if os.environ.get("CI"):
            pytest.fail("cmake is required in CI (pip install cmake)")
        pytest.skip("cmake is not installed")
    return cmake


def run(*cmd, **kwargs):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def configure_and_build(source, build, *options):
    cmake = cmake_tool()
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    run(cmake, "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release", *generator, *options)
    run(cmake, "--build", build, "-j", "2")
    return build


# -O1: the programs run small calls, and the library's every kernel is compiled twice (fast and checked emulator
# builds); at CMake's Release -O3 this build was the second longest step of CI.
FAST_BUILD = "-DMTLINV_OPT=-O1"


@pytest.fixture(scope="module")
def build_dir():
    """The library, its examples and the tests/capi programs: the build tests/fuzz/test_capi.py shares."""
    return cmake_build.build()


@pytest.fixture(scope="module")
def prefix(build_dir, tmp_path_factory):
    """The library installed by `cmake --install` (a)."""
    out = tmp_path_factory.mktemp("prefix")
    run(cmake_tool(), "--install", build_dir, "--prefix", out)
    return out


def run_program(path, *args, **env):
    r = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, MTLINV_DEVICE="emu", **env))
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
    return r.stdout


def check_programs(folder):
    """Each example program's own checks, and what it prints when they pass."""
    out = run_program(folder / "embed_example")
    assert "has the bits of" in out and "DIFFERS" not in out and "bad input:" in out and "has K=" in out
    out = run_program(folder / "embed_example_c")
    assert "has the bits of" in out and "DIFFERS" not in out
    out = run_program(folder / "speculative")
    assert "PASS: speculative decoding is the greedy decoding" in out, out
    greedy, speculative = (line.split(":", 1)[1].split() for line in out.splitlines()[:2])
    assert greedy == speculative and len(greedy) == 24


def test_examples_in_the_build_tree(build_dir):
    check_programs(build_dir / "examples" / "programs")


@pytest.mark.parametrize("program", ["api_errors", "cpp_errors", "capi_ops", "capi_model", "capi_super"])
def test_api_paths(build_dir, program):
    """tests/capi: every call's result and every bad call's error (status or exception) naming the argument; none
    crashes."""
    out = run_program(build_dir / program, MTLINV_BATCH_INVARIANT_LIMIT="")
    assert out.count("ok: ") >= 7, out


def test_libraries_read_the_limit_variable(build_dir):
    """The C library takes its limit from MTLINV_BATCH_INVARIANT_LIMIT, as the Python package does, and an invalid
    value is the error of every call that uses the limit, not a silent 0."""
    run_program(build_dir / "api_errors", "env", "8", MTLINV_BATCH_INVARIANT_LIMIT="8")
    run_program(build_dir / "api_errors", "env", "0", MTLINV_BATCH_INVARIANT_LIMIT="")
    run_program(build_dir / "api_errors", "bad-env", MTLINV_BATCH_INVARIANT_LIMIT="garbage")


def test_install_holds_the_package(prefix):
    """The headers are self-contained (no #include into src/), and the CMake package, mtlinv.pc and the library."""
    libdir = next(p for p in (prefix / "lib", prefix / "lib64") if p.exists())
    assert (libdir / "cmake" / "mtlinv" / "mtlinvConfig.cmake").exists()
    assert (libdir / "cmake" / "mtlinv" / "mtlinvConfigVersion.cmake").exists()
    assert (libdir / "pkgconfig" / "mtlinv.pc").exists()
    assert list(libdir.glob("libmtlinv.*"))
    headers = list((prefix / "include" / "mtlinv").rglob("*.h*"))
    assert len(headers) > 10
    for header in headers:
        includes = re.findall(r"^\s*#\s*include\s*[\"<]([^\">]+)", header.read_text(), re.M)
        assert not [i for i in includes if "src/" in i or i.startswith("../../")], (header, includes)


def test_public_headers_stand_alone(tmp_path):
    """Each public header compiles on its own from the installed layout (tools/sources.py stages it): the set is
    closed under #include and reaches nothing outside it; mtlinv.h is also C99."""
    include = tmp_path / "include"
    cxx, cc = os.environ.get("CXX", "c++"), os.environ.get("CC", "cc")

    def compile_alone(header, *command):
        unit = tmp_path / ("unit.c" if command[0] == cc else "unit.cpp")
        unit.write_text(f"#include <{header.relative_to(include).as_posix()}>\n")
        return subprocess.run([*command, "-fsyntax-only", "-Wall", "-Werror", f"-I{include}", unit],
                              capture_output=True, text=True)

    for header in sources.stage_headers(include):
        r = compile_alone(header, cxx, "-std=c++17")
        assert r.returncode == 0, f"{header}: {r.stderr}"
    r = compile_alone(include / "mtlinv" / "mtlinv.h", cc, "-std=c99", "-pedantic")
    assert r.returncode == 0, r.stderr
    planted = include / "mtlinv" / "core" / "tensor.h"  # negative control: an include past the set
    planted.write_text('#include "ops/checks.h"\n' + planted.read_text())
    r = compile_alone(planted, cxx, "-std=c++17")
    assert r.returncode != 0 and "checks.h" in r.stderr, r.stderr


def test_find_package_from_the_install_prefix(prefix, tmp_path):
    """(a): examples/find_package against the `cmake --install` prefix."""
    build = configure_and_build(ROOT / "examples" / "find_package", tmp_path, f"-DCMAKE_PREFIX_PATH={prefix}")
    check_programs(build / "programs")


def test_find_package_refuses_another_major_version(prefix, tmp_path):
    """The version file: find_package(mtlinv 99) must not take this mtlinv."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p LANGUAGES CXX)\nfind_package(mtlinv 99 REQUIRED)\n")
    r = subprocess.run([cmake_tool(), "-S", tmp_path / "src", "-B", tmp_path / "build",
                        f"-DCMAKE_PREFIX_PATH={prefix}"], capture_output=True, text=True)
    assert r.returncode != 0 and "mtlinv" in r.stderr and "99" in r.stderr, r.stderr


def needed_libraries(program):
    """The libraries a program records (ELF DT_NEEDED by readelf; on macOS the install names otool lists, last
    part), or None elsewhere."""
    if sys.platform == "darwin":
        return [line.split()[0].rpartition("/")[2] for line in run("otool", "-L", program).splitlines()[1:]]
    if sys.platform != "linux":
        return None
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", program))


def versioned_library():
    """The library's name with the MAJOR.MINOR of this checkout (tools/sources.py reads it from version.h)."""
    abi = ".".join(sources.version().split(".")[:2])
    return f"libmtlinv.{abi}.dylib" if sys.platform == "darwin" else f"libmtlinv.so.{abi}"


def pkg_config_build(pc_dir, out):
    """(d): the C example compiled and linked with only what pkg-config says; it records the library by its
    versioned soname (install name on macOS), so that it refuses to start with a library of another MAJOR.MINOR."""
    if shutil.which("pkg-config") is None:
        if os.environ.get("CI"):
            pytest.fail("pkg-config is required in CI")
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=str(pc_dir))
    flags = run("pkg-config", "--cflags", "--libs", "mtlinv", env=env).split()
    cc = os.environ.get("CC", "cc")
    run(cc, "-std=c11", ROOT / "examples" / "programs" / "embed_example.c", "-o", out, *flags)
    out_text = run_program(out)
    assert "has the bits of" in out_text and "DIFFERS" not in out_text
    needed = needed_libraries(out)
    assert needed is None or versioned_library() in needed, needed


def test_pkg_config_from_the_install_prefix(prefix, tmp_path):
    libdir = next(p for p in (prefix / "lib", prefix / "lib64") if p.exists())
    pkg_config_build(libdir / "pkgconfig", tmp_path / "embed_example_c")


def test_fetchcontent_of_the_checkout_static(tmp_path):
    """(b): examples/fetchcontent builds this checkout as its own part, here as a static library (the kernels'
    self-registering objects must all be linked: mtlinv_static is taken whole), with the fast kernels alone
    (MTLINV_CHECKED_KERNELS=OFF, half the build), where checking mode is refused with the reason."""
    build = configure_and_build(ROOT / "examples" / "fetchcontent", tmp_path, f"-DMTLINV_SOURCE={ROOT}",
                                "-DBUILD_SHARED_LIBS=OFF", "-DMTLINV_CHECKED_KERNELS=OFF", FAST_BUILD)
    assert not list(build.rglob("libmtlinv.so*")), "a static build made a shared library"
    assert not list(build.rglob("*.checked.cpp*")), "MTLINV_CHECKED_KERNELS=OFF built the checked kernels"
    check_programs(build / "programs")
    r = subprocess.run([str(build / "programs" / "embed_example_c")], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, MTLINV_DEVICE="emu", MTLINV_EMU_CHECK="1"))
    assert r.returncode == 2 and "checking mode needs the bounds-checked kernels" in r.stderr, r.stdout + r.stderr


def package_paths(python_path=None):
    """mtlinv.get_cmake_dir() and the pkg-config folder of the mtlinv that `python_path` (else this checkout)
    imports, as `python -m mtlinv` prints them."""
    env = dict(os.environ, PYTHONPATH=str(python_path)) if python_path else None
    cwd = python_path or ROOT

    def ask(flag):
        return pathlib.Path(run(sys.executable, "-m", "mtlinv", flag, env=env, cwd=cwd).strip())

    cmake_dir, pc_dir = ask("--cmake-dir"), ask("--pkgconfig-dir")
    if python_path:
        assert pathlib.Path(python_path) in cmake_dir.parents, cmake_dir
    return cmake_dir, pc_dir


def check_package(cmake_dir, pc_dir, tmp_path):
    build = configure_and_build(ROOT / "examples" / "find_package", tmp_path / "build", f"-Dmtlinv_DIR={cmake_dir}")
    check_programs(build / "programs")
    pkg_config_build(pc_dir, tmp_path / "embed_example_c")


def test_package_of_this_checkout(tmp_path):
    """(c) and (d), with the package as setup.py built it in this checkout."""
    import mtlinv
    cmake_dir, pc_dir = package_paths()
    assert pathlib.Path(mtlinv.get_cmake_dir()) == cmake_dir
    assert (pathlib.Path(mtlinv.get_include()) / "mtlinv" / "mtlinv.hpp").exists()
    check_package(cmake_dir, pc_dir, tmp_path)


@pytest.mark.skipif(os.environ.get("MTLINV_TEST_WHEEL") != "1", reason="MTLINV_TEST_WHEEL=1 builds the wheel")
def test_installed_wheel(tmp_path):
    """(c) and (d) from a wheel built by pip and installed into a folder of its own."""
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, ROOT, cwd=ROOT)
    (wheel,) = wheels.glob("mtlinv-*.whl")
    site = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--target", site, wheel)
    check_package(*package_paths(site), tmp_path)
