"""Qwen 2 (q/k/v biases), Qwen 3 (q/k norms) and Llama 3's RoPE scaling, each on real files made by real tools
(tools/make_model_fixtures.py): MLX checkpoints written by mlx-lm's own classes and save path, against mlx-lm's
logits; GGUFs written by the gguf package's writer and quantised by llama.cpp, against llama.cpp's logits. Token
agreement and logit error, not bits (the kernels differ); each with the negative control of the feature left out,
and refusals of what stays unsupported."""
import dataclasses
import json
import pathlib
import shutil

import gguf
import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv.apps.cli import main
from mtlinv.model import load, load_gguf
from mtlinv.model.device_model import DeviceModel, DeviceWeights, forward_by_ops
from mtlinv.model.gguf_model import GGUFModelError
from mtlinv.model.mlx_checkpoint import Checkpoint, MLXCheckpointError
from mtlinv.model.reference import LlamaWeights, ReferenceModel
from test_reference import write_gguf

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
MLX = ("mlx-qwen2", "mlx-qwen3", "mlx-llama3-rope-scaled")
GGUF = ("qwen2", "qwen3", "llama3")
# What each fixture adds to a llama, as the negative control leaves it out: layer fields set to None, or the
# config's RoPE table.
FEATURE = {"qwen2": ("bq", "bk", "bv"), "qwen3": ("q_norm", "k_norm"), "llama3": "rope_freqs"}


def feature(name):
    return FEATURE[next(k for k in FEATURE if k in name)]


@pytest.fixture(scope="module")
def mlx_logits():
    return np.load(FIXTURES / "mlx_reference_logits.npz")


@pytest.fixture(scope="module")
def gguf_logits():
    return np.load(FIXTURES / "arch_reference_logits.npz")


def agreement(got, want):
    """Share of positions whose best token agrees, and the largest logit error relative to the logits' spread."""
    top = float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))
    return top, float(np.abs(got - want).max() / want.std())


