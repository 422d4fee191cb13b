"""`mtlinv doctor`: the report file and the exit status, on the active device (the emulator in CI), quick mode.

The failures are real ones: the audit's own negative control (batch_invariant doing nothing), a gemv whose
results are scaled (invariant, so only the comparison with MLX can see it), a device that does not start, and a
process that dies in the middle of the audit."""
import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import mtlinv

from mtlinv.apps import doctor
from mtlinv.apps.cli import main

try:
    import mlx.core  # noqa: F401
    HAVE_MLX = True
except ImportError:
    HAVE_MLX = False


def _doctor(tmp_path, *args, name="report.md"):
    path = tmp_path / name
    code = main(["doctor", "--quick", "--out", str(path), *args])
    return code, path.read_text() if path.exists() else None


def test_doctor_passes_and_writes_the_report(tmp_path, capsys):
    code, report = _doctor(tmp_path)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"report written to {tmp_path / 'report.md'}" in out
    info = mtlinv.device_info()
    assert report.startswith("# mtlinv doctor report")
    assert f"Verdict: **all PASS** on {info['backend']} (quick run)" in report
    assert f"| backend | {info['backend']} |" in report and f"| name | {info['name']} |" in report
    for key in ("GPU family", "kernels from", "kernel library load", "fallback", "mtlinv", "Python", "NumPy", "MLX",
                "platform", "macOS"):
        assert f"| {key} | " in report, key
    assert ("Metal ran: " if info["backend"] == "metal" else "**Metal did not run.**") in report
    audit = report.split("## Invariance audit")[1].split("## Timing against MLX")[0]
    for op in ("rms_norm", "gemv", "qgemv", "sdpa"):
        assert any(line.startswith(op) and " PASS " in line for line in audit.splitlines()), op
    assert " FAIL " not in audit and "all PASS" in audit
    timing = report.split("## Timing against MLX")[1]
    if HAVE_MLX:
        rows = [line for line in timing.splitlines() if line.startswith(("| gemv ", "| qgemv ", "| sdpa "))]
        # each op at 1 row and at the limit; qgemv at 4 and 6 bits, and Q6_K as imported against MLX's 6 bits
        assert len(rows) == 10, timing
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert cells[2] in ("1", "8") and float(cells[3]) > 0 and float(cells[4]) > 0, row
            assert cells[5].endswith("x") and "WRONG" not in cells[6], row
            if "Q6_K imported" in cells[1]:  # other weights than MLX's: timed, not compared
                assert cells[6] == "n/a" and cells[7] == "timing only: different weights", row
            else:
                assert cells[6] != "n/a" and not cells[7], row
        shapes = [r.split("|")[2].strip() for r in rows]
        assert sum("Q6_K imported" in s for s in shapes) == 2
        assert sum(s.endswith(" 6-bit g64") and "Q6_K" not in s for s in shapes) == 2
        assert f"mtlinv ran on **{info['backend']}**" in timing and "MLX" in timing and "ran on **" in timing
    else:
        assert "Skipped: MLX is not importable" in timing
    assert "INCOMPLETE" not in report


def test_doctor_without_mlx(tmp_path, monkeypatch):
    """Where MLX is missing the timing step says so, and the run still passes."""
    monkeypatch.setitem(sys.modules, "mlx", None)  # import mlx.core then raises ImportError
    monkeypatch.setitem(sys.modules, "mlx.core", None)
    code, report = _doctor(tmp_path, "--limit", "2")
    assert code == 0
    assert "Skipped: MLX is not importable" in report.split("## Timing against MLX")[1]


def test_doctor_default_path_is_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(doctor, "_bench", lambda report: None)  # the path is the point here
    assert main(["doctor", "--quick", "--limit", "2"]) == 0
    assert (tmp_path / "mtlinv-doctor-report.md").is_file()
    assert f"report written to {tmp_path / 'mtlinv-doctor-report.md'}" in capsys.readouterr().out


