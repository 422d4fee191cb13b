#!/usr/bin/env python3
"""Where a kernel's warps wait: the instructions with the most warp-stall samples in Nsight Compute's source page.

    ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:qgemv_mma --section WarpStateStats \\
        --section SourceCounters --page source --print-source sass --csv \\
        python3 benchmarks/profiling/ncu_case.py qgemv --k 4096 --n 14336 > stalls.csv
    python3 benchmarks/profiling/ncu_stalls.py stalls.csv [--top 20]

Prints the share of each stall reason over the whole kernel, then the top instructions by samples with their SASS
and their three main reasons. A load's latency shows on the first instruction that reads its register (long_sb:
waiting on a long scoreboard), not on the load itself. docs/decisions.md quotes these tables ("qgemv: what bounds
one row", "sdpa: tensor cores").
"""
import argparse
import csv
import sys
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_rows(path):
    """The header and rows of the source table; ncu's own messages (lines not in quotes) are skipped."""
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    for i, row in enumerate(rows):
        if SAMPLES in row:
            return row, [r for r in rows[i + 1:] if len(r) == len(row)]
    sys.exit(f"{path}: no '{SAMPLES}' column; was it written with --page source --print-source sass --csv?")


def number(cell):
    try:
        return float(cell)
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu --page source --print-source sass --csv output")
    ap.add_argument("--top", type=int, default=20, help="instructions to list")
    args = ap.parse_args()
    header, rows = read_rows(args.csv)
    col = {name: i for i, name in enumerate(header)}
    reasons = [name for name in header if name.startswith("stall_") and not name.endswith("(Not Issued)")]
    total = sum(number(r[col[SAMPLES]]) for r in rows)
    if total == 0:
        sys.exit(f"{args.csv}: no stall samples")
    by_reason = Counter({name[len("stall_"):]: sum(number(r[col[name]]) for r in rows) for name in reasons})
    print(f"{int(total)} samples; by reason: " +
          ", ".join(f"{name} {100 * n / total:.1f}%" for name, n in by_reason.most_common(6) if n))
    print("\n| share | address | instruction | main reasons |\n| ---: | --- | --- | --- |")
    for r in sorted(rows, key=lambda r: -number(r[col[SAMPLES]]))[:args.top]:
        main_reasons = sorted(((number(r[col[name]]), name[len("stall_"):]) for name in reasons), reverse=True)[:3]
        why = ", ".join(f"{name} {int(n)}" for n, name in main_reasons if n)
        print(f"| {100 * number(r[col[SAMPLES]]) / total:.1f}% | {r[col['Address']][-5:]} | "
              f"`{' '.join(r[col['Source']].split())}` | {why} |")


if __name__ == "__main__":
    main()
