"""Builds mtlinv's native extension: the C++ core, the emulator with every kernel of metal/ compiled in, and
(on macOS) the Metal backend or (with MTLINV_CUDA=1 and nvcc) the CUDA backend.

Environment:
  MTLINV_DEBUG=1            -O1 -g, and every emulator kernel bounds-checked (not only in checking mode)
  MTLINV_SANITIZE=address,undefined   build with sanitizers, at -O0 (run python with the sanitizer runtime
                            preloaded); the emulator's kernels in their fast variant only (no checking mode)
  MTLINV_NATIVE_ARCH=0      do not tune for this CPU (default: use FMA/F16C/AVX2 when the CPU has them)
  MTLINV_CUDA=1             also build the CUDA backend (needs nvcc; MTLINV_CUDA_ARCH=90 picks the GPU generation)
"""
import concurrent.futures
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import sysconfig

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()
GEN = ROOT / "build" / "gen"
sys.path.insert(0, str(ROOT / "tools"))
import emu_units  # noqa: E402  (tools/emu_units.py: the emulator's kernel units)
import kernel_table  # noqa: E402  (tools/kernel_table.py: the kernel table, generated from metal/*.metal)
import macos  # noqa: E402  (tools/macos.py: the macOS build's choices, tested on Linux)
import sources  # noqa: E402  (tools/sources.py: the library's sources and flags, which CMakeLists.txt reads too)
DEBUG = os.environ.get("MTLINV_DEBUG") == "1"
SANITIZE = os.environ.get("MTLINV_SANITIZE", "")


def rel(p: pathlib.Path) -> str:
    return str(p.relative_to(ROOT))


def cpu_flags() -> list[str]:
    if os.environ.get("MTLINV_NATIVE_ARCH", "1") == "0" or platform.machine() not in ("x86_64", "AMD64"):
        return []
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    # Each flag is -m<feature>, the feature's name in /proc/cpuinfo.
    return [flag for flag in sources.X86_FLAGS if f" {flag[2:]}" in info]


def compile_in_parallel(compiler, jobs: int, force: bool):
    """Makes `compiler` compile an extension's sources `jobs` at a time (distutils compiles one extension's
    sources one by one) and skip an object newer than its source and every dependency (distutils recompiles all),
    unless `force`: a changed kernel or header still rebuilds everything, a changed .cpp only its object."""
    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
        newest_dependency = max((os.path.getmtime(d) for d in depends or ()), default=0)

        def up_to_date(obj, src):
            return (not force and os.path.exists(obj)
                    and os.path.getmtime(obj) > max(os.path.getmtime(src), newest_dependency))

        def one(obj):
            src, ext = build[obj]
            if not up_to_date(obj, src):
                # Written under another name first: an interrupted compile must not leave a new-looking object.
                compiler._compile(obj + ".part", src, ext, cc_args, extra_postargs, pp_opts)
                os.replace(obj + ".part", obj)

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, objects))  # list(): raises the first compile error
        return objects

    compiler.compile = compile


