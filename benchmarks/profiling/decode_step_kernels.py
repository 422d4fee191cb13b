#!/usr/bin/env python3
"""Where one decoding step's device time goes, kernel by kernel (CUDA, Nsight Compute).

With launch batches the decoder's step on an H200 is bound by the device, not by the host (profile_decode.py):
this runs one forward of the llama decoder at M rows under `ncu`, which times each kernel alone, and sums the
durations by kernel. The sum against profile_decode's "gpu us" is the time between kernels.

    python3 benchmarks/profiling/decode_step_kernels.py [--model PATH] [--position 64] [--m 1]

It runs ncu on itself (--clock-control none, as on this project's GPU machine; only the profiled forward, between
cudaProfilerStart and cudaProfilerStop, after warm-up forwards). The model is profile_decode.py's (SmolLM2-135M's
shape with random 4-bit weights unless --model names a GGUF file). The forward runs without launch batches, so each
kernel is a launch of its own; the kernels and their arguments are the batched forward's.
"""
from __future__ import annotations

import argparse
import collections
import csv
import io
import os
import shutil
import subprocess
import sys

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # profile_decode.py, timing.py
import mtlinv  # noqa: E402
from mtlinv.model.device_model import DeviceModel  # noqa: E402
from profile_decode import load_weights  # noqa: E402
from timing import cuda_module  # noqa: E402

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}  # to us


def profiled_forward(args) -> None:
    torch = cuda_module("torch")
    if torch is None:
        raise SystemExit("decode_step_kernels: needs the CUDA backend and torch (for cudaProfilerStart)")
    _, weights = load_weights(args.model)
    model = DeviceModel(weights, args.position + args.m)
    model.forward_on_device([1] * args.position, 0)
    tokens = [(7 * i + 3) % weights.config.vocab for i in range(args.m)]
    mtlinv._native._set_launch_batches(False)
    with mtlinv.batch_invariant(max(args.m, 5)):
        for _ in range(3):
            model.rollback(args.position)
            model.forward_on_device(tokens, args.position)
        mtlinv.synchronize()
        model.rollback(args.position)
        torch.cuda.profiler.start()
        model.forward_on_device(tokens, args.position)
        mtlinv.synchronize()
        torch.cuda.profiler.stop()


def summarize(report: str) -> None:
    lines = report[report.index('"ID"'):]  # ncu prints its own log lines first
    rows = list(csv.reader(io.StringIO(lines)))
    header, units, data = rows[0], rows[1], rows[2:]
    name, time = header.index("Kernel Name"), header.index("gpu__time_duration.sum")
    scale = UNITS[units[time]]
    by_kernel = collections.defaultdict(list)
    for row in data:
        by_kernel[row[name].split("(")[0]].append(float(row[time].replace(",", "")) * scale)
    total = sum(sum(v) for v in by_kernel.values())
    print(f"{len(data)} kernels, {total:.0f} us in all (each timed alone)")
    print(f"{'kernel':<40} {'launches':>8} {'us each (median)':>16} {'us in all':>9} {'share':>6}")
    for kernel, times in sorted(by_kernel.items(), key=lambda kv: -sum(kv[1])):
        times.sort()
        print(f"{kernel:<40} {len(times):>8} {times[len(times) // 2]:>16.2f} {sum(times):>9.0f} "
              f"{sum(times) / total:>6.1%}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a GGUF file (default: a random model of SmolLM2-135M's shape)")
    ap.add_argument("--position", type=int, default=64, help="cache positions before the profiled step")
    ap.add_argument("--m", type=int, default=1, help="rows of the profiled forward")
    ap.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)  # the run under ncu
    args = ap.parse_args(argv)
    if args.position < 1 or args.m < 1:
        ap.error(f"--position and --m must be >= 1, got {args.position} and {args.m}")
    if args.profiled:
        profiled_forward(args)
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("decode_step_kernels: ncu (Nsight Compute) is not on PATH")
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", "gpu__time_duration.sum",
           "--csv", "--page", "raw", sys.executable, os.path.abspath(__file__), "--profiled",
           "--position", str(args.position), "--m", str(args.m)] + (["--model", args.model] if args.model else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 or '"ID"' not in out.stdout:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"decode_step_kernels: ncu failed (exit status {out.returncode})")
    summarize(out.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
