"""`mtlinv doctor`: one command for the first run on a new machine (made for a Mac's first run of Metal).

It reports the software and the device (backend, GPU family, OS, where the kernels came from and how long the
first use took), runs the invariance audit of `mtlinv check` (mtlinv/apps/audit.py), times gemv, qgemv and sdpa
against MLX's own ops when MLX is installed (same shapes; the output differences are reported too, since the audit
checks invariance, not accuracy; and one timing of formats: GGUF Q6_K as the model layer runs it against MLX at
Q6_K's bytes), and writes everything into one Markdown report a user can attach to an issue.

The report is rewritten after every step and every audit case, so a run that crashes or hangs (a first run of
Metal may) still leaves a file that says where it stopped.

Exit status: 0 when everything passed; 1 on an audit FAIL, a device that did not start, an mtlinv error, or
results far from MLX's; 2 for bad usage (argparse's, in mtlinv/apps/cli.py).
"""
from __future__ import annotations

import dataclasses
import glob
import os
import platform
import statistics
import subprocess
import sysconfig
import time
import traceback
from typing import Callable

import numpy as np

import mtlinv

REPORT_NAME = "mtlinv-doctor-report.md"
STEPS = 3  # device, audit, timing against MLX
# |mtlinv - MLX| / max |MLX| above this is a wrong result, not rounding: 16-bit outputs of these shapes differ
# by ~1e-3 of their range (accumulation order, qgemv's rounding of each weight, sdpa's rounding of p).
MLX_TOLERANCE = 0.05


def check_out_path(path: str) -> str | None:
    """Why the report cannot be written to path (checked before the long work), or None."""
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        return f"--out {path!r} is a directory; give a file name"
    if not os.path.isdir(parent):
        return f"--out {path!r}: directory {parent!r} does not exist"
    if not os.access(parent, os.W_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        return f"--out {path!r}: not writable"
    return None


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def _mac_info() -> dict[str, str]:
    """macOS version and whether this Python runs under Rosetta (an x86-64 Python on Apple silicon)."""
    release, _, machine = platform.mac_ver()
    if not release:
        return {"macOS": "n/a (not macOS)"}
    info = {"macOS": f"{release} ({machine})"}
    try:
        translated = subprocess.run(["sysctl", "-n", "sysctl.proc_translated"], capture_output=True, text=True,
                                    timeout=5).stdout.strip()
        info["Rosetta"] = "yes: this Python is x86-64, translated; use an arm64 Python" \
            if translated == "1" else "no"
    except Exception:
        info["Rosetta"] = "n/a"
    return info


def environment() -> dict[str, str]:
    mlx = _version("mlx")
    env = {
        "mtlinv": _version("mtlinv") or "n/a (not installed as a package)",
        "Python": f"{platform.python_version()} ({platform.python_implementation()}, {sysconfig.get_platform()})",
        "NumPy": np.__version__,
        "ml_dtypes": _version("ml_dtypes") or "n/a",
        "MLX": mlx or "not installed",
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    env.update(_mac_info())
    settings = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("MTLINV_", "MTL_"))}
    env["settings"] = _home(", ".join(f"{k}={v}" for k, v in settings.items())) or "none (MTLINV_*, MTL_*)"
    return env


@dataclasses.dataclass
class BenchRow:
    op: str
    shape: str
    rows: int
    ours_ms: float | None = None
    mlx_ms: float | None = None
    diff: float | None = None  # max |mtlinv - MLX| / max |MLX|
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.ours_ms / self.mlx_ms if self.ours_ms and self.mlx_ms else None

    @property
    def wrong(self) -> bool:
        return self.diff is not None and not self.diff <= MLX_TOLERANCE  # NaN is wrong too

    def cells(self) -> list[str]:
        ms = lambda t: "n/a" if t is None else f"{t:.3f}"  # noqa: E731
        diff = "n/a" if self.diff is None else f"{self.diff:.1e}" + (" WRONG" if self.wrong else "")
        ratio = "n/a" if self.ratio is None else f"{self.ratio:.2f}x"
        return [self.op, self.shape, str(self.rows), ms(self.ours_ms), ms(self.mlx_ms), ratio, diff, self.note]


BENCH_HEADER = ["op", "shape (float16)", "rows/queries", "mtlinv ms", "MLX ms", "mtlinv/MLX",
                "max diff / MLX's max", "note"]


def _cell(text: str) -> str:
    """text inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _home(text: str) -> str:
    """Paths under the user's home as ~/...: the report is meant to be posted."""
    home = os.path.expanduser("~")
    return text.replace(home, "~") if home not in ("", "/", "~") else text


