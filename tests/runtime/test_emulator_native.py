"""The emulator's own C++ test programs (tests/emu/): runtime semantics (barriers, simd exchanges, divergence,
planted races, exceptions, per-fiber rounding modes) with assembly fibers, under ASan+UBSan and with the portable
ucontext fibers; the metal_stdlib shim (half/bfloat conversions exhaustively, vectors, math, checked pointers, every
kernel compiled fast and checked with g++ and clang); and all of it on arm64, cross-compiled and run under
qemu-aarch64 with the library's examples (no arm64 machine is at hand: qemu executes the arm64 code, the fiber
switch's assembly included, and tells nothing of its speed)."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

ARM64_TOOLS = ["aarch64-linux-gnu-g++", "aarch64-linux-gnu-gcc", "qemu-aarch64", "cmake"]


@pytest.mark.parametrize("script", ["build_and_run.sh", "build_shim_test.sh", "build_and_run_arm64.sh"])
def test_emulator_program(script, tmp_path):
    if script.endswith("arm64.sh") and sys.platform == "darwin":
        pytest.skip("a Linux cross build under qemu; on an Apple-silicon Mac build_and_run.sh runs arm64 natively")
    missing = [t for t in ARM64_TOOLS if shutil.which(t) is None] if script.endswith("arm64.sh") else []
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs {', '.join(missing)} (.ci/run installs g++-aarch64-linux-gnu and qemu-user)")
        pytest.skip(f"not installed: {', '.join(missing)} (apt-get install g++-aarch64-linux-gnu qemu-user)")
    r = subprocess.run(["bash", str(ROOT / "tests" / "emu" / script), str(tmp_path)], capture_output=True, text=True,
                       timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
