"""Reference conversions for tests/emu/test_shim.cpp: numpy's float32 -> float16 and ml_dtypes' float32 -> bfloat16
of a million floats (random bits, then the half range and its edges), as f16_numpy.bin and bf16_ml_dtypes.bin in
DIR, each holding the count, the float bits and the 16-bit results. Used by tests/emu/build_shim_test.sh and
tests/emu/build_and_run_arm64.sh.

    python3 tests/emu/write_conversion_refs.py DIR
"""
import sys

import numpy as np


def main(out):
    rng = np.random.default_rng(2024)
    bits = np.concatenate([
        rng.integers(0, 2**32, size=500_000, dtype=np.uint64).astype(np.uint32),
        # signs, exponents 2^-27 .. 2^17 (the half range and its edges), random significands
        (rng.integers(0, 2, 500_000, dtype=np.uint32) << 31)
        | (rng.integers(100, 145, 500_000, dtype=np.uint32) << 23)
        | rng.integers(0, 2**23, 500_000, dtype=np.uint32),
    ]).astype(np.uint32)

    def write(name, results):
        with open(f"{out}/{name}", "wb") as f:
            f.write(np.uint32(bits.size).tobytes())
            f.write(bits.tobytes())
            f.write(results.astype(np.uint16).tobytes())

    with np.errstate(all="ignore"):
        write("f16_numpy.bin", bits.view(np.float32).astype(np.float16).view(np.uint16))
        try:
            import ml_dtypes
        except ImportError:
            print("note: ml_dtypes missing, bfloat reference skipped")
            return
        write("bf16_ml_dtypes.bin", bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))


if __name__ == "__main__":
    main(sys.argv[1])