class Report:
    """The report's content, rewritten to its file after every step, so that a crash leaves what was known."""

    def __init__(self, path: str, limit: int, quick: bool, say: Callable[[str], None]):
        self.path, self.limit, self.quick, self.say = os.path.abspath(path), limit, quick, say
        self.env: dict[str, str] = {}
        self.device: dict[str, str] = {}
        self.device_error: str | None = None
        self.backend: str | None = None
        self.audit_lines: list[str] = []
        self.audit_ok: bool | None = None
        self.audit_error: str | None = None
        self.bench_note = ""
        self.bench: list[BenchRow] = []
        self.steps: list[tuple[str, float]] = []
        self.running: str | None = None

    def failures(self) -> list[str]:
        out = []
        if self.device_error:
            out.append("the device did not start")
        if self.audit_error:
            out.append("the audit stopped with an error")
        elif self.audit_ok is False:
            n = sum(1 for line in self.audit_lines if " FAIL " in line)
            out.append(f"{n} audit case{'s' if n != 1 else ''} FAIL")
        errors = sum(1 for r in self.bench if r.note.startswith("mtlinv error"))
        if errors:
            out.append(f"{errors} mtlinv error{'s' if errors != 1 else ''} while timing")
        wrong = sum(1 for r in self.bench if r.wrong)
        if wrong:
            out.append(f"{wrong} result{'s' if wrong != 1 else ''} far from MLX's (WRONG)")
        return out

    def verdict(self) -> str:
        if self.running:
            return (f"**INCOMPLETE**: the run stopped during \"{self.running}\" (a crash, a hang or an interrupt); "
                    "what it had found so far is below")
        failures = self.failures()
        if failures:
            return "**FAIL**: " + "; ".join(failures)
        return f"**all PASS** on {self.backend}" + (" (quick run)" if self.quick else "")

    def metal_note(self) -> str:
        if self.backend == "metal":
            return "Metal ran: the audit and the timings below come from the Apple GPU."
        if self.device_error:
            return "**Metal did not run**: no device started (the error is under Device)."
        where = {"emu": "the CPU emulator", "cuda": "CUDA"}.get(self.backend or "", self.backend or "?")
        note = (f"**Metal did not run.** This report comes from {where}: the audit checked {where}'s kernels, "
                "not an Apple GPU's.")
        fallback = self.device.get("fallback")
        if fallback and fallback not in ("n/a", "none"):
            note += f" MTLINV_DEVICE=auto fell back from Metal: {fallback}."
        return note

    def markdown(self) -> str:
        L = ["# mtlinv doctor report", "",
             f"Verdict: {self.verdict()}", "",
             f"{self.metal_note()}", "",
             f"Command: `mtlinv doctor{' --quick' if self.quick else ''} --limit {self.limit}`; "
             f"written {time.strftime('%Y-%m-%d %H:%M:%S %z')}.", ""]

        def table(rows: dict[str, str]) -> None:
            L.extend(["| | |", "|---|---|"])
            L.extend(f"| {_cell(k)} | {_cell(v)} |" for k, v in rows.items())
            L.append("")
        L += ["## Environment", ""]
        table(self.env)
        L += ["## Device", ""]
        if self.device_error:
            L += ["The device did not start:", "", "```text", self.device_error.rstrip(), "```", ""]
        table(self.device)
        L += [f"## Invariance audit (limit {self.limit}{', quick shapes' if self.quick else ''})", ""]
        if self.audit_lines or self.audit_error:
            L += ["```text", *self.audit_lines]
            if self.audit_error:
                L += ["", "stopped with an error:", self.audit_error.rstrip()]
            L += ["```", ""]
        else:
            L += ["not run" + (": the device did not start" if self.device_error else ""), ""]
        L += ["## Timing against MLX", ""]
        if self.bench_note:
            L += [self.bench_note, ""]
        if self.bench:
            L += ["| " + " | ".join(BENCH_HEADER) + " |", "|" + "---|" * len(BENCH_HEADER)]
            L += ["| " + " | ".join(_cell(c) for c in r.cells()) + " |" for r in self.bench]
            L.append("")
        L += ["## Steps", "", "| step | seconds |", "|---|---|"]
        L += [f"| {name} | {seconds:.2f} |" for name, seconds in self.steps]
        if self.running:
            L.append(f"| {self.running} | did not finish |")
        L.append("")
        return "\n".join(L)

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(self.markdown())
        os.replace(tmp, self.path)

    def step(self, number: int | None, name: str) -> float:
        self.running = name
        self.say(f"[{number}/{STEPS}] {name} ..." if number else f"{name} ...")
        self.save()
        return time.perf_counter()

    def done(self, name: str, t0: float) -> None:
        self.steps.append((name, time.perf_counter() - t0))
        self.running = None
        self.save()