def clear_positions_agree(got, want, bound):
    """The best token agrees wherever the reference's best two logits lie more than 2 * bound (of the spread)
    apart, where logits within the bound cannot swap them. Random tiny models have near-ties: bfloat16 activations
    against float32 ones may pick the other of two logits 0.4% of the spread apart."""
    top2 = np.sort(want, -1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * bound * want.std()
    return bool(np.all((np.argmax(got, -1) == np.argmax(want, -1))[clear]))


def without_feature(weights, name):
    """Reference weights (LlamaWeights) with the architecture's feature left out."""
    left_out = feature(name)
    if left_out == "rope_freqs":
        return dataclasses.replace(weights, config=dataclasses.replace(weights.config, rope_freqs=None))
    layers = tuple(dataclasses.replace(layer, **dict.fromkeys(left_out)) for layer in weights.layers)
    return dataclasses.replace(weights, layers=layers)


def device_without_feature(weights, name):
    """Device weights (DeviceWeights) with the architecture's feature left out."""
    left_out = feature(name)
    if left_out == "rope_freqs":
        return dataclasses.replace(weights, config=dataclasses.replace(weights.config, rope_freqs=None))
    if left_out == ("bq", "bk", "bv"):
        layers = [dataclasses.replace(l, w_qkv=dataclasses.replace(l.w_qkv, bias=None)) for l in weights.layers]
    else:
        layers = [dataclasses.replace(l, q_norm=None, k_norm=None) for l in weights.layers]
    return dataclasses.replace(weights, layers=tuple(layers))


def test_fixtures_hold_the_features():
    """The fixtures carry what they test: biases and norm weights far from 0 and 1 (mlx-lm initialises norms to
    ones, which would hide a norm left out), and Llama 3's table differs from the plain RoPE's: long wavelengths
    slowed by the factor 8, the fastest pairs blended."""
    for name in ("mlx-qwen2", "mlx-qwen3"):
        layer = Checkpoint(FIXTURES / name).reference_weights().layers[1]
        for key in feature(name):
            v = getattr(layer, key)
            assert v is not None and np.abs(v - (1.0 if "norm" in key else 0.0)).max() > 0.1, (name, key)
    for name in ("qwen2", "qwen3"):
        layer = LlamaWeights.from_gguf(load_gguf(FIXTURES / f"tiny-{name}-Q4_K.gguf")).layers[1]
        assert all(getattr(layer, key) is not None for key in feature(name))
    for config in (Checkpoint(FIXTURES / "mlx-llama3-rope-scaled").config,
                   load_gguf(FIXTURES / "tiny-llama3-Q4_K.gguf").config):
        base = config.rope_theta ** (-np.arange(0, config.head_dim, 2) / config.head_dim)
        ratio = base / np.array(config.rope_freqs)
        assert ratio.max() == pytest.approx(8.0) and ratio.min() < 2.0, ratio  # slowed 8x, and blended


# --- MLX checkpoints against mlx-lm ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MLX)
def test_device_gives_mlx_lm_logits(name, mlx_logits):
    tokens = [int(t) for t in mlx_logits["tokens"]]
    model = load(FIXTURES / name)
    got = model.decoder(len(tokens)).forward(tokens, 0)
    top, err = agreement(got, mlx_logits[name])
    assert top >= 0.9 and err < 0.1 and clear_positions_agree(got, mlx_logits[name], 0.1), (top, err)
    wrong = DeviceModel(device_without_feature(model.weights, name), len(tokens)).forward(tokens, 0)
    top_w, err_w = agreement(wrong, mlx_logits[name])
    assert err_w > 3 * err and (top_w < 1.0 or err_w > 0.1), (top_w, err_w, err)


@pytest.mark.parametrize("name", MLX)
def test_float64_reference_gives_mlx_lm_logits(name, mlx_logits):
    tokens = [int(t) for t in mlx_logits["tokens"]]
    weights = Checkpoint(FIXTURES / name).reference_weights()
    top, err = agreement(ReferenceModel(weights).forward(tokens, 0), mlx_logits[name])
    assert top == 1.0 and err < 0.05, (top, err)
    top_w, err_w = agreement(ReferenceModel(without_feature(weights, name)).forward(tokens, 0), mlx_logits[name])
    assert err_w > 3 * err and (top_w < 1.0 or err_w > 0.1), (top_w, err_w, err)


@pytest.mark.parametrize("name", MLX)
def test_decoder_has_the_bits_of_the_python_ops(name):
    """The C++ decoder's biases, q/k norms and RoPE table are those of the ops called one by one
    (device_model.forward_by_ops): a prefill and a 3-token verification at limit 4, every logit and cache bit."""
    weights = load(FIXTURES / name).weights
    c = weights.config
    model = DeviceModel(weights, 12)
    k, v = ([mtlinv.asarray(np.zeros((c.n_kv_heads, 12, c.head_dim), ml_dtypes.bfloat16)) for _ in weights.layers]
            for _ in "kv")
    with mtlinv.batch_invariant(4):
        for tokens, start in (([297, 72, 101, 108, 108], 0), ([111, 32, 119], 5)):
            want = np.asarray(forward_by_ops(weights, k, v, tokens, start)).view(np.uint16)
            assert np.array_equal(np.asarray(model.forward_on_device(tokens, start)).view(np.uint16), want)
    for i in range(c.n_layers):
        assert np.array_equal(np.asarray(model._k[i]).view(np.uint16), np.asarray(k[i]).view(np.uint16))
        assert np.array_equal(np.asarray(model._v[i]).view(np.uint16), np.asarray(v[i]).view(np.uint16))


def test_qwen3_greedy_equals_speculative_at_limit_k_plus_1():
    """generate() runs every call under batch_invariant(k + 1): a draft changes the speed, never the tokens."""
    model = load(FIXTURES / "mlx-qwen3")
    args = dict(max_tokens=12, temperature=0, k=3, stop_tokens=())
    plain = [t.id for t in mtlinv.generate(model, "the sea", **args)]
    for draft in ("layer-skip", "prompt-lookup"):
        spec = mtlinv.generate(model, "the sea", draft=draft, **args)
        assert [t.id for t in spec] == plain, draft
        assert draft == "prompt-lookup" or spec.counts.proposed > 0  # the layer-skip draft always proposes


def _copy_with_config(tmp_path, name, **changes):
    path = tmp_path / name
    shutil.copytree(FIXTURES / name, path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(changes)
    (path / "config.json").write_text(json.dumps(cfg))
    return path


def test_rope_parameters_of_transformers_5_are_read(tmp_path):
    """transformers >= 5 writes rope_theta and the scaling nested under rope_parameters: read as mlx-lm reads them,
    the same model (the same logits), not one with the default base."""
    cfg = json.loads((FIXTURES / "mlx-llama3-rope-scaled" / "config.json").read_text())
    path = _copy_with_config(tmp_path, "mlx-llama3-rope-scaled", rope_theta=None, rope_scaling=None,
                             rope_parameters=dict(cfg["rope_scaling"], rope_theta=cfg["rope_theta"]))
    assert Checkpoint(path).config == Checkpoint(FIXTURES / "mlx-llama3-rope-scaled").config


@pytest.mark.parametrize("name, changes, message", [
    ("mlx-llama3-rope-scaled", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     "rope_scaling type 'yarn' is not supported; supported: default, linear, llama3"),
    ("mlx-llama3-rope-scaled", {"rope_scaling": {"rope_type": "llama3", "factor": -1.0}},
     r"rope_scaling factor=-1.0 must be a positive finite number"),
    ("mlx-llama3-rope-scaled", {"rope_scaling": {"type": "linear", "factor": 0.5}},
     r"rope_scaling factor=0.5 of type 'linear' must be >= 1"),
    ("mlx-qwen2", {"use_sliding_window": True}, r"sliding-window attention \(use_sliding_window\) is not supported"),
    ("mlx-qwen3", {"partial_rotary_factor": 0.5}, r"partial RoPE \(partial_rotary_factor=0.5\) is not supported"),
    ("mlx-qwen3", {"model_type": "qwen3_moe"},
     "model_type 'qwen3_moe' is not supported; supported: llama, qwen2, qwen3"),
    ("mlx-llama3-rope-scaled", {"attention_bias": True},
     "projection biases .* of model_type 'llama' are not supported"),
])
def test_unsupported_remainder_is_refused_by_name(tmp_path, name, changes, message, capsys):
    path = _copy_with_config(tmp_path, name, **changes)
    with pytest.raises(MLXCheckpointError, match=message):
        load(path)
    assert main(["generate", "Hi", "--model", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


# --- GGUFs against llama.cpp ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GGUF)
def test_float64_reference_gives_llama_cpp_logits(name, gguf_logits):
    """llama.cpp's CPU products round activations to 8-bit blocks: errors of a few % of the logits' spread."""
    tokens = [int(t) for t in gguf_logits["tokens"]]
    weights = LlamaWeights.from_gguf(load_gguf(FIXTURES / f"tiny-{name}-Q4_K.gguf"))
    top, err = agreement(ReferenceModel(weights).forward(tokens, 0), gguf_logits[name])
    assert top == 1.0 and err < 0.1, (top, err)
    top_w, err_w = agreement(ReferenceModel(without_feature(weights, name)).forward(tokens, 0), gguf_logits[name])
    assert err_w > 3 * err and (top_w < 1.0 or err_w > 0.1), (top_w, err_w, err)


@pytest.mark.parametrize("name", GGUF)
def test_device_gives_llama_cpp_logits(name, gguf_logits):
    tokens = [int(t) for t in gguf_logits["tokens"]]
    weights = DeviceWeights.from_gguf(load_gguf(FIXTURES / f"tiny-{name}-Q4_K.gguf"))
    top, err = agreement(DeviceModel(weights, len(tokens)).forward(tokens, 0), gguf_logits[name])
    assert top == 1.0 and err < 0.1, (top, err)
    wrong = DeviceModel(device_without_feature(weights, name), len(tokens)).forward(tokens, 0)
    top_w, err_w = agreement(wrong, gguf_logits[name])
    assert err_w > 3 * err and (top_w < 1.0 or err_w > 0.1), (top_w, err_w, err)


def test_qwen_rows_are_permuted_for_interleaved_rope(gguf_logits):
    """Negative control of the reader's permutation of a qwen file's q and k rows (llama.cpp rotates them as NEOX,
    on halves): undone, the logits leave the bound."""
    from mtlinv.model.gguf_model import interleave_rope_rows
    weights = LlamaWeights.from_gguf(load_gguf(FIXTURES / "tiny-qwen3-Q4_K.gguf"))
    c = weights.config

    def undo(a, heads):  # the inverse permutation: interleaved pairs back to halves
        d = a.shape[0] // heads
        return a.reshape(heads, d // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)

    layer = weights.layers[0]
    assert np.array_equal(interleave_rope_rows(undo(layer.wq, c.n_heads), c.n_heads), layer.wq)
    layers = tuple(dataclasses.replace(l, wq=undo(l.wq, c.n_heads), wk=undo(l.wk, c.n_kv_heads),
                                       q_norm=undo(l.q_norm, 1), k_norm=undo(l.k_norm, 1)) for l in weights.layers)
    tokens = [int(t) for t in gguf_logits["tokens"]]
    top, err = agreement(ReferenceModel(dataclasses.replace(weights, layers=layers)).forward(tokens, 0),
                         gguf_logits["qwen3"])
    assert top < 1.0 or err > 0.1, (top, err)


def test_gguf_tensors_outside_the_architecture_are_refused(tmp_path):
    """A tensor the decoder would leave out changes the model: a qwen2 file relabelled llama (its biases unused) is
    refused naming a bias, and a qwen3 file without a norm names the missing one."""
    path = tmp_path / "relabelled.gguf"
    path.write_bytes((FIXTURES / "tiny-qwen2-Q4_K.gguf").read_bytes().replace(b"qwen2", b"llama"))
    with pytest.raises(GGUFModelError, match=r"tensor 'blk.0.attn_.\.bias' is not part of a llama decoder"):
        load_gguf(path)
    raw = (FIXTURES / "tiny-qwen3-Q4_K.gguf").read_bytes()
    path.write_bytes(raw.replace(b"blk.0.attn_q_norm.weight", b"blk.0.attn_q_xorm.weight"))
    with pytest.raises(GGUFModelError, match="missing tensor 'blk.0.attn_q_norm.weight'"):
        load_gguf(path)


STRING, FLOAT32 = gguf.GGUFValueType.STRING, gguf.GGUFValueType.FLOAT32


@pytest.mark.parametrize("meta, expect", [
    ({}, None),
    ({"rope.scaling.type": ("linear", STRING), "rope.scaling.factor": (4.0, FLOAT32)}, 4.0),
    ({"rope.scaling.type": ("yarn", STRING)},
     r"llama.rope.scaling.type 'yarn' is not supported; supported: none, linear"),
    ({"rope.scaling.type": ("linear", STRING), "rope.scaling.factor": (0.5, FLOAT32)},
     r"llama.rope.scaling.factor must be a finite number of at least 1, got 0.5"),
])
def test_gguf_rope_scaling_keys(tmp_path, make_weights, meta, expect):
    """A GGUF's rope.scaling.type: none (the plain RoPE), linear (every frequency divided by the factor), any other
    refused by name."""
    weights = make_weights(n_layers=1)
    write_gguf(tmp_path / "scaled.gguf", weights, {}, meta)
    if isinstance(expect, str):
        with pytest.raises(GGUFModelError, match=expect):
            load_gguf(tmp_path / "scaled.gguf")
        return
    c = load_gguf(tmp_path / "scaled.gguf").config
    if expect is None:
        assert c.rope_freqs is None
    else:
        base = c.rope_theta ** (-np.arange(0, c.head_dim, 2) / c.head_dim)
        np.testing.assert_allclose(np.array(c.rope_freqs) * expect, base, rtol=1e-12)
