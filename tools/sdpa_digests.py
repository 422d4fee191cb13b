"""Digests of sdpa's outputs over dtypes, head sizes, key counts, query counts (a prefill's among them, which runs
another kernel) and special values, one line each and one over all: two builds print the same lines exactly when
every output has the same bits. For a change that must not move a result, in each of the trees an A/B compares:

    python3 tools/sdpa_digests.py > digests.txt      # then diff the trees' files
    OUT=DIR bash benchmarks/cuda/ab_trees.sh run NAME -- python3 tools/sdpa_digests.py   # the same, logs in DIR

Runs on whichever device mtlinv picks (MTLINV_DEVICE); the largest case holds 20000 keys of 8 heads.
"""
import argparse
import hashlib

import ml_dtypes
import numpy as np

import mtlinv

PREFILL_QUERIES = 40


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rng = np.random.default_rng(7)
    total = hashlib.sha256()

    def emit(label, out):
        data = np.asarray(out).tobytes()
        total.update(data)
        print(label, hashlib.sha256(data).hexdigest()[:16], flush=True)

    mtlinv.set_limit(8)
    for dtype in (ml_dtypes.bfloat16, np.float16, np.float32):
        name = np.dtype(dtype).name
        for d in (64, 128):
            for keys in (37, 256, 1000, 4096, 20000):
                k = (3 * rng.standard_normal((8, keys, d))).astype(dtype)
                v = rng.standard_normal((8, keys, d)).astype(dtype)
                for lq in (1, 2, 5, 8):
                    q = rng.standard_normal((32, lq, d)).astype(dtype)
                    q[0] = 0  # every score of head 0 is zero
                    for scale in (None, -1.0):
                        emit(f"{name} D={d} keys={keys} Lq={lq} scale={scale}", mtlinv.sdpa(q, k, v, scale=scale))
                if keys >= PREFILL_QUERIES:  # past the limit and the split path's queries: the one-pass prefill kernel
                    q = rng.standard_normal((32, PREFILL_QUERIES, d)).astype(dtype)
                    emit(f"{name} D={d} keys={keys} Lq={PREFILL_QUERIES}", mtlinv.sdpa(q, k, v))
                k[3, keys // 2] = np.inf  # an infinite key in kv head 3, a NaN key in head 5, an infinite value in 6
                k[5, keys // 3] = np.nan
                v[6, keys // 4] = np.inf
                q = rng.standard_normal((32, 8, d)).astype(dtype)
                emit(f"{name} D={d} keys={keys} Lq=8 special values", mtlinv.sdpa(q, k, v))
    print("all", total.hexdigest())


if __name__ == "__main__":
    main()