def _device(report: Report) -> None:
    t0 = time.perf_counter()
    try:
        info = mtlinv.device_info()  # the backend starts here on a process's first use
    except mtlinv.MtlinvError as e:
        report.device_error = f"{type(e).__name__}: {e}"
        report.device["requested (MTLINV_DEVICE)"] = os.environ.get("MTLINV_DEVICE", "auto")
        return
    start_s = time.perf_counter() - t0
    # One small op: on Metal the kernel library loads (a metallib, or the embedded source compiled) on first use.
    t0 = time.perf_counter()
    try:
        mtlinv.rms_norm(np.ones((1, 64), np.float32), np.ones(64, np.float32), 1e-6)
        mtlinv.synchronize()
        first_op = f"{time.perf_counter() - t0:.3f} s"
    except mtlinv.MtlinvError as e:
        first_op = f"error: {type(e).__name__}: {e}"
    info = mtlinv.device_info()  # again: kernels_load_s is known once the library has loaded
    report.backend = info.get("backend")
    try:
        kernels = len(mtlinv.kernel_names())
    except mtlinv.MtlinvError as e:
        kernels = f"error: {e}"
    metallibs = sorted(glob.glob(os.path.join(os.path.dirname(mtlinv.__file__), "*.metallib")))
    load_s = info.get("kernels_load_s")

    def key(name: str, when_none: str) -> str:  # keys this build may not report yet: "n/a"
        return "n/a" if name not in info else when_none if info[name] is None else _fmt(info[name])
    report.device.update({
        "requested (MTLINV_DEVICE)": os.environ.get("MTLINV_DEVICE", "auto"),
        "backend": _fmt(info.get("backend")),
        "name": _fmt(info.get("name")),
        "GPU family": key("gpu_family", "n/a (not Metal)"),
        "fallback": key("fallback", "none"),
        "kernels from": key("kernels", "n/a"),
        "kernel library load": key("kernels_load_s", "n/a (not loaded, or not Metal)") if load_s is None
        else f"{load_s:.3f} s",
        "backend start (first device_info())": f"{start_s:.3f} s",
        "first op (rms_norm, 1 row)": first_op,
        "kernels in library": str(kernels),
        "built backends": _fmt(info.get("built_backends")),
        "metallib in package": _fmt([os.path.basename(p) for p in metallibs]),
        "native module": _home(_fmt(getattr(mtlinv._native, "__file__", None))),
        "limit at start": str(mtlinv.get_limit()),
    })
    listed = {"backend", "name", "gpu_family", "fallback", "kernels", "kernels_load_s", "built_backends"}
    for key, value in info.items():  # everything else the backend reports, today's keys and later ones
        if key not in listed:
            report.device[key] = _fmt(value)


def _audit(report: Report) -> None:
    from .audit import run_audit

    def out(line: str) -> None:
        report.say(line)
        report.audit_lines.append(line)
        report.save()
    try:
        report.audit_ok = run_audit(report.limit, report.quick, out=out)
    except Exception:  # not an MtlinvError (run_audit reports those as FAILs): keep the traceback for the report
        report.audit_error = traceback.format_exc()
        report.say(report.audit_error)
        report.audit_ok = False


def _timed(call: Callable[[], object], sync: Callable[[object], None], reps: int, budget_s: float) -> float:
    """Median milliseconds of one call with its result ready, after one untimed call (loads, caches)."""
    sync(call())
    times: list[float] = []
    end = time.perf_counter() + budget_s
    while len(times) < reps and (len(times) < 3 or time.perf_counter() < end):
        t0 = time.perf_counter()
        sync(call())
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def bench_shapes(on_gpus: bool, quick: bool) -> dict[str, list[tuple[int, ...]]]:
    """A model's decode shapes where mtlinv and MLX both run on a GPU; small shapes where either runs on a CPU (the
    emulator is there for correctness, not speed, and MLX's CPU ops take seconds at decode shapes).
    gemv/qgemv: (K, N); sdpa: (Hq, Hkv, D, keys)."""
    if not on_gpus:
        return {"gemv": [(1024, 512)], "qgemv": [(1024, 512)], "sdpa": [(8, 2, 64, 1024)]}
    if quick:
        return {"gemv": [(4096, 4096)], "qgemv": [(4096, 4096)], "sdpa": [(32, 8, 128, 4096)]}
    return {"gemv": [(4096, 4096), (4096, 14336)], "qgemv": [(4096, 4096), (4096, 14336)],
            "sdpa": [(32, 8, 128, 4096), (32, 8, 128, 16384)]}


