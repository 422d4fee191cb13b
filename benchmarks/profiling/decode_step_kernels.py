#!/usr/bin/env python3
"""Where one decoding step's device time goes, kernel by kernel (CUDA, Nsight Compute).

With launch batches the decoder's step on an H200 is bound by the device, not by the host (profile_decode.py):
this runs one forward of the llama decoder at M rows under `ncu`, which times each kernel alone, and sums the
durations by kernel, with the DRAM bytes each kernel moved, the bandwidth that makes, and its achieved occupancy.
The sum against the step's time (profile_decode's "gpu us", bench_decode_step's "step") is the time between
kernels.

    python3 benchmarks/profiling/decode_step_kernels.py [--model PATH | --shape 8b [--scales float32 | --gguf Q4_K]]
        [--position 64] [--m 1]

It runs ncu on itself (--clock-control none, as on this project's GPU machine; only the profiled forward, between
cudaProfilerStart and cudaProfilerStop, after warm-up forwards). The model is profile_decode.py's (SmolLM2-135M's
shape with random 4-bit weights) unless --model names a GGUF file; `--shape 8b` is bench_decode_step.py's default
model (an 8B llama's shapes, random 4-bit g64 codes, --scales float32 or bfloat16, or with --gguf random blocks
of a GGUF type as the model loader imports them), whose cache is left as allocated (the step's time does not depend
on the cached values) rather than filled by a prefill. The forward runs without launch batches, so each kernel is a
launch of its own; the kernels and their arguments are the batched forward's.
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
import bench_decode_step  # noqa: E402
import mtlinv  # noqa: E402
from mtlinv.model.device_model import DeviceModel  # noqa: E402
from profile_decode import load_weights  # noqa: E402
from timing import cuda_module  # noqa: E402

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}  # to us
BYTE_UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
TIME, READ, WRITTEN, OCCUPANCY = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                                  "sm__warps_active.avg.pct_of_peak_sustained_active")


def weight_form(args):
    """The 8b shape's weights as bench_decode_step.py's arguments."""
    if args.gguf:
        return ["--gguf", args.gguf]
    return ["--scales", args.scales or "float32"]


def model_weights(args):
    """The profiled model's weights and whether its cache must be filled by a prefill."""
    if args.shape == "8b":
        shape = bench_decode_step.parse_args(weight_form(args) + ["--context", str(args.position)])
        config = mtlinv.model.LlamaConfig(n_layers=shape.layers, n_heads=shape.heads, n_kv_heads=shape.kv_heads,
                                          hidden=shape.hidden, ffn=shape.ffn, head_dim=shape.head_dim,
                                          rope_theta=500000.0, rms_eps=1e-5, vocab=shape.vocab,
                                          context=args.position + args.m)
        return bench_decode_step.random_weights(config, shape)[0], False
    return load_weights(args.model)[1], True


def profiled_forward(args) -> None:
    torch = cuda_module("torch")
    if torch is None:
        raise SystemExit("decode_step_kernels: needs the CUDA backend and torch (for cudaProfilerStart)")
    weights, prefill = model_weights(args)
    model = DeviceModel(weights, args.position + args.m)
    if prefill:
        model.forward_on_device([1] * args.position, 0)
    else:
        model.kv_len = args.position
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
    col = {key: header.index(key) for key in (TIME, READ, WRITTEN, OCCUPANCY)}
    name = header.index("Kernel Name")

    def value(row, key):
        number = float(row[col[key]].replace(",", ""))
        unit = units[col[key]]
        return number * (UNITS[unit] if key == TIME else BYTE_UNITS.get(unit, 1.0))

    by_kernel = collections.defaultdict(list)  # kernel -> [(us, bytes moved, occupancy %)]
    for row in data:
        by_kernel[row[name].split("(")[0]].append((value(row, TIME), value(row, READ) + value(row, WRITTEN),
                                                   value(row, OCCUPANCY)))
    total = sum(t for runs in by_kernel.values() for t, _, _ in runs)
    moved = sum(b for runs in by_kernel.values() for _, b, _ in runs)
    print(f"{len(data)} kernels, {total:.0f} us in all (each timed alone), {moved / 1e9:.3f} GB of DRAM traffic, "
          f"{moved / total / 1e6:.2f} TB/s over their sum")
    print(f"{'kernel':<40} {'launches':>8} {'us each (median)':>16} {'us in all':>9} {'share':>6} "
          f"{'MB each':>8} {'TB/s':>5} {'occupancy':>9}")
    for kernel, runs in sorted(by_kernel.items(), key=lambda kv: -sum(t for t, _, _ in kv[1])):
        times = sorted(t for t, _, _ in runs)
        us, nbytes = sum(times), sum(b for _, b, _ in runs)
        occupancy = sum(o for _, _, o in runs) / len(runs)
        print(f"{kernel:<40} {len(runs):>8} {times[len(times) // 2]:>16.2f} {us:>9.0f} {us / total:>6.1%} "
              f"{nbytes / len(runs) / 1e6:>8.2f} {nbytes / us / 1e6:>5.2f} {occupancy:>8.0f}%")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a GGUF file (default: a random model of SmolLM2-135M's shape)")
    ap.add_argument("--shape", choices=("smollm2", "8b"), default="smollm2",
                    help="the random model's shape when no --model is given")
    ap.add_argument("--scales", choices=sorted(bench_decode_step.SCALES),
                    help="the 8b shape's scale dtype (default float32)")
    ap.add_argument("--gguf", choices=sorted(bench_decode_step.gguf_weights.F16_FIELDS), metavar="TYPE",
                    help="the 8b shape's projections as random blocks of this GGUF type (bench_decode_step.py --gguf)")
    ap.add_argument("--position", type=int, default=64, help="cache positions before the profiled step")
    ap.add_argument("--m", type=int, default=1, help="rows of the profiled forward")
    ap.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)  # the run under ncu
    args = ap.parse_args(argv)
    if args.position < 1 or args.m < 1:
        ap.error(f"--position and --m must be >= 1, got {args.position} and {args.m}")
    if args.profiled:
        profiled_forward(args)
        return 0
    if args.model and args.shape != "smollm2":
        ap.error("--model and --shape name the model twice: give one")
    if args.gguf and args.shape != "8b":
        ap.error(f"--gguf {args.gguf} is a form of the 8b shape's weights: give --shape 8b")
    if args.gguf and args.scales:
        ap.error(f"--scales {args.scales}: --gguf {args.gguf} imports the type's own scales")
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("decode_step_kernels: ncu (Nsight Compute) is not on PATH")
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics",
           ",".join((TIME, READ, WRITTEN, OCCUPANCY)), "--csv", "--page", "raw", sys.executable,
           os.path.abspath(__file__), "--profiled", "--position", str(args.position), "--m", str(args.m),
           "--shape", args.shape] + weight_form(args) + (["--model", args.model] if args.model else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 or '"ID"' not in out.stdout:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"decode_step_kernels: ncu failed (exit status {out.returncode})")
    summarize(out.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
