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
for the emulator. --out writes step_ablation.json and step_ablation.md there (each run's min / median / max in the
JSON), and each run's own record beside them; a run that fails or is stopped mid-way still writes the groups timed
before it, marked as stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))
import kernel_table  # noqa: E402  (tools/kernel_table.py: the kernels' names, from the MTLINV_KERNEL lines)
import report  # noqa: E402

GROUPS = ["qgemv_mma", "sdpa_mma,sdpa_combine", "add_rms_norm", "sdpa_combine", "qkv_to_heads,swiglu_halves",
          "add_rms_norm,qkv_to_heads,swiglu_halves,sdpa_combine"]
STEP_ARGS = ["--no-torch", "--tokens", "0", "--rows", "1", "5", "--reps", "30"]
NOT_COPIED = shutil.ignore_patterns(".git", "build", "*.so", "__pycache__", "*.egg-info")

# The diagnostic: every dispatch of a plan passes through dispatch_in_pieces (src/core/grid_pieces.cpp), on every
# backend. MTLINV_DROP_KERNELS names the prefixes to drop, read once.
PATCHED_FILE = "src/core/grid_pieces.cpp"
ANCHOR = "void dispatch_in_pieces(Backend& backend, Dispatch d) {\n"
DROP = """  static const std::vector<std::string> dropped = [] {  // step_ablation.py's diagnostic build only
    const char* env = std::getenv("MTLINV_DROP_KERNELS");
    const std::string list = env ? env : "";
    std::vector<std::string> prefixes;
    for (size_t a = 0, b; a < list.size(); a = b + 1) {
      b = std::min(list.find(',', a), list.size());
      if (b > a) prefixes.push_back(list.substr(a, b - a));
    }
    return prefixes;
  }();
  for (const std::string& prefix : dropped) {
    if (std::strncmp(kernel_name(d.kernel), prefix.c_str(), prefix.size()) == 0) return;
  }
"""


def patched(source: str) -> str:
    """The file with the drop inserted; refuses a source whose dispatch_in_pieces no longer reads as ANCHOR."""
    if source.count(ANCHOR) != 1:
        raise SystemExit(f"step_ablation: {PATCHED_FILE} no longer holds {ANCHOR.strip()!r} once: update DROP")
    includes = "".join(f"#include <{h}>\n" for h in ("cstdlib", "cstring", "string", "vector"))
    return includes + source.replace(ANCHOR, ANCHOR + DROP)


def check_groups(groups: list[str]) -> None:
    """Each prefix names at least one kernel: a typo would otherwise time the whole step as if the group cost 0."""
    names = [name for name, _, _ in kernel_table.entries()]
    for group in groups:
        for prefix in group.split(","):
            if not prefix or not any(name.startswith(prefix) for name in names):
                raise SystemExit(f"step_ablation: --drop {group}: {prefix!r} begins no kernel's name "
                                 f"(tools/kernel_table.py lists them)")


