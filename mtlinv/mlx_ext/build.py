"""Builds mtlinv._mlx_ext (CMakeLists.txt here) into the package folder, beside mtlinv._native:

    python -m mtlinv.mlx_ext.build

It needs a source checkout (an editable install: the core's headers are read from src/core), MLX (whose wheel
ships the headers and CMake config), the nanobind mlx.core was built with (the `test` extra pins it), cmake, a C++20
compiler, and the library the package carries (mtlinv/lib: `pip install -e .` or `python setup.py build_ext
--inplace` makes it). The build goes to build/mlx-ext under a file lock, so that
pytest-xdist's workers wait for one build; a later call rebuilds only what changed. mtlinv.mlx uses the module when
it imports, else its DLPack route (mtlinv.mlx.backend())."""
import fcntl
import pathlib
import shutil
import subprocess
import sys

SOURCES = pathlib.Path(__file__).resolve().parent
ROOT = SOURCES.parents[1]
OUT = ROOT / "build" / "mlx-ext"


class BuildError(RuntimeError):
    pass


def _run(command):
    r = subprocess.run(command, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"mtlinv.mlx_ext: {' '.join(command)} failed:\n{r.stdout[-4000:]}{r.stderr[-4000:]}")


def build(jobs: int = 2) -> None:
    """Configures (once) and builds the extension; raises BuildError with the tool's output when a step fails."""
    import mtlinv
    if not (ROOT / "src" / "core").is_dir():
        raise BuildError(f"mtlinv.mlx_ext: the build needs a source checkout of mtlinv (the core's headers, src/core), "
                         f"not found at {ROOT}: install mtlinv from one with `pip install -e .`")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("mtlinv.mlx_ext: cmake is not installed (pip install cmake)")
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT.parent / "mlx-ext.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (OUT / "CMakeCache.txt").exists():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            _run([cmake, "-S", str(SOURCES), "-B", str(OUT), "-DCMAKE_BUILD_TYPE=Release",
                  f"-DPython_EXECUTABLE={sys.executable}", f"-DMTLINV_ROOT={ROOT}",
                  f"-Dmtlinv_DIR={mtlinv.get_cmake_dir()}", *generator])
        _run([cmake, "--build", str(OUT), "-j", str(jobs)])


if __name__ == "__main__":
    try:
        build()
    except BuildError as e:
        sys.exit(str(e))
    print(f"mtlinv.mlx_ext: built in {ROOT / 'mtlinv'}")