def test_doctor_audit_fail_exits_1(tmp_path, monkeypatch):
    """With batch_invariant doing nothing every M > 1 call takes the throughput kernels: the f32 cases FAIL."""
    monkeypatch.setattr(mtlinv, "batch_invariant", lambda limit: contextlib.nullcontext())
    monkeypatch.setattr(doctor, "_bench", lambda report: None)
    code, report = _doctor(tmp_path, "--limit", "4")
    assert code == 1
    assert "Verdict: **FAIL**: " in report and "audit case" in report
    assert any(line.startswith("gemv") and " FAIL " in line for line in report.splitlines()), report


@pytest.mark.skipif(not HAVE_MLX, reason="needs MLX")
def test_doctor_wrong_results_exit_1(tmp_path, monkeypatch):
    """A gemv that scales its output is row-invariant (the audit passes); only MLX's results show it is wrong."""
    real = mtlinv.gemv
    monkeypatch.setattr(mtlinv, "gemv", lambda *a, **k: mtlinv.asarray(1.5 * np.asarray(real(*a, **k))))
    code, report = _doctor(tmp_path, "--limit", "2")
    assert code == 1
    assert "all PASS" in report.split("## Invariance audit")[1]
    assert "WRONG" in report and "far from MLX's" in report


def test_doctor_reports_the_device_keys(tmp_path, monkeypatch):
    """The keys of device_info() that builds report on Metal (and with a fallback) reach the report when present."""
    real = mtlinv.device_info
    extra = {"kernels": "source", "kernels_load_s": 0.5123, "gpu_family": "apple9",
             "fallback": "the GPU is not Apple7 or newer"}
    monkeypatch.setattr(mtlinv, "device_info", lambda: {**real(), **extra})
    monkeypatch.setattr(doctor, "_bench", lambda report: None)
    code, report = _doctor(tmp_path, "--limit", "2")
    assert code == 0
    for line in ("| kernels from | source |", "| kernel library load | 0.512 s |", "| GPU family | apple9 |",
                 "| fallback | the GPU is not Apple7 or newer |"):
        assert line in report
    if real()["backend"] != "metal":
        assert "MTLINV_DEVICE=auto fell back from Metal: the GPU is not Apple7 or newer." in report


def test_doctor_usage_errors_exit_2(tmp_path, capsys):
    for args, message in ((["--limit", "0"], "--limit must be in [1, 256], got 0"),
                          (["--out", str(tmp_path / "missing" / "r.md")], "does not exist"),
                          (["--out", str(tmp_path)], "is a directory"),
                          (["--bogus"], "unrecognized arguments: --bogus")):
        with pytest.raises(SystemExit) as exit_info:
            main(["doctor", *args])
        assert exit_info.value.code == 2, args
        assert message in capsys.readouterr().err, args
    assert not list(tmp_path.iterdir())  # nothing written on bad usage


def _run(args, env=None, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def test_doctor_console_and_no_device(tmp_path):
    """Through the console entry: a device that does not start still gives a report, and exit 1."""
    built = mtlinv.device_info()["built_backends"]
    missing = next((b for b in ("metal", "cuda") if b not in built), None)
    if missing is None:
        pytest.skip("every backend is built here")
    r = _run(["-m", "mtlinv.apps.cli", "doctor", "--quick", "--out", "r.md"], {"MTLINV_DEVICE": missing}, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    report = (tmp_path / "r.md").read_text()
    assert "Verdict: **FAIL**: the device did not start" in report and "DeviceError" in report
    assert "**Metal did not run**" in report


def test_doctor_report_survives_a_crash(tmp_path):
    """A process that dies during the audit (as a GPU fault may kill it) leaves a report that says where."""
    script = ("import os, mtlinv.apps.audit as a\n"
              "def crash(limit): os._exit(3)\n"
              "real = a.cases\n"
              "a.cases = lambda quick: real(quick)[:2] + [a.Case('gemv', 'crashes', crash)]\n"
              "from mtlinv.apps.cli import main\n"
              "main(['doctor', '--quick', '--limit', '2', '--out', 'r.md'])\n")
    r = _run(["-c", script], cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    report = (tmp_path / "r.md").read_text()
    assert 'Verdict: **INCOMPLETE**: the run stopped during "invariance audit (limit 2, quick shapes)"' in report
    assert report.count(" PASS ") == 2 and "| invariance audit (limit 2, quick shapes) | did not finish |" in report
