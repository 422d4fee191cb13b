#!/usr/bin/env python3
"""How fast an NVIDIA GPU reads a weight matrix in qgemv_mma's access pattern, with no arithmetic: a hardware probe
that separates the pattern's own ceiling from the kernel's (docs/decisions.md, "Measuring on a GPU").

    python benchmarks/profiling/probe_reads_cuda.py [--n 14336] [--row-bytes 2048] [--splits 4] [--reps 30] [--single]

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

--single times what one call of an mtlinv op can reach instead: each launch reads one copy (the launches rotate
through the copies, so each comes from HBM), timed alone by an event pair as benchmarks/cuda/bench_cuda.py times the
ops (a spin kernel first holds the GPU while the host queues every launch). That includes the launch, the ramp-up
and the tail a real call pays, and an empty kernel's time is printed as the floor of any call.
"""
import argparse

import numpy as np

try:  # optional so that --help works anywhere; main() and the floor need it
    import cupy as cp
except ImportError:
    cp = None

SPIN_CYCLES = 20_000_000  # ~10 ms at boost clock: longer than the host needs to queue the timed launches

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

// A staged matrix-unit GEMV's pattern: a simdgroup owns 16 rows and takes one 128-byte line of each per step (the
// simdgroups of a threadgroup taking steps in turn, `in_flight` steps loaded before any is used); each load covers
// 4 rows' lines (8 lanes a row), where the mma pattern's loads each touch half of 8 lines. With `staged`, the lines
// go through shared memory into the mma fragment layout (lane 4 g + t: 16 bytes of rows g and g + 8 per 64 bytes),
// as a kernel that loads this way must: [simdgroup, step][row][unit ^ row % 8], which spreads both the stores
// (4 rows of 8 units) and the fragment loads (8 rows of 4 units) over all banks. splits * in_flight <= 16.
extern "C" __global__ void lines(const uint4* w, unsigned* out, unsigned rows, unsigned row_units, unsigned splits,
                                 unsigned in_flight, unsigned staged, unsigned copies) {
  __shared__ uint4 stage[16 * 16 * 8];
  const unsigned lane = threadIdx.x % 32, sg = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const unsigned n0 = blockIdx.x * 16;
  const unsigned steps = row_units / 8;
  unsigned acc = 0;
  for (unsigned c = 0; c < copies; ++c) {
    for (unsigned s = sg; s < steps; s += in_flight * splits) {
      uint4 a[2][4];
#pragma unroll
      for (unsigned f = 0; f < 2; ++f) {
        const unsigned step = min(s + f * splits, steps - 1);  // past the row: its last step again
#pragma unroll
        for (unsigned i = 0; i < 4; ++i) {
          const unsigned r = min(n0 + 4 * i + lane / 8, rows - 1);
          if (f < in_flight) a[f][i] = __ldg(w + ((unsigned long long)c * rows + r) * row_units + 8 * step + lane % 8);
        }
      }
      if (staged) {
        uint4* mine = stage + sg * in_flight * 128;
#pragma unroll
        for (unsigned f = 0; f < 2; ++f) {
#pragma unroll
          for (unsigned i = 0; i < 4; ++i) {
            const unsigned r = 4 * i + lane / 8;
            if (f < in_flight) mine[f * 128 + r * 8 + ((lane % 8) ^ (r % 8))] = a[f][i];
          }
        }
        __syncwarp();
#pragma unroll
        for (unsigned f = 0; f < 2; ++f) {
#pragma unroll
          for (unsigned b = 0; b < 2; ++b) {
            if (f < in_flight) {
              a[f][2 * b] = mine[f * 128 + g * 8 + ((4 * b + t) ^ g)];
              a[f][2 * b + 1] = mine[f * 128 + (g + 8) * 8 + ((4 * b + t) ^ g)];
            }
          }
        }
        __syncwarp();
      }
#pragma unroll
      for (unsigned f = 0; f < 2; ++f) {
#pragma unroll
        for (unsigned i = 0; i < 4; ++i) {
          if (f < in_flight) acc ^= a[f][i].x ^ a[f][i].y ^ a[f][i].z ^ a[f][i].w;
        }
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

extern "C" __global__ void empty(unsigned* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = 0;
}

extern "C" __global__ void spin(long long cycles) {  // holds the GPU while the host queues the timed launches
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
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


def single_call_times(calls, reps, spin):
    """Seconds of each of `reps` launches, each timed alone by an event pair, rotating through `calls` (one per
    copy), as bench_cuda.py's event_times: a spin kernel first, so that no launch gap from Python falls inside a
    pair."""
    for c in calls:
        c()
    cp.cuda.Device().synchronize()
    starts = [cp.cuda.Event() for _ in range(reps)]
    stops = [cp.cuda.Event() for _ in range(reps)]
    spin((1,), (1,), (np.int64(SPIN_CYCLES),))
    for i in range(reps):
        starts[i].record()
        calls[i % len(calls)]()
        stops[i].record()
    stops[-1].synchronize()
    return [cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in zip(starts, stops)]


def one_call_read_floor(nbytes, reps=40):
    """Seconds of `reps` launches (each alone) of the plain stream kernel; each launch of the plain stream kernel takes to read `nbytes` from HBM, timed as --single times it:
    the size-matched floor of an op's call that must read those bytes (benchmarks/cuda/bench_cuda.py prints its ops'
    times against it)."""
    module = cp.RawModule(code=SOURCE)
    stream, spin = module.get_function("stream"), module.get_function("spin")
    units = -(-nbytes // 16)
    copies = max(3, -(-3 * 50 * 2**20 // (16 * units)))  # more than L2 between two reads of a copy
    mats = cp.ones(copies * units * 4, dtype=cp.uint32)
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    out = cp.zeros(sms * 8 * 256, dtype=cp.uint32)
    views = [mats[i * units * 4:(i + 1) * units * 4] for i in range(copies)]
    calls = [lambda v=v: stream((sms * 8,), (256,), (v, out, np.uint64(units))) for v in views]
    return single_call_times(calls, reps, spin)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=14336, help="rows (qgemv's N)")
    ap.add_argument("--row-bytes", type=int, default=2048, help="bytes per row, a multiple of 64 (K / 2 at 4 bits)")
    ap.add_argument("--splits", type=int, default=4, help="simdgroups per threadgroup in the mma pattern")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--single", action="store_true",
                    help="time single launches of one copy each, as an op's call is timed (see above)")
    args = ap.parse_args()
    if cp is None:
        ap.error("needs CuPy and an NVIDIA GPU")
    if args.row_bytes <= 0 or args.row_bytes % 64 or args.n <= 0 or not 0 < args.splits <= 32 or args.reps <= 0:
        ap.error(f"need --n > 0, --reps > 0, --splits in 1..32 (32 threads each, 1024 at most) and --row-bytes a "
                 f"positive multiple of 64; got {args.n}, {args.reps}, {args.splits}, {args.row_bytes}")
    module = cp.RawModule(code=SOURCE)
    nbytes = args.n * args.row_bytes
    copies = max(3, -(-3 * 50 * 2**20 // nbytes))  # more than L2 (50 MB on an H200) between two reads of a copy
    mats = cp.random.randint(0, 2**31, size=copies * nbytes // 4, dtype=cp.uint32)
    src, dst = cp.zeros(256 * 2**20 // 4, dtype=cp.uint32), cp.empty(256 * 2**20 // 4, dtype=cp.uint32)
    copy_bw = 2 * src.nbytes / median_time([lambda: cp.copyto(dst, src)], 5, batch=5)
    units = args.row_bytes // 16
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    mode = "one copy per launch, each launch timed alone" if args.single else f"{copies} copies per launch"
    print(f"# {name}: copy {copy_bw / 1e9:.0f} GB/s; {args.n} rows of {args.row_bytes} bytes ({nbytes / 1e6:.1f} MB), "
          f"{copies} copies; {mode}\n")
    print("| pattern | us | GB/s | % of copy |\n| --- | ---: | ---: | ---: |")
    warps = -(-args.n // 4)
    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    # One word per thread of the largest grid below.
    out = cp.zeros(max(-(-args.n // 16) * 32 * args.splits, -(-warps // 4) * 128, sms * 8 * 256), dtype=cp.uint32)
    # Each case launches its kernel on matrices m, `c` copies back to back.
    cases = []
    mma = module.get_function("mma")
    for in_flight in (1, 2, 4):
        cases.append((f"mma, {args.splits} splits, {in_flight} step(s) in flight",
                      lambda m, c, f=in_flight: mma((-(-args.n // 16),), (32 * args.splits,),
                                                    (m, out, np.uint32(args.n), np.uint32(units),
                                                     np.uint32(args.splits), np.uint32(f), np.uint32(c)))))
    lines = module.get_function("lines")
    for in_flight, staged in ((1, 0), (2, 0), (1, 1), (2, 1)):
        if args.row_bytes % 128 == 0 and args.splits * in_flight <= 16:
            cases.append((f"lines, {args.splits} splits, {in_flight} step(s) in flight{', staged' if staged else ''}",
                          lambda m, c, f=in_flight, st=staged: lines(
                              (-(-args.n // 16),), (32 * args.splits,),
                              (m, out, np.uint32(args.n), np.uint32(units), np.uint32(args.splits), np.uint32(f),
                               np.uint32(st), np.uint32(c)))))
    rows = module.get_function("rows")
    cases.append(("rows (4 per simdgroup, 512-byte pieces)",
                  lambda m, c: rows((-(-warps // 4),), (128,),
                                    (m, out, np.uint32(args.n), np.uint32(units), np.uint32(c)))))
    stream = module.get_function("stream")
    cases.append(("stream (grid-stride, 16 bytes per thread)",
                  lambda m, c: stream((sms * 8,), (256,), (m, out, np.uint64(c * nbytes // 16)))))
    if args.single:
        spin = module.get_function("spin")
        empty = module.get_function("empty")
        t = np.median(single_call_times([lambda: empty((sms,), (32,), (out,))], args.reps, spin))
        print(f"| empty kernel (the floor of any call) | {t * 1e6:.1f} | - | - |", flush=True)
        words = nbytes // 4
        views = [mats[i * words:(i + 1) * words] for i in range(copies)]
    for label, launch in cases:
        if args.single:
            t = np.median(single_call_times([lambda v=v: launch(v, 1) for v in views], args.reps, spin))
        else:
            t = median_time([lambda: launch(mats, copies)], args.reps) / copies
        print(f"| {label} | {t * 1e6:.1f} | {nbytes / t / 1e9:.0f} | {100 * nbytes / t / copy_bw:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
