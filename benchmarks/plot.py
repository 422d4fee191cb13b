#!/usr/bin/env python3
"""The plots people look for, drawn from a benchmark's JSON (benchmarks/report.py writes it): percent of copy
bandwidth against M and against key count, with cuBLAS / torch / MLX on the same axes, and a decoding step's time
against its physical floor.

    python3 benchmarks/plot.py RESULT.json... [--out DIR]     (default: beside each JSON)

Needs matplotlib (the `bench` extra: pip install -e ".[bench]"); without it the scripts write their JSON and tables
and say that no plot was drawn, and this script draws them later from the JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")  # files only: no display on a GPU machine or in CI
    import matplotlib.pyplot as plt
    return plt


def _median(timing):
    return None if timing is None else timing["median"]


def _pct(nbytes, timing, copy):
    t = _median(timing)
    return None if t is None else 100 * nbytes / t / copy


def _series(ax, xs, ys, label, **style):
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    if pts:
        ax.plot(*zip(*pts), marker="o", markersize=3, label=label, **style)


def _finish(plt, fig, axes, path, xlabel, ylabel):
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _matvec_vs_m(plt, data, op, path, peer):
    """% of copy bandwidth against M, a panel per shape and a row of panels per weight form (qgemv's code widths,
    MLX's dtypes): mtlinv's canonical call, the peer's (cuBLAS, MLX) and the one-call read floor where measured."""
    rows = [r for r in data["results"] if r["op"] == op]
    forms = sorted({(r.get("bits", 0), r.get("dtype", "")) for r in rows})
    shapes = sorted({(r["k"], r["n"]) for r in rows})
    if not shapes:
        return None
    copy = data["copy_bytes_per_s"]
    fig, axes = plt.subplots(len(forms), len(shapes), figsize=(4.2 * len(shapes), 3.4 * len(forms)), sharey=True,
                             squeeze=False)
    for form_axes, (bits, dtype) in zip(axes, forms):
        form_axes[0].set_ylabel("% of copy bandwidth")
        for ax, (k, n) in zip(form_axes, shapes):
            sel = sorted((r for r in rows if (r["k"], r["n"], r.get("bits", 0), r.get("dtype", "")) ==
                          (k, n, bits, dtype)), key=lambda r: r["m"])
            if sel:
                _matvec_panel(ax, sel, copy, peer(data, op))
            ax.set_title(f"{op}{f' {bits}-bit' if bits else ''} K={k} N={n} {dtype}", fontsize=9)
            ax.set_ylim(0, 105)  # 100: the copy
    return _finish(plt, fig, list(axes.flat), path, "M (rows)", "% of copy bandwidth")


def _matvec_panel(ax, sel, copy, peer_name):
    ms = [r["m"] for r in sel]
    _series(ax, ms, [_pct(r["canonical_bytes"], r["canonical"], copy) for r in sel], "mtlinv canonical")
    if any(r.get("throughput") for r in sel):
        _series(ax, ms, [_pct(r["canonical_bytes"], r.get("throughput"), copy) for r in sel],
                "mtlinv throughput", linestyle=":")
    _series(ax, ms, [_pct(r["peer_bytes"], r.get("peer"), copy) if r.get("peer_bytes") else None for r in sel],
            peer_name)
    floors = [r.get("read_floor") for r in sel]
    if floors[0]:
        ax.axhline(100 * sel[0]["canonical_bytes"] / _median(floors[0]) / copy, color="gray", linestyle="--",
                   label="one-call read floor")


def _sdpa_vs_keys(plt, data, path, peer):
    rows = [r for r in data["results"] if r["op"] == "sdpa"]
    if not rows:
        return None
    copy = data["copy_bytes_per_s"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for lq in sorted({1, max(r["q_len"] for r in rows)}):
        sel = sorted((r for r in rows if r["q_len"] == lq), key=lambda r: r["keys"])
        keys = [r["keys"] for r in sel]
        _series(ax, keys, [_pct(r["canonical_bytes"], r["canonical"], copy) for r in sel], f"mtlinv, Lq={lq}")
        _series(ax, keys, [_pct(r["canonical_bytes"], r.get("peer"), copy) for r in sel], f"{peer(data, 'sdpa')}, "
                f"Lq={lq}", linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 105)
    ax.set_title("sdpa: K and V read per second", fontsize=9)
    return _finish(plt, fig, [ax], path, "keys", "% of copy bandwidth")


def _decode_step(plt, data, path):
    """A decoding step's ms at each row count, mtlinv's and its peers' (torch, MLX), against their physical floors."""
    steps = data["steps"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for impl, line, floor_line in (("mtlinv", "-", "--"), ("torch", "--", ":"), ("mlx", "-.", (0, (1, 4)))):
        sel = [s for s in steps if s["impl"] == impl]
        if sel:
            _series(ax, [s["rows"] for s in sel], [1e3 * _median(s["time"]) for s in sel], sel[0]["label"],
                    linestyle=line)
            ax.axhline(1e3 * sel[0]["floor_s"], color="gray", linestyle=floor_line,
                       label=f"{impl} floor (weights + cache at copy bandwidth)")
    ax.set_ylim(bottom=0)
    ax.set_title("\n".join(textwrap.wrap(data["shape_label"], 60)), fontsize=8)
    return _finish(plt, fig, [ax], path, "rows per step", "ms per step")


def _gguf_formats(plt, data, path):
    """Microseconds of one row's call per format, one panel per shape: the K-quants' float32-scale affine import,
    each format as the device model runs it, and the same-bytes stand-in (benchmarks/bench_gguf_formats.py)."""
    rows = [r for r in data["formats"] if r["m"] == min(r["m"] for r in data["formats"])]
    shapes = sorted({(r["k"], r["n"]) for r in rows})
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.4), squeeze=False)
    for ax, (k, n) in zip(axes[0], shapes):
        sel = [r for r in rows if (r["k"], r["n"]) == (k, n)]
        at = range(len(sel))
        ax.bar([i - 0.27 for i in at], [1e6 * r["affine"]["median"] if "affine" in r else 0 for r in sel], 0.27,
               label="float32-scale affine import")
        ax.bar(list(at), [1e6 * r["import"]["median"] for r in sel], 0.27, label="as the device model runs it")
        ax.bar([i + 0.27 for i in at], [1e6 * r["stand_in_time"]["median"] for r in sel], 0.27,
               label="stand-in: the file's bytes")
        ax.set_xticks(list(at), [r["format"] for r in sel])
        ax.set_title(f"K {k} x N {n}, M = {sel[0]['m']}", fontsize=9)
    return _finish(plt, fig, list(axes[0]), path, "format", "us per call")


def _peer_name(data, op):
    return data.get("peer_names", {}).get(op, "peer")


def draw(data: dict, out: Path) -> list[Path]:
    """The PNG files for one benchmark's data, under out; none (said once) without matplotlib."""
    plt = _pyplot()
    if plt is None:
        print("no plots: matplotlib is not installed (pip install -e \".[bench]\"; benchmarks/plot.py draws them "
              "from the JSON later)", file=sys.stderr)
        return []
    name = data["benchmark"]
    paths = []
    if "results" in data and "copy_bytes_per_s" in data:
        for op in ("gemv", "qgemv"):
            paths.append(_matvec_vs_m(plt, data, op, out / f"{name}_{op}_vs_m.png", _peer_name))
        paths.append(_sdpa_vs_keys(plt, data, out / f"{name}_sdpa_vs_keys.png", _peer_name))
    if "steps" in data:
        paths.append(_decode_step(plt, data, out / f"{name}_ms.png"))
    if "formats" in data:
        paths.append(_gguf_formats(plt, data, out / f"{name}_us.png"))
    return [p for p in paths if p is not None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, metavar="DIR", help="folder for the PNG files (default: beside each JSON)")
    args = ap.parse_args(argv)
    if _pyplot() is None:
        ap.error("matplotlib is not installed (pip install -e \".[bench]\")")
    for path in args.json:
        data = json.loads(path.read_text())
        if "benchmark" not in data:
            ap.error(f"{path}: not a benchmark's JSON (no 'benchmark' key)")
        out = args.out or path.parent
        out.mkdir(parents=True, exist_ok=True)
        for p in draw(data, out):
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
