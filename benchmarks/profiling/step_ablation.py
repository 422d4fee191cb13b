#!/usr/bin/env python3
"""What each kind of kernel costs inside a decoding step's launch batches: the step timed without it.

Timed alone (decode_step_kernels.py, Nsight Compute) a kernel pays its whole launch and first loads; inside the
step's graphs, programmatic dependent launch overlaps them with the kernel before, so the sum of kernels alone
overstates the small ones. This builds a copy of the tree whose core drops every dispatch of the kernels named
(a diagnostic build: wrong results, timing only; the source tree is not touched), then runs
benchmarks/bench_decode_step.py there once per group of dropped kernels, "none" first and last (the drift between
them is the runs' spread). What a group costs is the whole step's time less the step without it.

    python3 benchmarks/profiling/step_ablation.py [--drop GROUP ...] [--out DIR] [--keep] [bench_decode_step args]

A GROUP is comma-separated kernel name prefixes (`sdpa_mma,sdpa_combine`); arguments this script does not know go
to bench_decode_step.py after `--no-torch --tokens 0 --rows 1 5 --reps 30` (the 8B llama at 4096 positions; e.g.
`--scales bfloat16`, or a tiny shape). On a machine with an NVIDIA GPU the copy is built for CUDA as
benchmarks/cuda/cuda_check.sh builds (from prebuilt CUDA objects in build/gen/cuda-obj where present), elsewhere
for the emulator. --out writes step_ablation.json and step_ablation.md there, and each run's own record beside
them.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUPS = ["qgemv_mma", "sdpa_mma,sdpa_combine", "add_rms_norm", "sdpa_combine", "qkv_to_heads,swiglu_halves",
          "add_rms_norm,qkv_to_heads,swiglu_halves,sdpa_combine"]
STEP_ARGS = ["--no-torch", "--tokens", "0", "--rows", "1", "5", "--reps", "30"]

# The diagnostic: every dispatch of a plan passes through dispatch_in_pieces (src/core/grid_pieces.cpp), on every
# backend. MTLINV_DROP_KERNELS names the prefixes to drop.
PATCHED_FILE = "src/core/grid_pieces.cpp"
ANCHOR = "void dispatch_in_pieces(Backend& backend, Dispatch d) {\n"
DROP = """  if (const char* drop = std::getenv("MTLINV_DROP_KERNELS")) {  // step_ablation.py's diagnostic build only
    const std::string name = kernel_name(d.kernel), list = std::string(drop) + ",";
    for (size_t a = 0, b; (b = list.find(',', a)) != std::string::npos; a = b + 1) {
      if (b > a && name.compare(0, b - a, list, a, b - a) == 0) return;
    }
  }
"""


def patched(source: str) -> str:
    """The file with the drop inserted; refuses a source whose dispatch_in_pieces no longer reads as ANCHOR."""
    if source.count(ANCHOR) != 1:
        raise SystemExit(f"step_ablation: {PATCHED_FILE} no longer holds {ANCHOR.strip()!r} once: update DROP")
    return "#include <cstdlib>\n#include <string>\n" + source.replace(ANCHOR, ANCHOR + DROP)


def copy_tree(dest: pathlib.Path) -> None:
    """The files git knows of (tracked, or untracked and not ignored), the prebuilt CUDA objects, and the patch."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    objects = ROOT / "build" / "gen" / "cuda-obj"
    if objects.is_dir():
        shutil.copytree(objects, dest / "build" / "gen" / "cuda-obj")
    target = dest / PATCHED_FILE
    target.write_text(patched(target.read_text()))


def build(tree: pathlib.Path, logs: pathlib.Path) -> None:
    """On a machine with an NVIDIA GPU as benchmarks/cuda/cuda_check.sh builds for CUDA (its build step, which
    checks that the build runs on CUDA); elsewhere for the emulator."""
    smi = shutil.which("nvidia-smi")
    cuda = smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0
    logs.mkdir(parents=True, exist_ok=True)
    print(f"building the diagnostic copy in {tree} for {'CUDA' if cuda else 'the emulator'} (logs in {logs})",
          flush=True)
    command = (["bash", "benchmarks/cuda/cuda_check.sh", "build"] if cuda else
               [sys.executable, "setup.py", "build_ext", "--inplace"])
    with open(logs / "build.txt", "w") as out:
        proc = subprocess.run(command, cwd=tree, env=dict(os.environ, OUT=str(logs)), stdout=out,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"step_ablation: the build failed (rc {proc.returncode}); see {logs}")


