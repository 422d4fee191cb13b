import os
import subprocess
import sys

import pytest

import mtlinv


def test_set_limit_returns_previous():
    assert mtlinv.get_limit() == 0
    assert mtlinv.set_limit(8) == 0
    assert mtlinv.get_limit() == 8
    assert mtlinv.set_limit(3) == 8


@pytest.mark.parametrize("bad", [-1, -100])
def test_negative_limit_is_value_error(bad):
    with pytest.raises(ValueError, match=f"got {bad}"):
        mtlinv.set_limit(bad)
    with pytest.raises(mtlinv.InvalidArgumentError):
        mtlinv.set_limit(bad)
    assert mtlinv.get_limit() == 0


@pytest.mark.parametrize("bad", [1.5, "4", None, True])
def test_non_int_limit_is_rejected(bad):
    with pytest.raises(ValueError, match="limit must be an int"):
        mtlinv.set_limit(bad)


def test_context_manager_restores():
    mtlinv.set_limit(2)
    with mtlinv.batch_invariant(16) as n:
        assert n == 16 and mtlinv.get_limit() == 16
    assert mtlinv.get_limit() == 2
    with pytest.raises(RuntimeError):
        with mtlinv.batch_invariant(5):
            raise RuntimeError("boom")
    assert mtlinv.get_limit() == 2


def _import_with_env(value):
    env = dict(os.environ, MTLINV_BATCH_INVARIANT_LIMIT=value)
    return subprocess.run([sys.executable, "-c", "import mtlinv; print(mtlinv.get_limit())"], env=env,
                          capture_output=True, text=True)


def test_env_initialises_limit():
    r = _import_with_env("12")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "12"


@pytest.mark.parametrize("value", ["abc", "-3", "4x", "1e3", " 5", "+5", "5 ", "1073741825"])
def test_bad_env_fails_import_loudly(value):
    r = _import_with_env(value)
    assert r.returncode != 0
    assert "MTLINV_BATCH_INVARIANT_LIMIT" in r.stderr and value in r.stderr


def test_env_beyond_the_largest_limit_says_so():
    r = _import_with_env("1073741825")
    assert "is beyond the largest limit, 2^30" in r.stderr


def test_empty_env_is_unset():
    """An empty MTLINV_BATCH_INVARIANT_LIMIT means unset (the common convention): limit 0, no error."""
    r = _import_with_env("")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"
