"""The `mtlinv` command: `check` prints a PASS table and exits 0 on a healthy device; bad options are errors."""
import contextlib
import os
import subprocess
import sys

import pytest

import mtlinv

from mtlinv.apps.audit import run_audit
from mtlinv.apps.cli import main, version


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


def test_python_m_mtlinv_is_the_command():
    """`python -m mtlinv` runs the `mtlinv` command (it once answered only the library path flags, so `python -m
    mtlinv generate ...` printed a usage line that named neither the commands nor --version), and still answers
    the path flags."""
    def run(*args):
        return subprocess.run([sys.executable, "-m", "mtlinv", *args], capture_output=True, text=True, timeout=120)
    r = run("--version")
    assert r.returncode == 0 and r.stdout == f"mtlinv {version()}\n", r.stdout + r.stderr
    r = run("check", "--limit", "0")
    assert r.returncode == 2 and "--limit must be in [1, 256], got 0" in r.stderr, r.stdout + r.stderr
    r = run("--cmake-dir")
    assert r.returncode == 0 and r.stdout.strip() == mtlinv.get_cmake_dir(), r.stdout + r.stderr


def test_the_command_prints_the_library_folders(capsys):
    """`mtlinv --include-dir` answers as `python -m mtlinv --include-dir` does (the two are one command)."""
    assert main(["--include-dir"]) == 0 and capsys.readouterr().out == mtlinv.get_include() + "\n"


@pytest.mark.parametrize("command", [["check", "--quick"], ["doctor", "--quick"]])
def test_interruption_is_one_line_and_status_130(monkeypatch, capsys, tmp_path, command):
    """Ctrl-C during any command ends it with one line and the status of a SIGINT (130), not a traceback (the demo
    once printed the decoder's stack)."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("mtlinv.apps.audit.run_audit", interrupted)
    monkeypatch.setattr("mtlinv.apps.doctor.run_doctor", interrupted)
    monkeypatch.chdir(tmp_path)  # the doctor's default report path
    try:
        status = main(command)
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt left main()")
    assert status == 130 and capsys.readouterr().err == f"\nmtlinv {command[0]}: interrupted\n"


def test_device_that_does_not_start_is_one_line_and_status_1():
    """MTLINV_DEVICE naming no backend of this build: the commands said so at the end of a traceback."""
    r = subprocess.run([sys.executable, "-m", "mtlinv", "check", "--quick", "--limit", "2"], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, MTLINV_DEVICE="nosuch"))
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("mtlinv check: DeviceError: MTLINV_DEVICE='nosuch': this build has no such backend")