def q6k_import(rng: np.random.Generator, k: int, n: int) -> dict:
    """qgemv's arguments for weights [N, K] in the form the model layer gives a GGUF Q6_K tensor (the super-block
    form, mtlinv.gguf_kquants.to_super): 6-bit codes, group 16, an int8 code sc per group and per 256 values the
    float32 factors d (a float16) and -32 d; its one code array serves as scales and biases."""
    codes = rng.integers(0, 64, size=(n, k))
    d = (rng.random((n, k // 256), dtype=np.float32) * 1e-3).astype(np.float16).astype(np.float32)
    sc = rng.integers(-128, 128, size=(n, k // 16)).astype(np.int8)
    supers = np.stack([d, np.float32(-32) * d], axis=-1)
    return {"wq": mtlinv.quant.pack(codes, 6), "scales": sc, "biases": sc, "supers": supers, "group_size": 16,
            "bits": 6}


def _bench(report: Report) -> None:
    try:
        import mlx.core as mx
    except Exception as e:  # not installed, or installed and broken
        report.bench_note = (f"Skipped: MLX is not importable ({type(e).__name__}: {e}). "
                             "With `pip install mlx` (on Apple silicon) this step times mtlinv against MLX.")
        report.say(report.bench_note)
        return
    info = mtlinv.device_info()
    mlx_device = str(mx.default_device())
    on_gpus = info["backend"] in ("metal", "cuda") and "gpu" in mlx_device
    report.bench_note = (
        f"mtlinv ran on **{info['backend']}** ({info['name']}); MLX {_version('mlx') or mx.__version__} ran on "
        f"**{mlx_device}**. Median time of one call with its result ready, float16, at 1 row/query (decoding) and "
        f"at the limit, {report.limit} (verification; mtlinv's canonical kernels), "
        + ("a model's decode shapes. " if on_gpus else "small shapes, since one of the two ran on a CPU. ")
        + "mtlinv/MLX below 1 means mtlinv is faster."
        + (" The emulator is for correctness: its times say nothing about a GPU." if info["backend"] == "emu"
           else "")
        + (" Different devices: the ratios compare the devices as much as the kernels."
           if ("gpu" in mlx_device) != (info["backend"] in ("metal", "cuda")) else ""))
    report.say(report.bench_note.replace("**", ""))
    reps, budget = (5, 0.5) if report.quick else (20 if not on_gpus else 100, 2.0)
    rng = np.random.default_rng(0)
    f16 = np.float16
    ours_sync = lambda r: mtlinv.synchronize()  # noqa: E731
    mlx_sync = lambda r: mx.eval(r)  # noqa: E731
    shapes = bench_shapes(on_gpus, report.quick)

    def measure(op: str, shape: str, rows: int, ours: Callable[[], object], theirs: Callable[[], object],
                compare: bool = True) -> None:
        """compare=False: the two compute with different weights (a timing of formats): no difference is taken."""
        row = BenchRow(op, shape, rows, note="" if compare else "timing only: different weights")
        unit = ("query", "queries") if op == "sdpa" else ("row", "rows")
        report.say(f"  {op} {shape}, {rows} {unit[rows > 1]} ...")
        got = want = None
        try:
            with mtlinv.batch_invariant(report.limit):
                row.ours_ms = _timed(ours, ours_sync, reps, budget)
                got = np.asarray(ours()).astype(np.float32)
        except Exception as e:  # MtlinvError, or anything else an op raised: the report keeps it
            row.note = f"mtlinv error: {type(e).__name__}: {e}"
        try:
            row.mlx_ms = _timed(theirs, mlx_sync, reps, budget)
            want = np.array(theirs()).astype(np.float32)
        except Exception as e:
            row.note = (row.note + "; " if row.note else "") + f"MLX error: {type(e).__name__}: {e}"
        if compare and got is not None and want is not None:
            scale = float(np.abs(want).max()) or 1.0
            row.diff = float(np.abs(got - want).max()) / scale if got.shape == want.shape else float("nan")
        report.bench.append(row)
        report.say("    " + "  ".join(f"{h}: {c}" for h, c in zip(BENCH_HEADER[3:], row.cells()[3:]) if c))
        report.save()

    rows = sorted({1, report.limit})
    for k, n in shapes["gemv"]:
        w = (rng.standard_normal((n, k)) * k ** -0.5).astype(f16)
        tw, mw = mtlinv.asarray(w), mx.array(w)
        for m in rows:
            x = rng.standard_normal((m, k)).astype(f16)
            tx, mx_x = mtlinv.asarray(x), mx.array(x)
            measure("gemv", f"K={k} N={n} w[N,K]", m, lambda: mtlinv.gemv(tx, tw), lambda: mx.matmul(mx_x, mw.T))
    # 4-bit g64 at every shape; at the largest, also 6-bit g64 (6.5 bits a weight, about a GGUF Q6_K block's 6.56)
    # and Q6_K as the model layer runs it (the super-block form: 6.75 bits a weight) against MLX at 6 bits: what
    # reading about Q6_K's own bytes costs on this GPU against MLX's kernel (docs/models.md, "The super-block form").
    for k, n in shapes["qgemv"]:
        formats = [4, 6] if (k, n) == shapes["qgemv"][-1] else [4]
        w = (rng.standard_normal((n, k)) * k ** -0.5).astype(f16)
        mlx_weights = {}
        for bits in formats:
            host = mtlinv.quantize(w, group_size=64, bits=bits)
            tq = [mtlinv.asarray(a) for a in host]
            mq = mlx_weights[bits] = [mx.array(a) for a in host]
            for m in rows:
                x = rng.standard_normal((m, k)).astype(f16)
                tx, mx_x = mtlinv.asarray(x), mx.array(x)
                measure("qgemv", f"K={k} N={n} {bits}-bit g64", m,
                        lambda: mtlinv.qgemv(tx, *tq, group_size=64, bits=bits),
                        lambda: mx.quantized_matmul(mx_x, *mq, transpose=True, group_size=64, bits=bits))
        if 6 in formats:
            q6k = {name: mtlinv.asarray(a) if isinstance(a, np.ndarray) else a
                   for name, a in q6k_import(rng, k, n).items() if name != "biases"}
            q6k["biases"] = q6k["scales"]  # Q6_K's one code array, stored once (as the model layer stores it)
            mq6 = mlx_weights[6]
            for m in rows:
                x = rng.standard_normal((m, k)).astype(f16)
                tx, mx_x = mtlinv.asarray(x), mx.array(x)
                measure("qgemv", f"K={k} N={n} Q6_K imported vs MLX 6-bit g64", m,
                        lambda: mtlinv.qgemv(tx, **q6k),
                        lambda: mx.quantized_matmul(mx_x, *mq6, transpose=True, group_size=64, bits=6),
                        compare=False)
    for hq, hkv, d, keys in shapes["sdpa"]:
        kv = [rng.standard_normal((1, hkv, keys, d)).astype(f16) for _ in range(2)]
        tkv, mkv = [mtlinv.asarray(a) for a in kv], [mx.array(a) for a in kv]
        for lq in rows:
            if lq > keys:
                continue
            q = rng.standard_normal((1, hq, lq, d)).astype(f16)
            tq_, mq_ = mtlinv.asarray(q), mx.array(q)
            measure("sdpa", f"Hq={hq} Hkv={hkv} D={d} keys={keys} causal", lq,
                    lambda: mtlinv.sdpa(tq_, *tkv, causal=True, kv_len=keys),
                    lambda: mx.fast.scaled_dot_product_attention(mq_, *mkv, scale=d ** -0.5,
                                                                 mask="causal" if lq > 1 else None))


def run_doctor(out_path: str = REPORT_NAME, limit: int = 8, quick: bool = False,
               say: Callable[[str], None] | None = None) -> int:
    """Runs every step, writes the report to out_path; returns the exit status (0 all passed, 1 anything failed).
    out_path must be writable (check_out_path)."""
    say = say or (lambda line: print(line, flush=True))
    report = Report(out_path, limit, quick, say)
    say(f"mtlinv doctor{' (quick)' if quick else ''}: the report goes to {report.path}")
    report.env = environment()
    try:
        t0 = report.step(1, "device")
        say("  the backend starts; on Metal the first op loads the kernel library (a metallib, or the source compiled)")
        _device(report)
        report.done("device", t0)
        for k, v in {**report.env, **report.device}.items():
            say(f"  {k}: {v}")
        if report.device_error:
            say(report.device_error)
            report.bench_note = "not run: the device did not start"
        else:
            say(report.metal_note().replace("**", ""))
            name = f"invariance audit (limit {limit}{', quick shapes' if quick else ''})"
            t0 = report.step(2, name)
            _audit(report)
            report.done(name, t0)
            t0 = report.step(3, "timing against MLX")
            _bench(report)
            report.done("timing against MLX", t0)
    finally:
        report.save()  # also when interrupted: the verdict then says where
    failures = report.failures()
    say(f"verdict: {report.verdict().replace('**', '')}")
    say(f"report written to {report.path}: attach it to an issue")
    return 1 if failures else 0
