import os

import numpy as np
import pytest

import mtlinv


@pytest.fixture(autouse=True)
def _restore_limit():
    """Every test starts from limit 0 and cannot leak its limit into the next."""
    previous = mtlinv.set_limit(0)
    yield
    mtlinv.set_limit(previous)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def pytest_report_header(config):
    info = mtlinv.device_info()
    return f"mtlinv device: {info['backend']} ({info['name']}); MTLINV_DEVICE={os.environ.get('MTLINV_DEVICE', 'auto')}"


@pytest.fixture
def gpu_plans():
    """On the emulator, plan as for a GPU (several K splits, wide threadgroups) so those code paths run in CI."""
    from mtlinv import _native
    if mtlinv.device_info()["backend"] != "emu":
        yield
        return
    _native._set_emu_gpu_plans(True)
    yield
    _native._set_emu_gpu_plans(False)


@pytest.fixture
def torch():
    """PyTorch with a CUDA device (the CUDA backend's interchange tests), else the test skips."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch
