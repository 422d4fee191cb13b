#!/usr/bin/env python3
"""What nvcc makes of the kernels, without a GPU: registers, stack, spills and shared memory of every kernel
entry, and the instruction mix of each loop of the kernels asked for (SASS).

    python tools/sass_report.py [--files gemv_mma qgemv_mma ...] [--loops REGEX] [--out report.md]

Why: a kernel's speed can move with no change to its source. gemv_nk_mma's 16-row loop went from 62 to 56
registers when its epilogue moved into a shared helper, and held fewer loads in flight: 10-14% slower on an H200
(docs/decisions.md, "gemv: the 16-row tile"), found only by timing; it was fixed, and tests/compile/test_sass_guard.py now
checks that loop through this module. Compare this report before and after a change, before spending device
time on it.

Compiles the CUDA translation of metal/*.metal (tools/msl2cpp.py --target cuda) with tools/build_cuda.py's flags.
Needs nvcc, as the CUDA build does; the loops also need cuobjdump and the nvdisasm it runs (the CUDA toolkit's,
or those of the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels: on PATH, or cuobjdump named by --cuobjdump
with nvdisasm beside it or on PATH). A loop is a backward branch's span; its instructions are counted by opcode.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_cuda  # noqa: E402  (sibling tool: the same nvcc and flags as the build)

ENTRY_RE = re.compile(r"Compiling entry function '(_Z\w+)'")
NAME_RE = re.compile(r"entry\d+(\w+?)EN2cu")
FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED_RE = re.compile(r"Used (\d+) registers.*?(\d+) bytes smem")
SASS_RE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
BRANCH_RE = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")


def find_cuobjdump(nvcc: str | None) -> str | None:
    """cuobjdump on PATH, else beside nvcc (the toolkit's bin directory), else the nvidia-cuda-cuobjdump wheel's
    (the test extra installs it with nvidia-cuda-nvdisasm on Linux x86-64), else None."""
    found = shutil.which("cuobjdump")
    if found is None and nvcc and (pathlib.Path(nvcc).parent / "cuobjdump").exists():
        found = str(pathlib.Path(nvcc).parent / "cuobjdump")
    if found is None:
        spec = importlib.util.find_spec("nvidia")
        for root in (spec.submodule_search_locations or []) if spec else []:
            found = next((str(p) for p in sorted(pathlib.Path(root).glob("*/bin/cuobjdump"))), None)
            if found:
                break
    return found


def compile_unit(nvcc: str, gen: pathlib.Path, unit: str, out: pathlib.Path) -> tuple[str, pathlib.Path]:
    """nvcc -c of one generated kernel file; returns ptxas's verbose report and the object."""
    obj = out / f"{unit}.o"
    cmd = [nvcc, *build_cuda.nvcc_flags(False), "-Xptxas", "-v", "-I", str(ROOT / "src" / "cuda"),
           "-I", str(ROOT / "src"), "-I", str(gen), "-c", str(gen / f"{unit}.cu"), "-o", str(obj)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"nvcc failed on {unit}.cu:\n{run.stderr[-4000:]}")
    return run.stderr, obj


def compile_files(nvcc: str, stems: list[str], tmp: pathlib.Path) -> list[tuple[str, str, pathlib.Path]]:
    """metal/<stem>.metal of each stem translated for CUDA and compiled under tmp: (stem, ptxas report, object)."""
    gen, out = tmp / "gen", tmp / "obj"
    out.mkdir()
    sources = sorted((ROOT / "metal").glob("*.metal")) + sorted((ROOT / "metal").glob("*.h"))
    subprocess.run([sys.executable, str(ROOT / "tools" / "msl2cpp.py"), "--target", "cuda", "--out", str(gen),
                    *map(str, sources)], check=True, capture_output=True)
    with ThreadPoolExecutor() as pool:
        return list(pool.map(lambda s: (s, *compile_unit(nvcc, gen, s, out)), stems))


def resources(report: str) -> dict[str, dict]:
    """Per kernel host name: its mangled entry, registers, stack frame, spill stores and loads, shared memory."""
    kernels, current = {}, None
    for line in report.splitlines():
        if m := ENTRY_RE.search(line):
            name = NAME_RE.search(m.group(1))
            current = {"mangled": m.group(1)}
            kernels[name.group(1) if name else m.group(1)] = current
        elif current is not None and (m := FRAME_RE.search(line)):
            current.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        elif current is not None and (m := USED_RE.search(line)):
            current.update(registers=int(m.group(1)), smem=int(m.group(2)))
    return kernels


def sass(cuobjdump: str, obj: pathlib.Path, mangled: str) -> str:
    """The SASS listing of one kernel of an object. Raises if cuobjdump fails (it prints the listing's header and
    stops when it cannot find nvdisasm, which the wheels ship apart), so that no caller reads an empty listing."""
    # cuobjdump runs nvdisasm, from PATH: the wheels put it beside cuobjdump, not on PATH.
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(cuobjdump).parent), os.environ.get("PATH", "")]))
    run = subprocess.run([cuobjdump, "-sass", "-fun", mangled, str(obj)], capture_output=True, text=True, env=env)
    if run.returncode != 0 or "fatal" in run.stderr:
        raise RuntimeError(f"{cuobjdump} -sass failed on {obj.name}: {run.stderr.strip()[-2000:]}")
    return run.stdout


