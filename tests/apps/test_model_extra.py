"""tests/model without the model extra (gguf, tokenizers): skipped with the reason, except under CI, where the
extra is required and its absence fails the run, as every other missing tool does."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def without_gguf(tmp_path):
    """An environment whose `import gguf` fails as it does where the package is not installed."""
    (tmp_path / "gguf.py").write_text("raise ModuleNotFoundError(\"No module named 'gguf'\", name='gguf')\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    return env


def run_model_tests(env):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/model"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_model_tests_skip_without_the_extra(without_gguf):
    r = run_model_tests(without_gguf)
    assert r.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, r.stdout + r.stderr  # every module skipped
    assert "the model extra is not installed" in r.stdout and "No module named 'gguf'" in r.stdout, r.stdout


def test_model_tests_fail_without_the_extra_under_ci(without_gguf):
    r = run_model_tests(dict(without_gguf, CI="1"))
    assert r.returncode not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), r.stdout + r.stderr
    assert "CI needs the model extra" in r.stdout + r.stderr


@pytest.mark.parametrize("command", [["generate", "Hi"], ["chat"], ["demo"]])
def test_model_commands_name_the_extra_without_it(without_gguf, command):
    """Without the extra the model commands print one line naming the install command, exit 2, no traceback."""
    r = subprocess.run([sys.executable, "-m", "mtlinv.apps.cli", *command], cwd=ROOT, env=without_gguf,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == (f"mtlinv {command[0]} needs the model extra (gguf is not installed): "
                        'pip install "mtlinv[model]"\n')


def test_version():
    r = subprocess.run([sys.executable, "-m", "mtlinv.apps.cli", "--version"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("mtlinv 0.")