def run_step(tree: pathlib.Path, group: str, step_args: list[str], out: pathlib.Path, commit: str | None) -> dict:
    """bench_decode_step.py in the copy with `group` dropped: {rows: median seconds} (GPU span where timed). The
    copy has no git: its records name the source tree's commit."""
    env = dict(os.environ, PYTHONPATH=str(tree), MTLINV_DROP_KERNELS=group)
    if commit:
        env["MTLINV_BENCH_COMMIT"] = commit
    command = [sys.executable, str(tree / "benchmarks" / "bench_decode_step.py"), *step_args, "--out", str(out)]
    record = out / "bench_decode_step.json"
    record.unlink(missing_ok=True)  # an earlier run's, in a reused --out
    proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if not record.exists():  # not the return code: where a dropped kernel leaves row 0's bits unequal it is 1
        raise SystemExit(f"step_ablation: the step without {group or 'nothing'} failed (rc {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    steps = json.loads(record.read_text())["steps"]
    return {s["rows"]: (s["gpu"] or s["time"])["median"] for s in steps if s["impl"] == "mtlinv"}


def table(runs: list[dict]) -> str:
    rows = sorted(runs[0]["ms"])
    whole = runs[0]["ms"]
    head = " / ".join(str(r) for r in rows)
    lines = [f"| kernels dropped | step ms at {head} rows | less than the whole step |", "|---|---:|---:|"]
    for run in runs:
        ms = " / ".join(f"{run['ms'][r]:.2f}" for r in rows)
        less = "-" if not run["drop"] else " / ".join(f"{whole[r] - run['ms'][r]:.2f}" for r in rows)
        lines.append(f"| {run['drop'] or 'none'} | {ms} | {less} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drop", nargs="+", default=GROUPS, metavar="GROUP",
                    help="comma-separated kernel name prefixes dropped together (default: %(default)s)")
    ap.add_argument("--out", type=pathlib.Path, help="write step_ablation.json / .md and each run's record here")
    ap.add_argument("--keep", action="store_true", help="keep the diagnostic copy (its path is printed)")
    args, step_args = ap.parse_known_args(argv)
    step_args = STEP_ARGS + step_args  # later arguments win in bench_decode_step.py's parser
    out = args.out.resolve() if args.out else None  # the runs' working directory is the copy
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report  # noqa: E402  (imports mtlinv: after the arguments, so that --help works anywhere)

    commit = report.commit()
    work = pathlib.Path(tempfile.mkdtemp(prefix="mtlinv-ablation-"))
    try:
        tree = work / "tree"
        copy_tree(tree)
        build(tree, work / "logs")
        records = out or work / "runs"
        runs = []
        for i, group in enumerate(["", *args.drop, ""]):
            ms = {rows: 1e3 * s for rows, s in run_step(tree, group, step_args, records / f"run{i}", commit).items()}
            runs.append({"drop": group, "ms": ms})
            print(f"dropped {group or 'none'}: " + ", ".join(f"{r} rows {m:.2f} ms" for r, m in sorted(ms.items())),
                  flush=True)
        text = table(runs)
        print(text, end="")
        if out:
            out.mkdir(parents=True, exist_ok=True)
            first = json.loads((records / "run0" / "bench_decode_step.json").read_text())
            record = {"benchmark": "step_ablation", "command": " ".join(["python3", *sys.argv]),
                      **{key: first[key] for key in ("commit", "date", "device", "shape_label")},
                      "step_args": step_args, "runs": runs}
            (out / "step_ablation.json").write_text(json.dumps(record, indent=1) + "\n")
            (out / "step_ablation.md").write_text(
                f"`{record['command']}` at {record['commit']}, {record['date']}; {record['device']['name']}\n\n"
                f"{record['shape_label']}; medians (min-max in each run's record, run0 .. run{len(runs) - 1})\n\n"
                f"{text}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
