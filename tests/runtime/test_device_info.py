"""device_info()'s account of the device and its kernels, and MTLINV_DEVICE=auto's choice when the backend it
prefers refuses (as Metal refuses an Intel Mac's GPU): what a user reads to learn where mtlinv runs, and why."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import mtlinv
from mtlinv import _native


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=120)


def test_device_info_says_where_the_kernels_come_from():
    info = mtlinv.device_info()
    if info["backend"] != "metal":
        assert info["kernels"] == "built-in"
        assert info["kernels_load_s"] is None and info["kernels_fallback"] is None and info["gpu_family"] is None
        return
    assert info["gpu_family"] in ("apple7", "apple8", "apple9")
    assert info["kernels"] in ("metallib", "source")
    if info["kernels"] == "metallib":
        assert info["kernels_fallback"] is None
    x = np.ones((2, 64), np.float32)
    np.asarray(mtlinv.rms_norm(x, np.ones(64, np.float32)))  # loads (or compiles) the kernels it needs
    assert mtlinv.device_info()["kernels_load_s"] > 0


def test_auto_falls_back_to_the_emulator_saying_why(capfd):
    refusal = ("Metal: 'AMD Radeon Pro 5500M' (GPU family mac2) cannot run mtlinv's kernels: they need Apple "
               "silicon, an Apple7-family GPU or newer")
    assert _native._choose_auto_backend([refusal]) == ("emu", refusal)
    err = capfd.readouterr().err
    assert err.count("mtlinv: warning: MTLINV_DEVICE=auto: ") == 1, err
    assert refusal in err and "running on the emu backend" in err, err


def test_auto_reports_every_backend_that_refused(capfd):
    refusals = ["Metal: no device (MTLCreateSystemDefaultDevice returned nil)",
                "CUDA: no device (the driver is missing, or sees none)"]
    assert _native._choose_auto_backend(refusals) == ("emu", "; ".join(refusals))
    assert "; ".join(refusals) in capfd.readouterr().err


def test_auto_without_a_refusal_is_silent(capfd):
    assert _native._choose_auto_backend([]) == ("emu", None)
    assert capfd.readouterr().err == ""


def test_fallback_in_device_info():
    """MTLINV_DEVICE naming a backend never falls back; auto reports a fallback, and warns once, exactly when it
    runs on another backend than the first this build prefers to the emulator."""
    show = "import json, mtlinv; i = mtlinv.device_info(); print(json.dumps([i['backend'], i['fallback']]))"
    named = run_python(show, MTLINV_DEVICE="emu")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout) == ["emu", None] and "warning" not in named.stderr, named.stderr
    auto = run_python(show, MTLINV_DEVICE="auto")
    assert auto.returncode == 0, auto.stderr
    backend, fallback = json.loads(auto.stdout)
    preferred = [b for b in mtlinv.device_info()["built_backends"] if b != "emu"]
    if preferred and backend != preferred[0]:
        assert isinstance(fallback, str) and fallback, auto.stdout
        assert auto.stderr.count("mtlinv: warning: MTLINV_DEVICE=auto: ") == 1, auto.stderr
    else:
        assert fallback is None and "warning" not in auto.stderr, auto.stdout + auto.stderr


EMULATOR_CHILD = os.environ.get("MTLINV_DEVICE", "auto") in ("auto", "emu") and mtlinv.device_info()["backend"] == "emu"
# 2^-70 * 2^-70 = 2^-140, a float32 subnormal: 0.0 where the emulator flushes (MTLINV_EMU_FTZ=1).
TINY_PRODUCT = "y = mtlinv.gemv(np.array([[2.0 ** -70]], np.float32), np.array([[2.0 ** -70]], np.float32))\n"


@pytest.mark.skipif(not EMULATOR_CHILD, reason="the emulator's variables, read where it is the device")
@pytest.mark.parametrize("variable, value, message", [
    ("MTLINV_EMU_FTZ", "false", "MTLINV_EMU_FTZ='false' is not 0 or 1"),
    ("MTLINV_EMU_CHECK", "yes", "MTLINV_EMU_CHECK='yes' is not 0 or 1"),
    ("MTLINV_EMU_DEFER", "on", "MTLINV_EMU_DEFER='on' is not 0 or 1"),
    ("MTLINV_EMU_THREADS", "-4", "MTLINV_EMU_THREADS='-4' is not a non-negative integer"),
    ("MTLINV_EMU_THREADS", "1e3", "MTLINV_EMU_THREADS='1e3' is not a non-negative integer"),
    ("MTLINV_EMU_THREADS", "5000", "MTLINV_EMU_THREADS='5000' is beyond the largest worker count, 1024"),
    ("MTLINV_EMU_SEED", "0x10", "MTLINV_EMU_SEED='0x10' is not a non-negative integer"),
])
def test_a_bad_switch_or_count_is_an_error_naming_it(variable, value, message):
    """A value the emulator would otherwise guess at ("false" turning flush-to-zero on, "1e3" giving one worker) is
    refused at the first op, naming the variable and its value."""
    r = run_python("import numpy as np, mtlinv\n"
                   "try:\n    mtlinv.gemv(np.ones((1, 4), np.float32), np.ones((2, 4), np.float32))\n"
                   "except mtlinv.InvalidArgumentError as e:\n    print('refused:', e)\n",
                   MTLINV_DEVICE="emu", **{variable: value})
    assert r.returncode == 0 and f"refused: {message}" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(not EMULATOR_CHILD, reason="the emulator's variables, read where it is the device")
@pytest.mark.parametrize("check", ["0", "1"])
def test_good_switches_and_counts_are_taken(check):
    """0, 1 and digits are taken, and an empty value is the default: the controls of the test above."""
    r = run_python("import numpy as np, mtlinv; from mtlinv import _native\n"
                   + TINY_PRODUCT +
                   "print(mtlinv.device_info()['threads'], _native._emu_check_mode(), _native._set_emu_ftz(False),\n"
                   "      float(np.asarray(y)[0, 0]))",
                   MTLINV_DEVICE="emu", MTLINV_EMU_THREADS="3", MTLINV_EMU_FTZ="1", MTLINV_EMU_CHECK=check,
                   MTLINV_EMU_SEED="12", MTLINV_EMU_DEFER="")
    assert r.returncode == 0 and r.stdout.split() == ["3", str(check == "1"), "True", "0.0"], r.stdout + r.stderr


@pytest.mark.skipif(not EMULATOR_CHILD, reason="the emulator's variables, read where it is the device")
def test_a_switch_set_before_the_first_op_is_kept():
    """The environment is read once, before the first switch or backend: a mode set through a switch is then kept
    when the backend is made, or when MTLINV_DEVICE=auto's test makes a throwaway one (it once reset them)."""
    r = run_python("import numpy as np, mtlinv; from mtlinv import _native\n"
                   "print(_native._set_emu_ftz(False))\n"
                   "_native._choose_auto_backend(['refused'])\n"
                   + TINY_PRODUCT +
                   "print(_native._set_emu_ftz(False), float(np.asarray(y)[0, 0]))",
                   MTLINV_DEVICE="emu", MTLINV_EMU_FTZ="1")
    assert r.returncode == 0 and r.stdout.split() == ["True", "False", repr(2.0 ** -140)], r.stdout + r.stderr
