"""mtlinv.Decoder, the forward pass in C++: the bits of the same forward composed of the Python ops, the number of
ops it issues, and its errors."""
import dataclasses
import os
import re
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import mtlinv
from mtlinv.model.device_model import DeviceModel, DeviceWeights, forward_by_ops


@pytest.fixture(scope="module")
def tiny_device(make_weights):
    # Three layers, so that a skipped middle one leaves layers before and after it; head dim 64, which sdpa supports.
    w = make_weights(seed=5, n_layers=3, hidden=128, n_heads=2, n_kv_heads=1, vocab=64)
    return DeviceWeights.from_reference(w)


def caches(weights, capacity):
    c = weights.config
    shape = (c.n_kv_heads, capacity, c.head_dim)
    return ([mtlinv.asarray(np.zeros(shape, ml_dtypes.bfloat16)) for _ in weights.layers],
            [mtlinv.asarray(np.zeros(shape, ml_dtypes.bfloat16)) for _ in weights.layers])


def raw(t):
    return np.asarray(t).view(np.uint16)


def assert_bits_of_the_python_ops(weights, skip=()):
    """Prefill, one decoding step and a 3-token verification, at limit 5: every logit and every cache entry of the
    decoder has the bits of the op-by-op forward."""
    model = DeviceModel(weights, 16, skip_layers=skip)
    k, v = caches(weights, 16)
    with mtlinv.batch_invariant(5):
        for tokens, start in (([7, 3, 11, 42, 5], 0), ([9], 5), ([1, 2, 60], 6)):
            expected = forward_by_ops(weights, k, v, tokens, start, skip)
            got = model.forward_on_device(tokens, start)
            assert got.shape == (len(tokens), weights.config.vocab)
            assert np.array_equal(raw(got), raw(expected)), (tokens, start)
    for i in range(len(weights.layers)):
        if i not in skip:
            assert np.array_equal(raw(model._k[i]), raw(k[i])) and np.array_equal(raw(model._v[i]), raw(v[i])), i


@pytest.mark.parametrize("skip", [(), (1,)])
def test_decoder_has_the_bits_of_the_python_ops(tiny_device, skip):
    """On the device's own plans, with every layer and with layer 1 skipped."""
    assert_bits_of_the_python_ops(tiny_device, skip)


def test_matrix_unit_plans_have_the_bits_of_the_python_ops(make_weights, gpu_plans):
    """The same with a GPU's plans (on the emulator matrix units turned on: weights in the tile layout, projections
    on qgemv_mma). The decoder's projections promise constant weights, so each runs the _early instance, which loads
    its first weights before it waits for the kernel ahead (on CUDA while that kernel still runs; a no-op wait
    here); the op-by-op forward makes no such promise. Every logit and cache entry must agree."""
    assert mtlinv.device_info()["matrix_units"]
    assert_bits_of_the_python_ops(DeviceWeights.from_reference(
        make_weights(seed=6, n_layers=2, hidden=256, n_heads=4, n_kv_heads=2, vocab=64)))


def batch_counts():
    return mtlinv._native._launch_batch_counts()


