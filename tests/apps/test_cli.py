"""The `mtlinv` command: `check` prints a PASS table and exits 0 on a healthy device; bad options are errors."""
import contextlib
import subprocess
import sys

import pytest

import mtlinv

from mtlinv.apps.audit import run_audit
from mtlinv.apps.cli import main


def test_check_quick_passes():
    lines = []
    assert run_audit(limit=4, quick=True, out=lines.append)
    table = "\n".join(lines)
    for op in ("rms_norm", "add_rms_norm", "gemv", "qgemv", "sdpa"):
        assert f"\n{op}" in table
    assert "FAIL" not in table and table.rstrip().endswith("all PASS")


def test_check_fails_when_the_limit_is_ignored(monkeypatch):
    """The audit's negative control: with batch_invariant doing nothing every M > 1 call takes the throughput
    kernels, and the f32 cases (whose outputs show every reduction order) must then FAIL."""
    monkeypatch.setattr(mtlinv, "batch_invariant", lambda limit: contextlib.nullcontext())
    lines = []
    assert not run_audit(limit=4, quick=True, out=lines.append)
    failed = [line for line in lines if "FAIL" in line]
    assert any(line.startswith("gemv") and "f32" in line for line in failed), "\n".join(lines)
    assert any(line.startswith("sdpa") for line in failed), "\n".join(lines)


def test_check_rejects_bad_limit(capsys):
    for limit in ("0", "257"):  # past 256, the attention cases' blocks would pass their keys: false FAILs
        with pytest.raises(SystemExit) as exit_info:
            main(["check", "--limit", limit])
        assert exit_info.value.code == 2
        assert f"--limit must be in [1, 256], got {limit}" in capsys.readouterr().err


def test_console_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "mtlinv.apps.cli", "check", "--quick", "--limit", "2"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all PASS" in r.stdout
