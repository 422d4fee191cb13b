"""The CMake build of the C++ library (libmtlinv, the C API) and the programs of tests/capi, shared by the tests that
use it (tests/ops/test_embedding.py, tests/fuzz/test_capi.py): one build in build/cmake-tests, made under a file
lock, so that pytest-xdist's workers wait for one build instead of each making its own, and a later run rebuilds
only what changed."""
import fcntl
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "cmake-tests"


def build() -> pathlib.Path:
    """The build directory, built; skips where cmake is missing (fails in CI, where it is a test dependency)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        if os.environ.get("CI"):
            pytest.fail("cmake is required in CI (pip install cmake)")
        pytest.skip("cmake is not installed")
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT.parent / "cmake-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (OUT / "CMakeCache.txt").exists():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            # -O1: the programs run small calls, and the library's every kernel is compiled twice (fast and checked
            # emulator builds); at CMake's Release -O3 this build was the second longest step of CI.
            r = subprocess.run([cmake, "-S", str(ROOT), "-B", str(OUT), "-DCMAKE_BUILD_TYPE=Release", "-DMTLINV_OPT=-O1",
                                "-DMTLINV_BUILD_TESTS=ON", *generator], capture_output=True, text=True)
            assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        r = subprocess.run([cmake, "--build", str(OUT), "-j", "2"], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return OUT