def test_batched_steps_have_the_bits_of_the_python_ops(tiny_device):
    """Steps as speculative decoding takes them: one token, then three at the same position (the rollback and the
    verification), two positions on, six times, past position 256, where attention's 256-key chunks gain one (its
    second launch). On CUDA the decoder runs each layer as one graph (launch batches), built at a row count's first
    step and then updated in place (positions, key counts, grids); every step's logits and the caches must keep the
    bits of the same ops called one by one, and after the first round a graph is built anew only where attention
    gains its launch. The emulator runs every kernel as it is dispatched, and so does CUDA with MTLINV_CUDA_SYNC=1:
    they must report no batch at all."""
    weights = tiny_device
    capacity, prompt_len = 300, 250
    vocab = weights.config.vocab
    model = DeviceModel(weights, capacity)
    k, v = caches(weights, capacity)
    batching = mtlinv.device_info()["backend"] == "cuda" and os.environ.get("MTLINV_CUDA_SYNC") != "1"
    layers = weights.config.n_layers

    def step(tokens, start):
        model.rollback(start)
        got = model.forward_on_device(tokens, start)
        expected = forward_by_ops(weights, k, v, tokens, start)
        assert np.array_equal(raw(got), raw(expected)), (len(tokens), start)

    with mtlinv.batch_invariant(4):
        before = batch_counts()
        step([(5 * i + 1) % vocab for i in range(prompt_len)], 0)
        position = prompt_len
        rounds = []  # the counts as each round starts
        for round_ in range(6):
            rounds.append(batch_counts())
            for m in (1, 3):
                step([(position * 7 + j) % vocab for j in range(m)], position)
            position += 2
        after = batch_counts()
    for i in range(layers):
        assert np.array_equal(raw(model._k[i]), raw(k[i])) and np.array_equal(raw(model._v[i]), raw(v[i])), i
    if not batching:
        assert after == before, after
        return
    forwards = 1 + 6 * 2
    assert after["batches"] - before["batches"] == forwards * layers
    builds = [counts["builds"] for counts in rounds + [after]]
    # Round 1 (up to 255 keys) and rounds 4-5 (257 and more) only update their graphs. In rounds 2-3 each row count's
    # first step past 256 keys builds its layers' graphs anew: attention gains a launch (sdpa_combine; a call of one
    # chunk is one launch), and a graph of another length cannot be updated.
    assert builds[2] - builds[1] == 0 and builds[6] - builds[4] == 0, builds
    assert builds[4] - builds[2] == 2 * layers, builds
    assert after["updates"] > rounds[4]["updates"], after  # positions move: some kernels change every step


def test_launch_batches_can_be_turned_off(tiny_device):
    """_set_launch_batches(False), which benchmarks use to time the decoder kernel by kernel, stops the batches
    (on CUDA the forward then runs no batch) and returns the previous setting; the bits stay the same."""
    model = DeviceModel(tiny_device, 8)
    with mtlinv.batch_invariant(4):
        batched = raw(model.forward_on_device([3, 1], 0))
        assert mtlinv._native._set_launch_batches(False) is True
        try:
            before = batch_counts()
            model.rollback(0)
            plain = raw(model.forward_on_device([3, 1], 0))
            assert batch_counts() == before
        finally:
            assert mtlinv._native._set_launch_batches(True) is False
    assert np.array_equal(batched, plain)


def test_decoder_issues_nine_ops_a_layer(tiny_device):
    """A step's time on a GPU grows with its op count (docs/decisions.md, "Decoder step"): the forward's op calls are
    counted, so that a change which adds one (an unfused add, a copy) shows up here. Per layer: two add_rms_norm,
    four qgemv (q|k|v, wo, gate|up, down), qkv_to_heads, sdpa, swiglu_halves; around them the embedding, rms_norm
    and the output qgemv. Attention writes its output in row order (rows_out), where the same ops called from
    Python copy it with heads_to_rows: one launch a layer fewer, at every row count."""
    weights = tiny_device
    model = DeviceModel(weights, 8)
    layers = weights.config.n_layers
    for tokens, start in (([7, 3], 0), ([5], 2)):
        before = mtlinv._native._run_counts()
        model.forward_on_device(tokens, start)
        middle = mtlinv._native._run_counts()
        forward_by_ops(weights, model._k, model._v, tokens, start)
        after = mtlinv._native._run_counts()
        decoder_ops, decoder_launches = middle[0] - before[0], middle[1] - before[1]
        by_ops_launches = after[1] - middle[1]
        assert decoder_ops == 9 * layers + 3, tokens
        assert decoder_launches == by_ops_launches - layers, tokens


def test_decoder_keeps_its_tensors_alive(tiny_device):
    """The C++ side holds no reference to the arrays a zero-copy Tensor views: the Decoder keeps the Tensors. Were
    they dropped, the caches' freed memory would likely be reused by the litter, and the bits would change."""
    import gc

    weights = tiny_device
    c = weights.config

    def build():
        k, v = caches(weights, 8)
        layers = [dict(attn_norm=l.attn_norm, ffn_norm=l.ffn_norm, qkv=l.w_qkv, o=l.wo, gate_up=l.w_gate_up,
                       down=l.w_down, k_cache=k[i], v_cache=v[i]) for i, l in enumerate(weights.layers)]
        norm = mtlinv.asarray(np.asarray(weights.output_norm).copy())
        return mtlinv.Decoder(n_heads=c.n_heads, rope_theta=c.rope_theta, rms_eps=c.rms_eps,
                              embedding=weights.embedding, layers=layers, output_norm=norm, output=weights.output)

    decoder = build()
    gc.collect()
    litter = [np.full((1, 8, 64), 7, ml_dtypes.bfloat16) for _ in range(64)]  # memory the freed arrays would reuse
    model = DeviceModel(weights, 8)
    for tokens, start in (([7, 3], 0), ([5], 2)):
        assert np.array_equal(raw(decoder.forward(tokens, start)), raw(model.forward_on_device(tokens, start)))
    del litter  # held until here


def test_decoder_refuses_bad_layers(tiny_device):
    w = tiny_device
    k, v = caches(w, 8)
    l0 = w.layers[0]

    def layer(**change):
        d = dict(attn_norm=l0.attn_norm, ffn_norm=l0.ffn_norm, qkv=l0.w_qkv, o=l0.wo, gate_up=l0.w_gate_up,
                 down=l0.w_down, k_cache=k[0], v_cache=v[0])
        d.update(change)
        return d

    def build(layers, n_heads=w.config.n_heads, output=w.output):
        return mtlinv.Decoder(n_heads=n_heads, rope_theta=1e4, rms_eps=1e-5, embedding=w.embedding, layers=layers,
                              output_norm=w.output_norm, output=output)

    assert build([layer()]).capacity == 8
    assert build([]).capacity > 2**62  # no layer, no cache to bound it
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\] must be a dict with keys"):
        build([{"attn_norm": l0.attn_norm}])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\]\['ffn_norm'\] must be an mtlinv.Tensor"):
        build([layer(ffn_norm=np.ones(128))])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\]\['down'\] has no wq"):
        build([layer(down=l0.attn_norm)])
    read_only = np.zeros((1, 8, 64), ml_dtypes.bfloat16)
    read_only.flags.writeable = False
    view = mtlinv.asarray(read_only)
    if view.readonly:  # a zero-copy view (host-visible memory); CUDA copies the array into memory of its own
        with pytest.raises(mtlinv.InvalidArgumentError, match=r"k_cache'\] wraps a read-only array"):
            build([layer(k_cache=view)])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\]'s v_cache overlaps layers\[0\]'s k_cache"):
        build([layer(v_cache=k[0])])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[1\]'s k_cache overlaps layers\[0\]'s k_cache"):
        build([layer(), layer(v_cache=v[1])])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[1\]'s caches are \[1, 4, 64\] and \[1, 8, 64\]"):
        short = mtlinv.asarray(np.zeros((1, 4, 64), ml_dtypes.bfloat16))
        build([layer(), layer(k_cache=short, v_cache=v[1])])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"must be \[Hkv, C, D\] with Hkv, D >= 1, got \[8, 64\]"):
        flat = mtlinv.asarray(np.zeros((8, 64), ml_dtypes.bfloat16))
        build([layer(k_cache=flat, v_cache=flat)])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"with Hkv, D >= 1, got \[0, 8, 64\]"):
        empty = mtlinv.asarray(np.zeros((0, 8, 64), ml_dtypes.bfloat16))  # once a division by zero
        build([layer(k_cache=empty, v_cache=mtlinv.asarray(np.zeros((0, 8, 64), ml_dtypes.bfloat16)))])
    halves = np.zeros((2, 8, 64), ml_dtypes.bfloat16)
    k_half, v_half = mtlinv.asarray(halves[:1]), mtlinv.asarray(halves[1:])
    if np.asarray(k_half).ctypes.data == halves.ctypes.data:  # zero-copy views (host-visible memory)
        with pytest.raises(mtlinv.InvalidArgumentError, match="overlaps"):  # two Tensors over the same half
            build([layer(k_cache=k_half, v_cache=mtlinv.asarray(halves[:1]))])
        build([layer(k_cache=k_half, v_cache=v_half)])
    decoder = build([layer()])
    with pytest.raises(mtlinv.InvalidArgumentError, match="already initialised; make a new Decoder"):
        decoder.__init__(n_heads=2, rope_theta=1e4, rms_eps=1e-5, embedding=w.embedding, layers=[layer()],
                         output_norm=w.output_norm, output=w.output)
    with pytest.raises(mtlinv.InvalidArgumentError, match="n_heads=3 is not a multiple of the caches' Hkv=2"):
        build([layer(k_cache=mtlinv.asarray(np.zeros((2, 8, 64), ml_dtypes.bfloat16)),
                     v_cache=mtlinv.asarray(np.zeros((2, 8, 64), ml_dtypes.bfloat16)))], n_heads=3)
    with pytest.raises(mtlinv.InvalidArgumentError, match="n_heads must be in"):
        build([layer()], n_heads=0)

    class Seven:
        wq, scales, biases, group_size, bits = l0.wo.wq, l0.wo.scales, l0.wo.biases, 32, 7

    with pytest.raises(mtlinv.InvalidArgumentError, match="output has bits=7, group_size=32; qgemv takes bits"):
        build([layer()], output=Seven())
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\]'s gate_up has bits=7"):
        build([layer(gate_up=Seven())])

    class Codes:  # the super-block form's int8 codes, without their supers
        wq, group_size, bits = l0.wo.wq, 32, 4
        scales = biases = mtlinv.asarray(np.zeros(np.asarray(l0.wo.scales).shape, np.int8))

    with pytest.raises(mtlinv.InvalidArgumentError, match="output has int8 scale codes but no supers"):
        build([layer()], output=Codes())

    class Supers:  # supers beside float scales
        wq, scales, biases, group_size, bits = l0.wo.wq, l0.wo.scales, l0.wo.biases, 32, 4
        supers = mtlinv.asarray(np.zeros((1, 1, 2), np.float32))

    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\]'s o has supers with float32 scales"):
        build([layer(o=Supers())])


def test_decoder_refuses_bad_qwen_and_llama3_parts(tiny_device):
    """The parts Qwen 2, Qwen 3 and Llama 3 add, each checked where it can be named: a q/k norm without the other,
    a RoPE table of the wrong size or with a frequency outside (0, 1] (at construction), a bias of the wrong shape
    (by qgemv, at the first forward)."""
    w = tiny_device
    k, v = caches(w, 8)
    l0 = w.layers[0]
    d = w.config.head_dim

    def build(rope_freqs=None, qkv=l0.w_qkv, **norms):
        layer = dict(attn_norm=l0.attn_norm, ffn_norm=l0.ffn_norm, qkv=qkv, o=l0.wo, gate_up=l0.w_gate_up,
                     down=l0.w_down, k_cache=k[0], v_cache=v[0], **norms)
        return mtlinv.Decoder(n_heads=w.config.n_heads, rope_theta=1e4, rms_eps=1e-5, embedding=w.embedding,
                              layers=[layer], output_norm=w.output_norm, output=w.output, rope_freqs=rope_freqs)

    norm = mtlinv.asarray(np.ones(d, ml_dtypes.bfloat16))
    build(rope_freqs=np.full(d // 2, 0.5), q_norm=norm, k_norm=norm).forward([1, 2], 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"layers\[0\] has q_norm without k_norm; give both"):
        build(q_norm=norm)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"rope_freqs has 3 values; the caches' head dim 64 needs 32"):
        build(rope_freqs=[0.5, 0.25, 0.125])
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"Decoder: rope_freqs\[1\]=2 is outside \(0, 1\]"):
        build(rope_freqs=[0.5, 2.0] + [0.5] * (d // 2 - 2))
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"Decoder: rope_freqs must be a 1-D sequence of real"):
        build(rope_freqs="fast")
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"Decoder: rope_freqs is empty; pass None for no table"):
        build(rope_freqs=[])
    # A value float32 cannot hold is named as given, not as what it would round to (0 or inf).
    for tiny_or_huge in (1e-50, 1e300):
        given = re.escape(repr(tiny_or_huge))
        with pytest.raises(mtlinv.InvalidArgumentError,
                           match=rf"Decoder: rope_freqs\[2\]={given} is outside float32's range"):
            build(rope_freqs=[0.5, 0.5, tiny_or_huge] + [0.5] * (d // 2 - 3))
    # rms_eps is checked when the decoder is made, by its name (not by the first forward's rms_norm).
    for eps in (-1e-5, float("nan"), 1e39):
        with pytest.raises(mtlinv.InvalidArgumentError, match=r"Decoder: rms_eps must be >= 0 and finite within "
                                                              r"float32, got"):
            mtlinv.Decoder(n_heads=w.config.n_heads, rope_theta=1e4, rms_eps=eps, embedding=w.embedding, layers=[],
                           output_norm=w.output_norm, output=w.output)
    # The table's values are checked with no layers too.
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"Decoder: rope_freqs\[0\]=2 is outside \(0, 1\]"):
        mtlinv.Decoder(n_heads=w.config.n_heads, rope_theta=1e4, rms_eps=1e-5, embedding=w.embedding, layers=[],
                       output_norm=w.output_norm, output=w.output, rope_freqs=[2.0])
    short_bias = dataclasses.replace(l0.w_qkv, bias=mtlinv.asarray(np.ones(5, ml_dtypes.bfloat16)))
    with pytest.raises(mtlinv.InvalidArgumentError, match="qgemv: bias"):
        build(qkv=short_bias).forward([1], 0)


def test_decoder_refuses_bad_tokens(tiny_device):
    w = tiny_device
    model = DeviceModel(w, 8)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"embedding: ids\[1\]=64 is outside \[0, 64\)"):
        model.forward([1, 64], 0)
    assert model.kv_len == 0  # a refused forward leaves the cache as it was
    model.forward([1], 0)
    assert model.kv_len == 1
    d = model._decoder
    with pytest.raises(mtlinv.InvalidArgumentError, match="0 tokens at position 0 do not fit the cache capacity 8"):
        d.forward([], 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match="3 tokens at position 6 do not fit the cache capacity 8"):
        d.forward([1, 2, 3], 6)
    with pytest.raises(mtlinv.InvalidArgumentError, match="start must be in"):
        d.forward([1], -1)
    with pytest.raises(mtlinv.InvalidArgumentError, match="ids must be a 1-D sequence of integers, got float64"):
        d.forward([1.5], 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"shape \(1, 2\)"):
        d.forward([[1, 2]], 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"embedding: ids\[1\]=64 is outside \[0, 64\)"):
        d.forward([3, 64], 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"embedding: ids\[0\]=-1 is outside \[0, 64\)"):
        d.forward(np.array([-1]), 0)
    with pytest.raises(mtlinv.InvalidArgumentError, match=r"ids\[0\]=18446744073709551615 is outside \[0, 64\)"):
        d.forward(np.array([2**64 - 1], np.uint64), 0)
    # A broadcast view of ids that cannot fit is refused as a list of that length is, before any copy of it.
    tracemalloc.start()
    with pytest.raises(mtlinv.InvalidArgumentError, match="4294967296 tokens at position 0 do not fit the cache "
                                                          "capacity 8"):
        d.forward(np.broadcast_to(np.int64(1), (2**32,)), 0)
    assert tracemalloc.get_traced_memory()[1] < 2**20
    tracemalloc.stop()
