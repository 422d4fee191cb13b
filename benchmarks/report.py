"""What every benchmark script leaves behind: the table it prints, and under --out (only there: nothing is written
without it) NAME.json, with the command, commit, device and every timing's spread over its runs (min, median,
max), NAME.md, the same table in Markdown, and the script's plots (benchmarks/plot.py) as PNG files.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def add_out_argument(ap) -> None:
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help="write NAME.json, NAME.md and the plots into DIR (default: print only, write nothing)")


def spread(samples) -> dict:
    """min, median and max of a timing's runs (seconds), and how many runs there were."""
    samples = list(samples)
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "runs": len(samples)}


def commit() -> str | None:
    """HEAD of the checkout the script runs from, with "-dirty" when tracked files differ from it. A tree without
    git (`git archive` copied to a GPU machine) names its commit in MTLINV_BENCH_COMMIT; else None. A table is
    reproducible from its commit only when the commit is clean."""
    if not (REPO / ".git").exists():
        return os.environ.get("MTLINV_BENCH_COMMIT")
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def command() -> str:
    """The script's command line as run from the repository's root, shell-quoted."""
    argv = [os.path.relpath(sys.argv[0], REPO) if os.path.isabs(sys.argv[0]) else sys.argv[0], *sys.argv[1:]]
    return "python3 " + shlex.join(argv)


def provenance(device: dict | None = None) -> dict:
    """Where a measurement comes from: the command, the commit, the device and the host. The device is mtlinv's
    (imported here, so that a script whose timings come from another process's build needs no build of its own),
    unless the caller names the one its timings ran on."""
    if device is None:
        import mtlinv
        device = mtlinv.device_info()
    return {"command": command(), "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device, "host": {"machine": platform.machine(), "cpus": os.cpu_count(),
                                       "python": platform.python_version()}}


def md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_header(names, align="---:") -> list[str]:
    return [md_row(names), md_row([align] * len(names))]


class Lines:
    """Prints each line as it comes (a long run shows its progress) and keeps them for NAME.md."""

    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.extend(text.split("\n"))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def write(out: Path | None, name: str, data: dict, markdown: str) -> list[Path]:
    """NAME.json (data with its provenance), NAME.md (a header naming command, commit and device, then markdown)
    and the plots benchmarks/plot.py draws from data, all under out; nothing when out is None."""
    if out is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": name, **provenance(data.get("device")), **data}
    json_path = out / f"{name}.json"
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    device = data["device"]
    head = (f"`{data['command']}` at {data['commit'] or 'no git commit'}, {data['date']}; mtlinv on "
            f"{device['backend']} ({device['name']}).\n\n")
    md_path = out / f"{name}.md"
    md_path.write_text(head + markdown)
    written = [json_path, md_path]
    from plot import draw  # benchmarks/plot.py, beside this file; matplotlib is imported only there
    written += draw(data, out)
    print("written: " + ", ".join(str(p) for p in written), flush=True)
    return written