def copy_tree(dest: pathlib.Path) -> None:
    """The source files (in a git checkout those git knows of, else the tree without build outputs), the prebuilt
    CUDA objects, and the patch."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            if (ROOT / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, dest / name)
    else:
        shutil.copytree(ROOT, dest, ignore=NOT_COPIED)
    objects = ROOT / "build" / "gen" / "cuda-obj"
    if objects.is_dir():
        shutil.copytree(objects, dest / "build" / "gen" / "cuda-obj")
    target = dest / PATCHED_FILE
    target.write_text(patched(target.read_text()))


class Failed(Exception):
    """A failure whose evidence (logs, records) lies in the work folder, which is then kept."""


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
        raise Failed(f"the build failed (rc {proc.returncode}); see {logs}")


def run_step(tree: pathlib.Path, group: str, step_args: list[str], out: pathlib.Path, commit: str | None) -> dict:
    """bench_decode_step.py in the copy with `group` dropped: {rows: {min, median, max} ms} (GPU span where timed).
    The copy has no git: its records name the source tree's commit."""
    env = {k: v for k, v in os.environ.items() if k != "MTLINV_DROP_KERNELS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    if group:
        env["MTLINV_DROP_KERNELS"] = group
    if commit:
        env["MTLINV_BENCH_COMMIT"] = commit
    command = [sys.executable, str(tree / "benchmarks" / "bench_decode_step.py"), *step_args, "--out", str(out)]
    record = out / "bench_decode_step.json"
    record.unlink(missing_ok=True)  # an earlier run's, in a reused --out
    proc = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    # The whole step must pass bench_decode_step's checks; without a kernel, row 0's bits may differ (rc 1).
    if not record.exists() or (not group and proc.returncode != 0):
        raise Failed(f"the step without {group or 'nothing'} failed (rc {proc.returncode}):\n"
                     f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    steps = json.loads(record.read_text())["steps"]
    return {s["rows"]: {k: 1e3 * (s["gpu"] or s["time"])[k] for k in ("min", "median", "max")}
            for s in steps if s["impl"] == "mtlinv"}


def median(run: dict, rows: int) -> float:
    return run["ms"][rows]["median"]


def table(runs: list[dict]) -> str:
    rows = sorted(runs[0]["ms"])
    lines = report.md_header(["kernels dropped", f"step ms at {' / '.join(map(str, rows))} rows",
                              "less than the first whole step"])
    for run in runs:
        less = "-" if not run["drop"] else " / ".join(f"{median(runs[0], r) - median(run, r):.2f}" for r in rows)
        lines.append(report.md_row([run["drop"] or "none", " / ".join(f"{median(run, r):.2f}" for r in rows), less]))
    return "\n".join(lines) + "\n"


def measure(work: pathlib.Path, args, step_args: list[str], out: pathlib.Path | None) -> None:
    tree = work / "tree"
    copy_tree(tree)
    build(tree, work / "logs")
    records = out or work / "runs"
    for name in ("step_ablation.json", "step_ablation.md"):  # an earlier run's, in a reused --out
        (records / name).unlink(missing_ok=True)
    groups = ["", *args.drop, ""]
    runs = []
    try:
        for i, group in enumerate(groups):
            runs.append({"drop": group, "ms": run_step(tree, group, step_args, records / f"run{i}", report.commit())})
            print(f"dropped {group or 'none'}: " + ", ".join(f"{r} rows {median(runs[-1], r):.2f} ms"
                                                            for r in sorted(runs[-1]["ms"])), flush=True)
    finally:  # a run that fails or is stopped mid-way still records the groups timed before it
        if runs:
            write_record(out, records, step_args, runs, len(groups))


def write_record(out: pathlib.Path | None, records: pathlib.Path, step_args: list[str], runs: list[dict],
                 planned: int) -> None:
    text = table(runs)
    stopped = f"**stopped after {len(runs)} of {planned} runs**" if len(runs) < planned else ""
    print(stopped + "\n" * bool(stopped) + text, end="")
    first = json.loads((records / "run0" / "bench_decode_step.json").read_text())
    report.write(out, "step_ablation", {"device": first["device"], "shape_label": first["shape_label"],
                                        "step_args": step_args, "runs": runs, "runs_planned": planned},
                 f"{first['shape_label']}; {stopped + '; ' * bool(stopped)}medians (min-max in the JSON)\n\n{text}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--drop", nargs="+", default=GROUPS, metavar="GROUP",
                    help="comma-separated kernel name prefixes dropped together (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the diagnostic copy (its path is printed)")
    report.add_out_argument(ap)
    args, step_args = ap.parse_known_args(argv)
    check_groups(args.drop)
    step_args = STEP_ARGS + step_args  # later arguments win in bench_decode_step.py's parser
    out = args.out.resolve() if args.out else None  # the runs' working directory is the copy
    # A time limit's SIGTERM (cuda_check.sh) unwinds like an error, so the copy is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("step_ablation: stopped by SIGTERM"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="mtlinv-ablation-"))
    keep = args.keep
    try:
        measure(work, args, step_args, out)
    except Failed as e:
        keep = True
        print(f"step_ablation: {e}", file=sys.stderr)
        return 1
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
