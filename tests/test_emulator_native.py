"""The emulator's own C++ test programs (tests/emu/): runtime semantics (barriers, simd exchanges, divergence,
planted races, exceptions) with assembly fibers, under ASan+UBSan and with the portable ucontext fibers; and the
metal_stdlib shim (half/bfloat conversions exhaustively, vectors, math, checked pointers, every kernel compiled
fast and checked with g++ and clang)."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("script", ["build_and_run.sh", "build_shim_test.sh"])
def test_emulator_program(script, tmp_path):
    r = subprocess.run(["bash", str(ROOT / "tests" / "emu" / script), str(tmp_path)], capture_output=True, text=True,
                       timeout=1500)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
