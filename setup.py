"""Builds mtlinv's native extension: the C++ core, the emulator with every kernel of metal/ compiled in, and
(on macOS) the Metal backend or (with MTLINV_CUDA=1 and nvcc) the CUDA backend.

Environment:
  MTLINV_DEBUG=1            -O1 -g, and every emulator kernel bounds-checked (not only in checking mode)
  MTLINV_SANITIZE=address,undefined   build with sanitizers (run python with the sanitizer runtime preloaded)
  MTLINV_NATIVE_ARCH=0      do not tune for this CPU (default: use FMA/F16C/AVX2 when the CPU has them)
  MTLINV_CUDA=1             also build the CUDA backend (needs nvcc; MTLINV_CUDA_ARCH=90 picks the GPU generation)
"""
import concurrent.futures
import os
import pathlib
import platform
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
    flags = []
    for feature, flag in (("fma", "-mfma"), ("f16c", "-mf16c"), ("avx2", "-mavx2")):
        if f" {feature}" in info:
            flags.append(flag)
    return flags


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
                    extra_postargs = [emu_opt if a in ("-O1", "-O3") else a for a in extra_postargs]
                kernel_compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

            self.compiler._compile = _compile
        compile_in_parallel(self.compiler, self.parallel or os.cpu_count() or 1, self.force)
        super().build_extensions()


def macos_target(compile_args, link_args):
    """On macOS: one architecture and the deployment target (tools/macos.py)."""
    for note in macos.configure(os.environ, sysconfig.get_platform(), platform.machine()):
        print(note)
    # Explicit, in case the Python's own flags name an older release (the variable alone would then lose).
    version_min = f"-mmacosx-version-min={os.environ['MACOSX_DEPLOYMENT_TARGET']}"
    compile_args.append(version_min)
    link_args.append(version_min)


def metal_backend(sources, macros, include_dirs, link_args):
    """On macOS: the Metal backend, with every kernel's MSL embedded (compiled at first use, fast math off), and a
    precompiled mtlinv/mtlinv.metallib loaded instead where Apple's Metal toolchain works (MTLINV_METALLIB=0:
    never)."""
    embed = [sys.executable, str(ROOT / "tools" / "embed_metal.py")]
    subprocess.check_call(embed + ["--out", str(GEN / "metal_source.inc")])
    sources.append("objc/metal_backend.mm")
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
    sources = ["pyx/_native.pyx"]
    for folder in ("src/core", "src/core/plans", "src/core/ops", "src/core/model", "src/emu"):
        sources += sorted(rel(p) for p in (ROOT / folder).glob("*.cpp"))
    sources += [rel(u) for u in emu_units.generate(ROOT, GEN / "emu", fast_checked=DEBUG)]
    kernel_table.write(GEN / "kernel_table.h")  # the plans' kernel ids (src/core/kernels.h)
    # Hidden visibility: kernel helpers (the shim's vector fma, conversions) are then called directly and inlined
    # instead of through the PLT; only the module's init function is exported.
    compile_args = ["-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-fvisibility=hidden",
                    "-fvisibility-inlines-hidden", "-Wall", "-Wno-unused-function"]
    compile_args += ["-O1", "-g"] if DEBUG else ["-O3"]
    compile_args += cpu_flags()
    link_args = []
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    include_dirs = [str(GEN), str(GEN / "emu"), "src/emu", "pyx", numpy.get_include()]
    if sys.platform == "darwin":
        macos_target(compile_args, link_args)
        metal_backend(sources, macros, include_dirs, link_args)
    cuda_objects = cuda_backend(macros, link_args) if os.environ.get("MTLINV_CUDA") == "1" else []
    if SANITIZE:
        compile_args += [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer"]
        link_args += [f"-fsanitize={SANITIZE}"]
    return Extension(
        "mtlinv._native",
        sources=sources,
        extra_objects=cuda_objects,
        # distutils tracks no #include, so a changed header or kernel must rebuild every object (and only the CUDA
        # objects changing must relink).
        depends=cuda_objects + dependencies(),
        language="c++",
        include_dirs=include_dirs,
        extra_compile_args=compile_args,
        extra_link_args=link_args + ([] if sys.platform == "darwin" else ["-pthread"]),
        define_macros=macros,
    )


setup(
    ext_modules=cythonize([extension()], language_level=3, include_path=["pyx"]),
    cmdclass={"build_ext": BuildExt},
)
