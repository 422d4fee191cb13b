#!/usr/bin/env python3
"""rms_norm on the active device beside MLX's mx.fast.rms_norm (NumPy without MLX), on a 4096x4096 float32 input.

    python benchmarks/bench_rms_norm.py [--repeat 5] [--out DIR]
"""
import argparse

import numpy as np

import mtlinv
import report
import timing


def peer_call(mx, x, w):
    if mx is None:
        return lambda: x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w
    xm, wm = mx.array(x), mx.array(w)
    mx.eval(xm, wm)
    return lambda: mx.eval(mx.fast.rms_norm(xm, wm, 1e-6))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    report.add_out_argument(ap)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be >= 1, got {args.repeat}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 4096)).astype(np.float32)
    w = rng.standard_normal(4096).astype(np.float32)
    tx, tw = mtlinv.asarray(x), mtlinv.asarray(w)
    mx, peer, _ = timing.peer(fallback="numpy")
    t_dev = report.spread(timing.sample_seconds(lambda: mtlinv.rms_norm(tx, tw, 1e-6), repeat=args.repeat))
    t_peer = report.spread(timing.sample_seconds(peer_call(mx, x, w), repeat=args.repeat))
    info = mtlinv.device_info()
    say = report.Lines()
    say(f"# rms_norm 4096x4096 float32 on {info['backend']} ({info['name']}) beside {peer}\n")
    for line in report.md_header(["mtlinv ms", f"{peer} ms", "mtlinv / peer"]):
        say(line)
    say(report.md_row([f"{t_dev['median'] * 1e3:.3f}", f"{t_peer['median'] * 1e3:.3f}",
                       f"{t_dev['median'] / t_peer['median']:.2f}"]))
    report.write(args.out, "bench_rms_norm", {"mtlinv": t_dev, "peer": t_peer, "peer_name": peer}, say.text())


if __name__ == "__main__":
    main()
