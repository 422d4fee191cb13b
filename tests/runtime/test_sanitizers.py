"""The op tests under AddressSanitizer and UndefinedBehaviorSanitizer: builds a sanitized copy of the extension
(setup.py's MTLINV_SANITIZE: at -O0, the emulator's kernels in their fast variant alone) in build/sanitize and runs a
subset of the op tests against it, in a Python with the ASan runtime preloaded. Any report (a heap overflow, a use
after free, an undefined shift or overflow) fails the run: UBSan halts on its first. docs/verification.md says how
to run more."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "sanitize"
# The subset: every op family's argument checks, a kernel of each family, the huge-view refusals and the fuzz of
# valid inputs; MTLINV_SANITIZE_TESTS (test paths, space-separated) runs others.
TESTS = ["tests/ops/test_argument_checks.py", "tests/ops/test_rms_norm.py", "tests/ops/test_decoder_ops.py",
         "tests/ops/test_tensor.py", "tests/fuzz/test_huge_views.py", "tests/fuzz/test_invalid_inputs.py",
         "tests/fuzz/test_valid_inputs.py"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sanitizer runtimes of Linux's g++")]


def preload():
    """LD_PRELOAD for a Python that loads a sanitized extension: the ASan runtime, and libstdc++ with it, whose
    __cxa_throw ASan must find at start-up (loaded later, with the extension, the first C++ exception aborts
    with "CHECK failed: ... real___cxa_throw")."""
    paths = [subprocess.run(["g++", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
             for lib in ("libasan.so", "libstdc++.so")]
    return " ".join(paths) if all(os.path.isabs(p) and os.path.exists(p) for p in paths) else None


def build_sanitized():
    """build/sanitize/lib: the package's Python files and the sanitized extension (rebuilt only where a source
    changed)."""
    lib = OUT / "lib"
    env = dict(os.environ, MTLINV_SANITIZE="address,undefined")
    env.pop("MTLINV_EMU_OPT", None)  # the kernels at the build's -O0
    r = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", str(lib), "--build-temp",
                        str(OUT / "temp"), "-j", "2"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shutil.copytree(ROOT / "mtlinv", lib / "mtlinv", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.metallib"))
    return lib


# The control: a planted out-of-range load (tests/kernels/planted.metal) in the emulator's unchecked build, which
# ASan must report; without it a run that sees no report could be one that cannot see any.
PLANTED = """
import struct, numpy as np, mtlinv
from mtlinv import _native
x, y = mtlinv.asarray(np.arange(64, dtype=np.float32)), mtlinv.asarray(np.zeros(64, np.float32))
_native._launch("emutest_out_of_range", (1,), (64,), struct.pack("<II", 64, 64), [x, y])
"""


# Checking mode in the sanitized build: refused with the reason.
CHECKING = """
import numpy as np, mtlinv
try:
    mtlinv.rms_norm(np.ones((1, 8), np.float32), np.ones(8, np.float32))
except mtlinv.MtlinvError as e:
    print(e)
"""


def report(r):
    """The run's output, with the start of stderr, where a sanitizer's report is, before Python's own trace."""
    return r.stdout[-4000:] + "\n--- stderr ---\n" + r.stderr[:6000] + "\n...\n" + r.stderr[-2000:]


def test_op_tests_under_asan_and_ubsan():
    runtime = preload()
    if runtime is None:
        if os.environ.get("CI"):
            pytest.fail("g++'s libasan is required in CI")
        pytest.skip("g++ has no libasan here")
    lib = build_sanitized()
    tests = os.environ.get("MTLINV_SANITIZE_TESTS", "").split() or TESTS
    env = dict(os.environ, LD_PRELOAD=runtime, PYTHONPATH=str(lib), MTLINV_DEVICE="emu",
               # Python's own allocations outlive the process on purpose: leak reports would be all noise.
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    # From inside build/sanitize/lib, so that `import mtlinv` finds the sanitized copy, not the in-place build.
    check = "import mtlinv._native as n, sys; assert n.__file__.startswith(sys.argv[1]), n.__file__"
    r = subprocess.run([sys.executable, "-c", check, str(lib)], cwd=lib, env=env, capture_output=True, text=True)
    assert r.returncode == 0, report(r)
    r = subprocess.run([sys.executable, "-c", PLANTED], cwd=lib, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in r.stderr, report(r)
    # The sanitized build has the kernels' fast variant alone (half the build): checking mode says so, not a crash.
    r = subprocess.run([sys.executable, "-c", CHECKING], cwd=lib, env=dict(env, MTLINV_EMU_CHECK="1"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "checking mode needs the bounds-checked kernels" in r.stdout, report(r)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), *(str(ROOT / t) for t in tests)],
                       cwd=lib, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, report(r)
    assert "runtime error:" not in r.stderr and "Sanitizer" not in r.stderr, report(r)
    assert " passed" in r.stdout, report(r)
