"""mtlinv.mlx on mlx-lm's own model classes (llama, qwen2; tiny random weights, float32, bfloat16 and MLX's 4-bit
affine quantization) and its own speculative decoding.

Why the checks are what they are: MLX's CPU build is itself row-invariant at these shapes, so speculative == greedy
would pass without mtlinv. The proof that the patched model runs on mtlinv is bitwise: its logits equal a forward
pass written here from mtlinv's ops (gemv, qgemv, sdpa) and the model's own norms, RoPE and embedding, and differ
from MLX's own logits, which use other kernels; the calls into mtlinv are counted by wrapping mtlinv's ops, apart
from the Routing's own counters. Negative controls: limit 0, and one layer deliberately left to MLX, each give
logits that are not the reference's. The tests run on both of mtlinv.mlx's routes (the `route` fixture): the MLX
extension's primitives, and DLPack."""
import numpy as np
import pytest

import mtlinv

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")
import mlx.nn as nn  # noqa: E402
from mlx_lm.generate import generate_step, speculative_generate_step  # noqa: E402
from mlx_lm.models import base, llama, qwen2  # noqa: E402
from mlx_lm.models.activations import swiglu  # noqa: E402

import mtlinv.mlx  # noqa: E402

pytestmark = pytest.mark.skipif(mtlinv.device_info()["backend"] == "cuda",
                                reason="MLX's CPU arrays are host memory; CUDA memory is not MLX's")

ARCHS = {"llama": llama, "qwen2": qwen2}
PROMPT = [3, 17, 42, 8, 99, 5]


def make_model(arch="llama", dtype="float32", quantized=False, tied=False, layers=2, seed=0):
    """A tiny random-weight model of mlx-lm's own classes: head dim 64 (one of sdpa's), GQA 2:1."""
    module = ARCHS[arch]
    args = module.ModelArgs(model_type=arch, hidden_size=128, num_hidden_layers=layers, intermediate_size=256,
                            num_attention_heads=2, num_key_value_heads=1, rms_norm_eps=1e-5, vocab_size=256,
                            tie_word_embeddings=tied)
    mx.random.seed(seed)
    model = module.Model(args)
    if quantized:
        nn.quantize(model, group_size=64, bits=4)
    if dtype != "float32":
        model.set_dtype(getattr(mx, dtype))
    mx.eval(model.parameters())
    return model


def as_bits(a):
    a = np.array(a.astype(mx.float32)) if a.dtype == mx.bfloat16 else np.array(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint16)


def to_mx(t):
    return mx.array(np.asarray(t))


def linear(module, x):
    """mtlinv's op for the layer, on the layer's own parameters."""
    if "scales" in module:
        return to_mx(mtlinv.qgemv(x, module["weight"], module["scales"], module["biases"], bias=module.get("bias"),
                                  group_size=module.group_size, bits=module.bits))
    return to_mx(mtlinv.gemv(x, module["weight"], module.get("bias")))


def reference_logits(model, tokens, limit=8):
    """The llama/qwen2 forward pass, with every projection and attention on mtlinv's ops and the rest (embedding,
    RMSNorm, RoPE, SwiGLU) on the model's own MLX modules. No KV cache: positions 0 .. L-1."""
    inner = model.model
    h = inner.embed_tokens(tokens)
    B, L, _ = h.shape
    with mtlinv.batch_invariant(limit):
        for layer in inner.layers:
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            q, k, v = (linear(p, x) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
            q = attn.rope(q.reshape(B, L, attn.n_heads, -1).transpose(0, 2, 1, 3))
            k = attn.rope(k.reshape(B, L, attn.n_kv_heads, -1).transpose(0, 2, 1, 3))
            v = v.reshape(B, L, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
            o = to_mx(mtlinv.sdpa(q, k, v, scale=attn.scale, causal=True))
            h = h + linear(attn.o_proj, o.transpose(0, 2, 1, 3).reshape(B, L, -1))
            r = layer.post_attention_layernorm(h)
            mlp = layer.mlp
            h = h + linear(mlp.down_proj, swiglu(linear(mlp.gate_proj, r), linear(mlp.up_proj, r)))
        h = inner.norm(h)
        if model.args.tie_word_embeddings:
            return linear(inner.embed_tokens, h)
        return linear(model.lm_head, h)


@pytest.fixture
def calls(monkeypatch, route):
    """Counts the calls into mtlinv's ops on the route's side (mtlinv's own ops, or the extension's primitives), by
    op and rows (M of gemv/qgemv, queries of sdpa)."""
    from collections import Counter
    counted = Counter()
    ops = mtlinv.mlx._extension() if route == "primitive" else mtlinv
    for name in ("gemv", "qgemv", "sdpa"):
        op = getattr(ops, name)

        def wrapper(*args, _op=op, _name=name, **kwargs):
            x = args[0]
            rows = x.shape[-2] if _name == "sdpa" else int(np.prod(x.shape[:-1]))
            counted[(_name, rows)] += 1
            return _op(*args, **kwargs)
        monkeypatch.setattr(ops, name, wrapper)
    return counted


CASES = {
    "llama-f32": dict(arch="llama"),
    "llama-bf16": dict(arch="llama", dtype="bfloat16"),
    "llama-q4": dict(arch="llama", quantized=True),
    "llama-q4-bf16-tied": dict(arch="llama", dtype="bfloat16", quantized=True, tied=True),
    "qwen2-f16-tied": dict(arch="qwen2", dtype="float16", tied=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_patched_logits_are_mtlinvs_bits(case, calls, route):
    model = make_model(**CASES[case])
    tokens = mx.array([PROMPT])
    mlx_logits = model(tokens)
    expected = reference_logits(model, tokens)
    calls.clear()
    with mtlinv.mlx.patch(model, limit=8, route=route) as routing:
        got = model(tokens)
        mx.eval(got)
    assert np.array_equal(as_bits(got), as_bits(expected)), case
    assert not np.array_equal(as_bits(got), as_bits(mlx_logits)), "MLX's kernels give other bits: the test can tell"
    n_layers, linear_op = len(model.layers), "qgemv" if CASES[case].get("quantized") else "gemv"
    assert calls == {(linear_op, len(PROMPT)): 7 * n_layers + 1, ("sdpa", len(PROMPT)): n_layers}
    assert sum(routing.routed.values()) == 8 * n_layers + 1 and not routing.to_mlx


def test_a_patched_forward_pass_stays_lazy(mlx_ext):
    """On the primitive route a routed layer evaluates nothing: the forward pass is one MLX graph, and mtlinv's plans
    run when MLX evaluates it, one per routed call."""
    model = make_model()
    with mtlinv.mlx.patch(model, limit=8, route="primitive") as routing:
        before = mlx_ext.plans_run()
        logits = model(mx.array([PROMPT]))
        assert mlx_ext.plans_run() == before, "nothing ran while the graph was built"
        mx.eval(logits)
    assert sum(routing.routed.values()) == 8 * len(model.layers) + 1
    assert mlx_ext.plans_run() == before + sum(routing.routed.values())


def test_the_default_route_is_the_extension_where_it_imports_else_dlpack(mlx_ext, monkeypatch):
    model = make_model(layers=1)
    with mtlinv.mlx.patch(model, limit=8) as routing:
        assert mtlinv.mlx.backend() == routing.route == "primitive"
    # The extension not built: its import fails, and mtlinv.mlx says why and takes the DLPack route.
    import sys
    monkeypatch.setattr(mtlinv.mlx, "_extension_state", {})
    monkeypatch.delattr(mtlinv, "_mlx_ext", raising=False)
    monkeypatch.setitem(sys.modules, "mtlinv._mlx_ext", None)
    assert mtlinv.mlx.backend() == "dlpack"
    assert "build it: python -m mtlinv.mlx_ext.build" in mtlinv.mlx.extension_error()
    with mtlinv.mlx.patch(model, limit=8) as routing:
        model(mx.array([PROMPT]))
    assert routing.route == "dlpack" and routing.routed == {"linear": 8, "attention": 1}
    with pytest.raises(ValueError, match="route 'primitive' needs mtlinv._mlx_ext: .*build it"):
        mtlinv.mlx.patch(model, limit=8, route="primitive")


def test_unpatch_restores_mlx_exactly(route):
    model = make_model()
    tokens = mx.array([PROMPT])
    before = as_bits(model(tokens))
    classes = {name: type(m) for name, m in model.named_modules()}
    routing = mtlinv.mlx.patch(model, limit=8, route=route)
    assert llama.scaled_dot_product_attention is not base.scaled_dot_product_attention
    routing.unpatch()
    assert {name: type(m) for name, m in model.named_modules()} == classes
    assert llama.scaled_dot_product_attention is base.scaled_dot_product_attention
    assert np.array_equal(as_bits(model(tokens)), before)


def test_an_unpatched_model_of_the_same_class_is_untouched(calls, route):
    """The attention hook is module-wide; it takes mtlinv's route only inside a patched model's call."""
    patched, other = make_model(seed=0), make_model(seed=1)
    tokens = mx.array([PROMPT])
    before = as_bits(other(tokens))
    with mtlinv.mlx.patch(patched, limit=8, route=route):
        calls.clear()
        assert np.array_equal(as_bits(other(tokens)), before)
        assert not calls


def test_limit_zero_is_mlx(calls, route):
    """Negative control: at limit 0 nothing is routed, and the logits are MLX's, not the reference's."""
    model = make_model()
    tokens = mx.array([PROMPT])
    mlx_logits, expected = as_bits(model(tokens)), as_bits(reference_logits(model, tokens))
    calls.clear()
    with mtlinv.mlx.patch(model, limit=0, route=route) as routing:
        got = as_bits(model(tokens))
    assert np.array_equal(got, mlx_logits) and not np.array_equal(got, expected)
    assert not calls and not routing.routed
    assert routing.to_mlx == {("linear", "M > limit 0"): 15, ("attention", "M > limit 0"): 2}


def test_a_layer_left_to_mlx_is_detected(route):
    """Negative control: one projection of one layer not routed changes the logits' bits."""
    model = make_model()
    tokens = mx.array([PROMPT])
    expected = as_bits(reference_logits(model, tokens))
    with mtlinv.mlx.patch(model, limit=8, route=route):
        up = model.model.layers[1].mlp.up_proj
        routed_class = type(up)
        up.__class__ = nn.Linear
        try:
            got = as_bits(model(tokens))
        finally:
            up.__class__ = routed_class
    assert not np.array_equal(got, expected)


def test_rows_above_the_limit_are_left_to_mlx(route):
    model = make_model()
    tokens = mx.array([PROMPT])
    mlx_logits = as_bits(model(tokens))
    with mtlinv.mlx.patch(model, limit=len(PROMPT) - 1, route=route) as routing:
        assert np.array_equal(as_bits(model(tokens)), mlx_logits)
        assert not routing.routed
        model(tokens[:, :2])
        assert routing.routed == {"linear": 15, "attention": 2}


def test_what_mtlinv_has_no_kernel_for_is_left_to_mlx(route):
    """A mask array (mlx-lm builds one for padded batches) is not sdpa's causal mask: MLX keeps it, and says so."""
    model = make_model()
    h = model.model.embed_tokens(mx.array([PROMPT]))
    mask = base.create_causal_mask(len(PROMPT))
    with mtlinv.mlx.patch(model, limit=8, route=route) as routing:
        token = mtlinv.mlx._active.set(routing)
        try:
            model.model.layers[0](h, mask)
        finally:
            mtlinv.mlx._active.reset(token)
    assert routing.to_mlx == {("attention", "mask array"): 1}


def _greedy(model, n):
    return [int(t) for t, _ in generate_step(mx.array(PROMPT), model, max_tokens=n)]


def _speculative(model, draft, n, k):
    out = speculative_generate_step(mx.array(PROMPT), model, draft, num_draft_tokens=k, max_tokens=n)
    return [int(t) for t, _, _ in out]


@pytest.mark.parametrize("draft_seed", [0, 7], ids=["same-weights-draft", "other-draft"])
def test_speculative_output_is_greedy_output(draft_seed, calls, route):
    """mlx-lm's own speculative decoding with a draft model, on the patched target (limit >= k+1): the tokens of
    its own greedy decoding. The target's verification blocks of k+1 rows ran on mtlinv."""
    n, k = 20, 3
    model = make_model(layers=2, seed=0)
    draft = make_model(layers=1 if draft_seed else 2, seed=draft_seed)
    with (mtlinv.mlx.patch(model, limit=len(PROMPT), route=route),
          mtlinv.mlx.patch(draft, limit=len(PROMPT), route=route)):
        greedy = _greedy(model, n)
        calls.clear()
        speculative = _speculative(model, draft, n, k)
    assert speculative == greedy
    assert calls[("sdpa", k + 1)] > 0 and calls[("gemv", k + 1)] > 0, "verification ran on mtlinv"


def test_patch_arguments_are_checked():
    model = make_model(layers=1)
    with pytest.raises(ValueError, match="limit must be an int in 0..2\\^30, got -1"):
        mtlinv.mlx.patch(model, limit=-1)
    with pytest.raises(ValueError, match="route must be None, 'primitive' or 'dlpack', got 'metal'"):
        mtlinv.mlx.patch(model, route="metal")
    with mtlinv.mlx.patch(model, route="dlpack"):
        with pytest.raises(ValueError, match="already patched"):
            mtlinv.mlx.patch(model, route="dlpack")


def test_stream_generate_with_a_draft_model_is_greedy(calls, route):
    """The README's route: mlx-lm's public stream_generate, with and without draft_model, on patched models (a
    word-level tokenizer of the model's 256 ids stands in for a real one: only detokenizing uses it)."""
    from mlx_lm import stream_generate
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {f"t{i}": i for i in range(256)}
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="t0"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=words, eos_token="t255")
    model, draft = make_model(seed=0), make_model(seed=0)
    with mtlinv.mlx.patch(model, limit=8, route=route), mtlinv.mlx.patch(draft, limit=8, route=route):
        greedy = [r.token for r in stream_generate(model, tokenizer, PROMPT, max_tokens=16)]
        calls.clear()
        speculative = [r.token for r in stream_generate(model, tokenizer, PROMPT, max_tokens=16, draft_model=draft,
                                                        num_draft_tokens=3)]
    assert speculative == greedy
    assert calls[("gemv", 4)] > 0, "verification ran on mtlinv"


def test_other_quantization_modes_are_left_to_mlx(calls, route):
    """MLX's mxfp4 (no biases) is not qgemv's affine format: those layers stay MLX's and say why; attention, which
    the mode does not touch, is still mtlinv's."""
    model = make_model(layers=1)
    nn.quantize(model, group_size=32, bits=4, mode="mxfp4")
    with mtlinv.mlx.patch(model, limit=8, route=route) as routing:
        model(mx.array([PROMPT]))
    assert routing.to_mlx == {("quantized_linear", "mode mxfp4"): 8} and routing.routed == {"attention": 1}
    assert set(calls) == {("sdpa", len(PROMPT))}
