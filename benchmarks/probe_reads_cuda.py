#!/usr/bin/env python3
"""How fast an NVIDIA GPU reads a weight matrix in qgemv_mma's access pattern, with no arithmetic: a hardware probe
that separates the pattern's own ceiling from the kernel's (benchmarks/results/h200.md, seventh session).

    python benchmarks/probe_reads_cuda.py [--n 14336] [--row-bytes 2048] [--splits 4] [--reps 30]

Not an mtlinv kernel (those are written once in MSL under metal/): three read-only CUDA kernels compiled here by
CuPy, each XOR-folding what it reads into one word per thread so that no load is optimised away:
  - mma:        qgemv_mma's pattern. A simdgroup owns 16 rows; lane 4 g + t reads 16 bytes of rows g and g + 8 at
                byte 64 s + 16 t of step s, the simdgroups of a threadgroup taking steps in turn (--splits), and
                IN_FLIGHT steps' loads issued before any is used (1 as the kernel's loop runs, 2 and 4 for more).
  - rows:       gemv_nk's pattern: a simdgroup reads 4 rows in 512-byte pieces, 16 bytes per lane.
  - stream:     the whole matrix as one array, 16 bytes per thread per iteration of a grid-stride loop.
Each launch reads enough copies of the matrix, one after the other, to exceed L2 (50 MB on an H200) and dwarf the
launch itself; timed by events around batches of launches (medians), per copy. The default shape is qgemv's
4-bit weights at K = 4096, N = 14336 (2048 bytes per row); the percentage is of the device-to-device copy.
"""
import argparse

import cupy as cp
import numpy as np

SOURCE = r"""
// Each kernel reads `copies` copies of the matrix (back to back in w), one after the other, so that a launch's
// GPU time far exceeds a launch from Python.
extern "C" __global__ void mma(const uint4* w, unsigned* out, unsigned rows, unsigned row_units, unsigned splits,
                               unsigned in_flight, unsigned copies) {
  const unsigned lane = threadIdx.x % 32, sg = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const unsigned n0 = blockIdx.x * 16;
  const unsigned steps = row_units / 4;
  unsigned acc = 0;
  for (unsigned c = 0; c < copies; ++c) {
    const uint4* r0 = w + ((unsigned long long)c * rows + min(n0 + g, rows - 1)) * row_units;
    const uint4* r1 = w + ((unsigned long long)c * rows + min(n0 + g + 8, rows - 1)) * row_units;
    for (unsigned s = sg; s < steps; s += in_flight * splits) {
      uint4 a[4], b[4];
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned step = min(s + i * splits, steps - 1);  // past the row: its last step again
        if (i < in_flight) { a[i] = __ldg(r0 + 4 * step + t); b[i] = __ldg(r1 + 4 * step + t); }
      }
#pragma unroll
      for (unsigned i = 0; i < 4; ++i) {
        if (i < in_flight) acc ^= a[i].x ^ a[i].y ^ a[i].z ^ a[i].w ^ b[i].x ^ b[i].y ^ b[i].z ^ b[i].w;
      }
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void rows(const uint4* w, unsigned* out, unsigned rows_total, unsigned row_units,
                                unsigned copies) {
  const unsigned lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  unsigned acc = 0;
  for (unsigned r = 0; r < 4 * copies; ++r) {
    const uint4* row = w + ((unsigned long long)(r / 4) * rows_total + min(warp * 4 + r % 4, rows_total - 1))
                           * row_units;
    for (unsigned u = lane; u < row_units; u += 32) {
      const uint4 v = __ldg(row + u);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void stream(const uint4* w, unsigned* out, unsigned long long units) {  // all copies
  unsigned acc = 0;
  for (unsigned long long u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += gridDim.x * blockDim.x) {
    const uint4 v = __ldg(w + u);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""


def median_time(calls, reps, batch=10):
    """Median seconds of one call, over reps batches of `batch` calls back to back between two events, rotating
    through `calls`, after a warm-up: in a batch, each launch from Python overlaps the kernel before it."""
    for c in calls:
        c()
    times = []
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        start.record()
        for i in range(batch):
            calls[i % len(calls)]()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3 / batch)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=14336, help="rows (qgemv's N)")
    ap.add_argument("--row-bytes", type=int, default=2048, help="bytes per row, a multiple of 64 (K / 2 at 4 bits)")
    ap.add_argument("--splits", type=int, default=4, help="simdgroups per threadgroup in the mma pattern")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    if args.row_bytes <= 0 or args.row_bytes % 64 or args.n <= 0 or not 0 < args.splits <= 32:
        ap.error(f"need --n > 0, --splits in 1..32 (32 threads each, 1024 at most) and --row-bytes a positive "
                 f"multiple of 64; got {args.n}, {args.splits}, {args.row_bytes}")
    module = cp.RawModule(code=SOURCE)
    nbytes = args.n * args.row_bytes
    copies = max(3, -(-3 * 50 * 2**20 // nbytes))  # more than L2 (50 MB on an H200) between two reads of a copy
    mats = cp.random.randint(0, 2**31, size=copies * nbytes // 4, dtype=cp.uint32)
    src, dst = cp.zeros(256 * 2**20 // 4, dtype=cp.uint32), cp.empty(256 * 2**20 // 4, dtype=cp.uint32)
    copy_bw = 2 * src.nbytes / median_time([lambda: cp.copyto(dst, src)], 5, batch=5)
    units = args.row_bytes // 16
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# {name}: copy {copy_bw / 1e9:.0f} GB/s; {args.n} rows of {args.row_bytes} bytes ({nbytes / 1e6:.1f} MB), "
          f"{copies} copies\n")
    print("| pattern | us | GB/s | % of copy |\n| --- | ---: | ---: | ---: |")
    warps = -(-args.n // 4)
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    # One word per thread of the largest grid below.
    out = cp.zeros(max(-(-args.n // 16) * 32 * args.splits, -(-warps // 4) * 128, sms * 8 * 256), dtype=cp.uint32)
    cases = []
    mma = module.get_function("mma")
    for in_flight in (1, 2, 4):
        cases.append((f"mma, {args.splits} splits, {in_flight} step(s) in flight",
                      lambda m, f=in_flight: mma((-(-args.n // 16),), (32 * args.splits,),
                                                 (m, out, np.uint32(args.n), np.uint32(units),
                                                  np.uint32(args.splits), np.uint32(f), np.uint32(copies)))))
    rows = module.get_function("rows")
    cases.append(("rows (4 per simdgroup, 512-byte pieces)",
                  lambda m: rows((-(-warps // 4),), (128,),
                                 (m, out, np.uint32(args.n), np.uint32(units), np.uint32(copies)))))
    stream = module.get_function("stream")
    cases.append(("stream (grid-stride, 16 bytes per thread)",
                  lambda m: stream((sms * 8,), (256,), (m, out, np.uint64(copies * nbytes // 16)))))
    for label, launch in cases:
        t = median_time([lambda: launch(mats)], args.reps) / copies
        print(f"| {label} | {t * 1e6:.1f} | {nbytes / t / 1e9:.0f} | {100 * nbytes / t / copy_bw:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