class BuildExt(build_ext):
    def build_extensions(self):
        if sys.platform == "darwin":
            # clang compiles .mm as Objective-C++ by extension; ARC is required by objc/metal_backend.mm.
            cc = self.compiler
            cc.src_extensions.append(".mm")
            plain_compile = cc._compile

            def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
                if src.endswith(".mm"):
                    extra_postargs = [*extra_postargs, "-fobjc-arc"]
                plain_compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            cc._compile = _compile
        emu_opt = os.environ.get("MTLINV_EMU_OPT")
        if emu_opt:
            # The emulator's kernels at another optimisation level (e.g. -O1): a CUDA build on a GPU machine, where
            # the emulator only stands by, compiles qgemv's many instances in a third of the time.
            if emu_opt not in ("-O0", "-O1", "-O2", "-O3"):
                raise SystemExit(f"MTLINV_EMU_OPT={emu_opt!r}: use -O0, -O1, -O2 or -O3")
            kernel_compile = self.compiler._compile

            def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
                if pathlib.Path(src).resolve().parent == GEN / "emu":
                    extra_postargs = [emu_opt if a in ("-O0", "-O1", "-O3") else a for a in extra_postargs]
                kernel_compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            self.compiler._compile = _compile
        hide_kernel_symbols(self.compiler)
        compile_in_parallel(self.compiler, self.parallel or os.cpu_count() or 1, self.force)
        super().build_extensions()

    def build_extension(self, ext):
        super().build_extension(ext)
        package = pathlib.Path(self.get_ext_fullpath(ext.name)).parent
        link_library(self.compiler, ext, self.build_temp, package / "lib")
        package_files(package)

    def copy_extensions_to_source(self):
        """An in-place (or editable) build: the package's library files join the extension in the source tree."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            package = ext.name.rpartition(".")[0]
            built = pathlib.Path(self.build_lib, *package.split("."))
            for folder in ("lib", "include"):
                shutil.copytree(built / folder, pathlib.Path(build_py.get_package_dir(package)) / folder,
                                dirs_exist_ok=True)
            remove_other_libraries(pathlib.Path(build_py.get_package_dir(package)) / "lib")


def hide_kernel_symbols(compiler):
    """Hidden visibility for the kernels' units and the Cython module: a kernel's helpers (the shim's vector fma,
    conversions) are then called directly and inlined instead of through the PLT, and the module exports only its
    init function. The core, the emulator's runtime and the C API keep default visibility: the library the package
    carries (link_library) exports them."""
    plain_compile = compiler._compile

    def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
        path = pathlib.Path(src).resolve()
        if path.parent == GEN / "emu" or path == ROOT / "pyx" / "_native.cpp":
            extra_postargs = [*extra_postargs, "-fvisibility=hidden"]
        plain_compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    compiler._compile = _compile


def library_name() -> str:
    """The file name and soname of the library the package carries: MAJOR.MINOR in it, as in the CMake build's
    soname, since below 1.0 a minor release may change the C API's ABI (docs/embedding.md, "Versions and ABI"): a
    program built against one package then refuses to start with another instead of calling into a changed ABI."""
    abi = ".".join(sources.version().split(".")[:2])
    return f"libmtlinv.{abi}.dylib" if sys.platform == "darwin" else f"libmtlinv.so.{abi}"


def link_flag() -> str:
    """How a program names library_name() to the linker: -l, not the file's path, which CMake's pkg_check_modules
    would pass as a link option ahead of the objects (where --as-needed drops it). GNU ld and lld take -l:FILE; Apple's
    ld finds lib<name>.dylib for -l<name>."""
    name = library_name()
    return f"-l{name[3:-6]}" if sys.platform == "darwin" else f"-l:{name}"


def remove_other_libraries(lib_dir: pathlib.Path) -> None:
    """Drops a library of another version (or the unversioned name of earlier builds) from a package folder."""
    for old in lib_dir.glob("libmtlinv.*"):
        if old.name != library_name() and not old.is_dir():  # (a macOS .dSYM folder is not the library)
            old.unlink()


def link_library(compiler, ext, build_temp, lib_dir: pathlib.Path) -> pathlib.Path:
    """The C/C++ library for embedding (library_name()), linked from the extension's own objects less the Cython
    module's: the package carries it with its headers and CMake and pkg-config files (package_files), so that a C or
    C++ program builds against the installed package (docs/embedding.md). It is a second copy of the core, with its
    own state (limit, device): tensors do not pass between it and mtlinv._native."""
    # Not the Cython module, nor the kernels with planted bugs that the emulator's own checks must catch.
    planted = {p.stem for p in (ROOT / "tests" / "kernels").glob("*.metal")}
    objects = [o for o, s in zip(compiler.object_filenames(ext.sources, output_dir=build_temp), ext.sources)
               if not s.endswith("_native.cpp") and pathlib.Path(s).name.split(".")[0] not in planted]
    lib_dir.mkdir(parents=True, exist_ok=True)
    remove_other_libraries(lib_dir)
    library = lib_dir / library_name()
    if sys.platform == "darwin":
        shared = ["-dynamiclib", "-install_name", f"@rpath/{library.name}"]
    else:
        shared = ["-shared", f"-Wl,-soname,{library.name}"]
    newest = max(os.path.getmtime(o) for o in objects + list(ext.extra_objects))
    if not library.exists() or os.path.getmtime(library) < newest:
        command = [*compiler.compiler_cxx, *shared, *objects, *ext.extra_objects, *ext.extra_link_args, "-o",
                   str(library)]
        print(" ".join(command))
        subprocess.check_call(command)
    return library


def package_files(package: pathlib.Path):
    """The public headers (include/), and the CMake package (lib/cmake/mtlinv: find_package(mtlinv) with
    mtlinv.get_cmake_dir()) and mtlinv.pc (lib/pkgconfig) for the library, from the templates CMake's install
    uses (cmake/)."""
    sources.stage_headers(package / "include")
    cmake_dir = package / "lib" / "cmake" / "mtlinv"
    values = {"MTLINV_VERSION": sources.version()}
    sources.fill_template(ROOT / "cmake" / "mtlinvConfig.cmake.in", cmake_dir / "mtlinvConfig.cmake", values)
    sources.fill_template(ROOT / "cmake" / "mtlinvConfigVersion.cmake.in", cmake_dir / "mtlinvConfigVersion.cmake",
                          values)
    sources.fill_template(ROOT / "cmake" / "package" / "mtlinvTargets.cmake.in", cmake_dir / "mtlinvTargets.cmake",
                          {"MTLINV_LIBRARY": library_name()})
    frameworks = " -framework Metal -framework Foundation" if sys.platform == "darwin" else ""
    values.update(MTLINV_PC_PREFIX="../..", MTLINV_PC_LIBDIR="lib",
                  MTLINV_PC_LIBS=f"-L${{libdir}} {link_flag()} -Wl,-rpath,${{libdir}}",
                  MTLINV_PC_PRIVATE="-pthread" + frameworks)
    sources.fill_template(ROOT / "cmake" / "mtlinv.pc.in", package / "lib" / "pkgconfig" / "mtlinv.pc", values)


def macos_target(compile_args, link_args):
    """On macOS: one architecture and the deployment target (tools/macos.py)."""
    for note in macos.configure(os.environ, sysconfig.get_platform(), platform.machine()):
        print(note)
    # Explicit, in case the Python's own flags name an older release (the variable alone would then lose).
    version_min = f"-mmacosx-version-min={os.environ['MACOSX_DEPLOYMENT_TARGET']}"
    compile_args.append(version_min)
    link_args.append(version_min)


def metal_backend(units, macros, include_dirs, link_args):
    """On macOS: the Metal backend, with every kernel's MSL embedded (compiled at first use, fast math off), and a
    precompiled mtlinv/mtlinv.metallib loaded instead where Apple's Metal toolchain works (MTLINV_METALLIB=0:
    never)."""
    embed = [sys.executable, str(ROOT / "tools" / "embed_metal.py")]
    subprocess.check_call(embed + ["--out", str(GEN / "metal_source.inc")])
    units.append("objc/metal_backend.mm")
    macros.append(("MTLINV_WITH_METAL", "1"))
    include_dirs.append(str(GEN))
    link_args += ["-framework", "Metal", "-framework", "Foundation"]
    if os.environ.get("MTLINV_METALLIB", "1") == "0":
        return
    msl = GEN / "mtlinv.metal"
    subprocess.check_call(embed + ["--msl", str(msl)])
    built, why = macos.build_metallib(str(msl), str(GEN / "mtlinv.air"), str(ROOT / "mtlinv" / "mtlinv.metallib"))
    if built:
        # Found next to the extension at run time (objc/metal_backend.mm).
        macros.append(("MTLINV_METALLIB_PATH", '"mtlinv.metallib"'))
    else:
        print(f"mtlinv: WARNING: no precompiled kernels ({why}); the Metal backend compiles them at first use "
              "instead, once per process")


def cuda_backend(macros, link_args) -> list[str]:
    """With MTLINV_CUDA=1: the CUDA backend and every kernel, compiled by nvcc (tools/build_cuda.py); returns the
    objects to link."""
    import build_cuda
    cuda = build_cuda.build(ROOT, GEN / "cuda", DEBUG)
    macros += cuda["define_macros"]
    link_args += [f"-L{d}" for d in cuda["library_dirs"]] + [f"-l{lib}" for lib in cuda["libraries"]]
    return cuda["extra_objects"]


def dependencies() -> list[str]:
    """What the objects are made from besides their sources: headers, and the kernels of metal/, which reach the
    emulator's translation units through files the pre-pass generates (a unit's own text never changes)."""
    found = []
    for pattern in ("src/**/*.h", "src/**/*.cuh", "metal/*.h", "metal/*.metal", "tests/kernels/*.metal", "pyx/*.h",
                    "pyx/*.pxi", "pyx/*.pxd", "tools/msl2cpp.py", "build/gen/kernel_table.h"):
        found += sorted(rel(p) for p in ROOT.glob(pattern))
    return found


def extension() -> Extension:
    units = ["pyx/_native.pyx", *sources.sources()]
    units += [rel(u) for u in emu_units.generate(ROOT, GEN / "emu", fast_checked=DEBUG, checked=not SANITIZE)]
    kernel_table.write(GEN / "kernel_table.h")  # the plans' kernel ids (src/core/kernels.h)
    # Hidden visibility for the kernels' units: hide_kernel_symbols.
    compile_args = ["-std=c++17", *sources.COMPILE_FLAGS, "-fvisibility-inlines-hidden", "-Wall",
                    "-Wno-unused-function"]
    # A sanitized build compiles at -O0, kernels included: instrumented, the kernels' largest unit took 185 s at -O1
    # and 30 s at -O0, and the Cython module 13 minutes at -O3 on two busy cores; its tests run briefly either way.
    compile_args += ["-O0", "-g"] if SANITIZE else ["-O1", "-g"] if DEBUG else ["-O3"]
    compile_args += cpu_flags()
    link_args = []
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    include_dirs = [str(GEN), str(GEN / "emu"), "src/emu", "pyx", numpy.get_include()]
    if sys.platform == "darwin":
        macos_target(compile_args, link_args)
        metal_backend(units, macros, include_dirs, link_args)
    cuda_objects = cuda_backend(macros, link_args) if os.environ.get("MTLINV_CUDA") == "1" else []
    if SANITIZE:
        compile_args += [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer"]
        link_args += [f"-fsanitize={SANITIZE}"]
    return Extension(
        "mtlinv._native",
        sources=units,
        extra_objects=cuda_objects,
        # distutils tracks no #include, so a changed header or kernel must rebuild every object (and only the CUDA
        # objects changing must relink).
        depends=cuda_objects + dependencies(),
        language="c++",
        include_dirs=include_dirs,
        extra_compile_args=compile_args,
        # -Bsymbolic-functions: the kernels' calls into the emulator's runtime (default visibility:
        # hide_kernel_symbols) bind within the object, as calls to hidden functions do, not through the PLT.
        extra_link_args=link_args + ([] if sys.platform == "darwin" else ["-pthread", "-Wl,-Bsymbolic-functions"]),
        define_macros=macros,
    )


setup(
    version=sources.version(),
    ext_modules=cythonize([extension()], language_level=3, include_path=["pyx"]),
    cmdclass={"build_ext": BuildExt},
)
