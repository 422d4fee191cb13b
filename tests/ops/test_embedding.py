"""The C++ library for embedding: CMake builds the core, the emulator and the C API without Python, and the
examples (C++ and C) check one row's bits against the row alone."""
import os
import subprocess

import pytest

import cmake_build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def build_dir():
    return cmake_build.build()


@pytest.mark.parametrize("program", ["embed_example", "embed_example_c"])
def test_example_runs_and_passes(build_dir, program):
    env = dict(os.environ, MTLINV_DEVICE="emu")
    r = subprocess.run([str(build_dir / program)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "has the bits of" in r.stdout and "DIFFERS" not in r.stdout
    assert "bad input:" in r.stdout and "has K=" in r.stdout


def run_program(build_dir, *args, **env):
    r = subprocess.run([str(build_dir / args[0]), *args[1:]], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, MTLINV_DEVICE="emu", **env))
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("program", ["api_errors", "cpp_errors"])
def test_api_error_paths(build_dir, program):
    """tests/capi: every bad call gets its error (status or exception) naming the argument; none crashes."""
    out = run_program(build_dir, program, MTLINV_BATCH_INVARIANT_LIMIT="")
    assert out.count("ok: ") >= 7, out


def test_libraries_read_the_limit_variable(build_dir):
    """The C library takes its limit from MTLINV_BATCH_INVARIANT_LIMIT, as the Python package does, and an invalid
    value is the error of every call that uses the limit, not a silent 0."""
    run_program(build_dir, "api_errors", "env", "8", MTLINV_BATCH_INVARIANT_LIMIT="8")
    run_program(build_dir, "api_errors", "env", "0", MTLINV_BATCH_INVARIANT_LIMIT="")
    run_program(build_dir, "api_errors", "bad-env", MTLINV_BATCH_INVARIANT_LIMIT="garbage")
