"""benchmarks/cuda/ab_trees.sh, the A/B of whole trees on a GPU machine: its argument errors, and its refusal to time a
tree that would import another tree's build (the comparison would then be of one build with itself)."""
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "cuda" / "ab_trees.sh"


def ab_trees(*args, out=None, **env):
    full_env = dict(os.environ, **{"MTLINV_DEVICE": "emu", "ROUNDS": "1", "PYTHON": sys.executable, **env})
    if out is not None:
        full_env["OUT"] = str(out)
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)


@pytest.mark.parametrize("args", [(), ("nonsense",), ("prepare", "x"), ("run", "x"), ("run", "--")])
def test_bad_arguments_print_the_usage(args):
    proc = ab_trees(*args)
    assert proc.returncode == 2, proc.stdout
    assert "ab_trees.sh prepare NAME COMMIT" in proc.stdout


@pytest.mark.parametrize("name", ["head", "../x", "a b", ""])
def test_prepare_refuses_a_name_that_is_not_a_folder_of_its_own(name):
    """prepare empties build/ab_NAME first: "head" (this checkout) or a path must never reach it."""
    proc = ab_trees("prepare", name, "HEAD")
    assert proc.returncode == 2 and "ab_trees: a tree name is letters, digits, _ and -, and not head" in proc.stdout
    assert (ROOT / "README.md").exists()


def test_prepare_refuses_an_unknown_commit():
    proc = ab_trees("prepare", "x", "no-such-commit-anywhere")
    assert proc.returncode == 1 and "ab_trees: no commit no-such-commit-anywhere" in proc.stdout


def test_run_times_each_tree_in_turn_and_refuses_an_unbuilt_one(tmp_path):
    """head alone runs (its own build) with FILTER picking the lines; a prepared tree without a build imports
    nothing of its own and is refused before anything runs."""
    proc = ab_trees("run", "--", sys.executable, "-c", "import mtlinv._native as n; print('from', n.__file__)",
                    out=tmp_path, FILTER="^from ")
    assert proc.returncode == 0, proc.stdout
    assert "== head, round 1: rc=0" in proc.stdout and f"from {ROOT}/mtlinv/" in proc.stdout
    failing = ab_trees("run", "--", sys.executable, "-c", "raise SystemExit(3)", out=tmp_path, ROUNDS="2")
    assert failing.returncode == 1 and failing.stdout.count("rc=3") == 2, failing.stdout  # every round, then fail
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("prepare needs this checkout's git history")
    name = f"test{uuid.uuid4().hex[:8]}"
    try:
        prepared = ab_trees("prepare", name, "HEAD")
        assert prepared.returncode == 0 and f"build/ab_{name}:" in prepared.stdout, prepared.stdout
        assert (ROOT / "build" / f"ab_{name}" / "pyproject.toml").exists()
        refused = ab_trees("run", name, "--", sys.executable, "-c", "print('ran')", out=tmp_path)
        assert refused.returncode == 1 and "== " not in refused.stdout  # no round ran
        assert f"ab_trees: {name} does not import its own mtlinv._native" in refused.stdout
    finally:
        shutil.rmtree(ROOT / "build" / f"ab_{name}", ignore_errors=True)