def opcodes(listing: str) -> list[str]:
    """The opcodes of a SASS listing in order, with their modifiers ("STG.E.128"), predicates dropped."""
    return [m.group(2) for m in map(SASS_RE.match, listing.splitlines()) if m]


def loops(cuobjdump: str, obj: pathlib.Path, mangled: str) -> list[str]:
    """The loops of one kernel of an object (loop_lines of its SASS)."""
    return loop_lines(sass(cuobjdump, obj, mangled))


def loop_lines(sass: str) -> list[str]:
    """One line per backward branch of a SASS listing: the span's length, how many global loads it issues before
    its first matrix instruction (loads in flight when the arithmetic starts), and its ten most frequent opcodes."""
    lines = [line for line in sass.splitlines() if SASS_RE.match(line)]
    addresses = [int(SASS_RE.match(line).group(1), 16) for line in lines]
    opcodes = [SASS_RE.match(line).group(2).split(".")[0] for line in lines]
    found = []
    for i, line in enumerate(lines):
        m = BRANCH_RE.search(line)
        if not m or int(m.group(1), 16) not in addresses:
            continue
        j = addresses.index(int(m.group(1), 16))
        if j < i:
            body = opcodes[j:i + 1]
            first_mma = next((k for k, op in enumerate(body) if op == "HMMA"), None)
            ahead = "" if first_mma is None else f", {body[:first_mma].count('LDG')} loads before the first HMMA"
            mix = collections.Counter(body).most_common(10)
            found.append(f"{len(body)} instructions{ahead}: " + ", ".join(f"{op} {n}" for op, n in mix))
    return found


def report_header(stems: list[str], commit: str, nvcc_release: str, arch: str) -> str:
    """The heading of a report written with --out (benchmarks/results/sass_sm90.md): what it is of, and how to make
    it again."""
    about = (f"Made without a GPU by `python tools/sass_report.py --files {' '.join(stems)} --out <this file>` with "
             f"nvcc {nvcc_release} (cuobjdump and nvdisasm on PATH or from the test extra's wheels). Compare a "
             f"change's report with this one before timing it on a GPU (docs/kernel_guide.md): registers, spills "
             f"and the hot loops' loads ahead of their first HMMA.")
    return (f"# What nvcc makes of {', '.join(stems)} (sm_{arch}), at {commit}\n\n"
            + textwrap.fill(about, width=116, break_long_words=False, break_on_hyphens=False) + "\n\n")


def source_commit() -> str:
    """HEAD's short hash, marked -dirty when the kernel sources differ from it (the report is of the files)."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "metal", "src/cuda", "src/shim", "tools"],
                               capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:  # no git installed
        head = ""
    if not head:
        return "an unknown commit (no git checkout)"
    return head + ("-dirty" if dirty else "")


def nvcc_release(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else "(version unknown)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="+", help="kernel files by stem (default: every metal/*.metal)")
    ap.add_argument("--loops", default="_mma_|^sdpa_combine", help="regex of kernels whose loops to list")
    ap.add_argument("--cuobjdump", help="for the loops (default: on PATH, else beside nvcc)")
    ap.add_argument("--out", help="also write the report here, headed by the commit and nvcc's release")
    args = ap.parse_args()
    nvcc = build_cuda.find_nvcc()
    if nvcc is None:
        ap.error("nvcc was not found: put it on PATH or set CUDA_HOME")
    args.cuobjdump = args.cuobjdump or find_cuobjdump(nvcc)
    stems = args.files or sorted(p.stem for p in (ROOT / "metal").glob("*.metal"))
    unknown = [s for s in stems if not (ROOT / "metal" / f"{s}.metal").exists()]
    if unknown:
        ap.error(f"--files: no metal/<name>.metal for {', '.join(unknown)}")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"sass_report: compiling {len(stems)} kernel file(s) with {nvcc}", file=sys.stderr, flush=True)
        results = compile_files(nvcc, stems, pathlib.Path(tmp))
        rows = ["| file | kernel | registers | stack | spill stores / loads | shared memory |",
                "| --- | --- | ---: | ---: | ---: | ---: |"]
        listed = []
        for stem, report, obj in results:
            for name, r in sorted(resources(report).items()):
                rows.append(f"| {stem} | {name} | {r.get('registers', '?')} | {r.get('stack', '?')} | "
                            f"{r.get('spill_st', '?')} / {r.get('spill_ld', '?')} | {r.get('smem', '?')} |")
                if args.cuobjdump and re.search(args.loops, name):
                    listed += [f"- {name}: {line}" for line in loops(args.cuobjdump, obj, r["mangled"])]
    text = "\n".join(rows) + "\n"
    if listed:
        text += "\nLoops (backward branches) of the kernels matching --loops:\n\n" + "\n".join(listed) + "\n"
    elif not args.cuobjdump:
        text += "\n(no cuobjdump: loops not listed)\n"
    print(text, end="")
    if args.out:
        header = report_header(stems, source_commit(), nvcc_release(nvcc), build_cuda.cuda_arch())
        pathlib.Path(args.out).write_text(header + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
