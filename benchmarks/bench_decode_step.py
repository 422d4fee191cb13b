#!/usr/bin/env python3
"""A whole decoding step at a real model's size: mtlinv.Decoder against its physical floor, PyTorch (CUDA) and MLX.

    python3 benchmarks/bench_decode_step.py [--rows 1 5 8] [--reps 20] [--tokens 64] [--k 4] [--mlx auto|on|off]
        [--out DIR]
        [--hidden 4096 --ffn 14336 --layers 32 --heads 32 --kv-heads 8 --head-dim 128 --vocab 32000
         --context 4096 --bits 4 --group-size 64 --scales float32 | --gguf Q4_K]

The default shape is an 8B llama's (Llama-3-8B's layers with a 32000-token vocabulary) with random weights: 4-bit
codes in groups of 64, float32 scales (as the GGUF imports keep them), in the tile layout where the device has
matrix units, as mtlinv.model.device_model uploads them. --gguf TYPE takes every projection from random blocks of
a GGUF type instead, imported as mtlinv.model imports a file's (Q4_K, Q5_K, Q6_K in the super-block form, the
others at their blocks' float16 scales): what a GGUF model of that type runs. The KV cache holds --context
positions of a prompt that repeats a block of random tokens. It reports:

  step       one forward (mtlinv.Decoder through DeviceModel) at M = each of --rows rows, at the same position,
             under limit max(--rows): wall time until mtlinv.synchronize() returns, and on CUDA the device's span
             (events); spread over --reps steps. Row 0 of every M-row step must have the bits of the 1-row step
             (asserted: the exactness that makes verification free of drift).
  floor      the bytes a step must read (every weight once, the embedding's M rows, the cache's K and V up to the
             step's last position) at the copy bandwidth measured in the same run; "% of floor" is floor / time.
  torch      the same step in PyTorch on CUDA: bf16 dense weights (random), F.rms_norm, fused q|k|v and gate|up
             projections, RoPE, scaled_dot_product_attention with GQA, CUDA-graphed per row count, timed as
             replays; its floor counts its own (bf16) bytes.
  mlx        the same step in mlx-lm's llama (MLX's own ops: quantized_matmul, fast.rms_norm, fast.rope,
             fast.scaled_dot_product_attention), random weights quantized by mlx.nn.quantize at --bits and
             --group-size (scales in bfloat16, MLX's format; the embedding too, as mlx-lm's checkpoints), its cache
             prefilled with the same --context positions; wall time until mx.eval returns. By default where MLX
             runs on a GPU (a Mac); --mlx on runs it anywhere (MLX's CPU build on Linux: slow at the default shape).
  decoding   tokens/s of greedy decoding and of exact speculative decoding with a prompt-lookup draft
             (mtlinv.model.PromptLookupDraft, --k proposals a round, limit k + 1) for --tokens tokens after the
             prompt, the prompt's forward left out of the time (computed once, before); the speculative tokens must
             be greedy's, token for token. With random weights what the draft gets right depends on how the
             model's greedy output repeats itself: the acceptance is printed.

Off CUDA (the emulator) the default shape is far too large: pass small ones (the test suite runs --hidden 64
--ffn 128 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 --vocab 256 --context 48); torch is then skipped and
the floor uses numpy's copy bandwidth.
"""
from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
import traceback

import ml_dtypes
import numpy as np

import gguf_weights
import mtlinv
import report
import timing
from mtlinv import quant
from mtlinv.model import LlamaConfig, PromptLookupDraft, decoding
from mtlinv.model.device_model import DeviceLayer, DeviceModel, DeviceWeights, QuantLinear

BF16 = ml_dtypes.bfloat16
SCALES = {"float32": np.float32, "bfloat16": BF16}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shape = ap.add_argument_group("model shape (default: an 8B llama)")
    for name, default in (("hidden", 4096), ("ffn", 14336), ("layers", 32), ("heads", 32), ("kv-heads", 8),
                          ("head-dim", 128), ("vocab", 32000), ("context", 4096), ("bits", 4),
                          ("group-size", 64)):
        shape.add_argument(f"--{name}", type=int, default=default)
    shape.add_argument("--scales", choices=sorted(SCALES), help="dtype of scales and biases (default float32)")
    kinds = sorted(gguf_weights.F16_FIELDS)
    shape.add_argument("--gguf", choices=kinds, metavar="TYPE",
                       help="every projection random blocks of this GGUF type, imported as mtlinv.model loads a "
                            f"file, instead of --bits / --group-size / --scales (which then set MLX's step only): "
                            f"{', '.join(kinds)}")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 5, 8], help="rows per timed step (1 is added)")
    ap.add_argument("--reps", type=int, default=20, help="timed steps per row count")
    ap.add_argument("--tokens", type=int, default=64, help="tokens to decode after the prompt (0: no decoding)")
    ap.add_argument("--k", type=int, default=4, help="draft tokens per speculative round")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch step")
    ap.add_argument("--mlx", choices=("auto", "on", "off"), default="auto",
                    help="the same step in mlx-lm: auto runs it where MLX runs on a GPU (a Mac)")
    report.add_out_argument(ap)
    args = ap.parse_args(argv)
    for name in ("hidden", "ffn", "layers", "heads", "kv_heads", "head_dim", "vocab", "context", "reps", "k"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.tokens < 0 or min(args.rows) < 1:
        ap.error(f"--tokens must be >= 0 and --rows >= 1, got {args.tokens} and {args.rows}")
    if args.heads % args.kv_heads:
        ap.error(f"--heads {args.heads} must be a multiple of --kv-heads {args.kv_heads}")
    if args.gguf:  # the type brings its scales and block size; --bits and --group-size set MLX's step only
        if args.scales:
            ap.error(f"--scales {args.scales}: --gguf {args.gguf} imports the type's own scales")
        block = gguf_weights.block_elements(args.gguf)
        widths = {"--hidden": args.hidden, "--heads x --head-dim": args.heads * args.head_dim, "--ffn": args.ffn}
        bad = {name: k for name, k in widths.items() if k % block}
        if bad:
            ap.error(f"--gguf {args.gguf}: a projection's K must be a multiple of its {block}-element blocks, got "
                     f"{bad}")
    else:
        if args.bits not in (4, 8) or args.hidden % args.group_size or args.ffn % args.group_size:
            ap.error(f"--bits must be 4 or 8 and --group-size must divide --hidden and --ffn; got {args.bits}, "
                     f"{args.group_size}")
        args.scales = args.scales or "float32"
    args.rows = sorted(set(args.rows) | {1})
    return args


def weights_label(args):
    if args.gguf:
        return f"{args.gguf} (random blocks, imported as mtlinv.model imports a file)"
    return f"{args.bits}-bit g{args.group_size} {args.scales} scales"


def random_linear(rng, n, k, args):
    """A QuantLinear [n, k] of uniformly random codes, with scales around 1 / (std of a code * sqrt(k)) and biases
    that centre the codes, so that activations keep their scale through the layers. With --gguf, random blocks of
    that type with float16 fields d of K^-1/2 / 128: random codes and scale codes make Q4_K's weights about 200 d
    (d sc q with sc about 32 and q about 8), so a trained model's size of d (gguf_tensor's default) would multiply
    the activations' scale tenfold and more a projection. Returns it and its bytes."""
    if args.gguf:
        linear = QuantLinear.from_gguf(gguf_weights.gguf_tensor(rng, args.gguf, k, n, field_scale=k ** -0.5 / 128))
        return linear, gguf_weights.nbytes(linear)
    bits, group = args.bits, args.group_size
    wq = rng.integers(0, 2**32, size=(n, k * bits // 32), dtype=np.uint32)
    levels = 2**bits - 1
    code_std = ((levels + 1) ** 2 - 1) ** 0.5 / 12 ** 0.5
    scales = (rng.random((n, k // group), dtype=np.float32) + 0.5) / np.float32(code_std * k ** 0.5)
    biases = -scales * np.float32(levels / 2)
    scales, biases = scales.astype(SCALES[args.scales]), biases.astype(SCALES[args.scales])
    if mtlinv.device_info()["matrix_units"] and n % quant.TILE_ROWS == 0:  # as device_model uploads them
        wq, scales, biases = quant.tile(wq, scales, biases, group, bits)
    nbytes = wq.nbytes + scales.nbytes + biases.nbytes
    return QuantLinear(mtlinv.asarray(wq), mtlinv.asarray(scales), mtlinv.asarray(biases), bits, group), nbytes


def random_weights(config: LlamaConfig, args, seed=0):
    """DeviceWeights of the shape, quantized codes drawn directly (no float weights: 8B of them would not fit the
    host), and the bytes a step reads from them apart from the embedding (all projections and norms)."""
    rng = np.random.default_rng(seed)
    h, d = config.hidden, config.head_dim

    def norm():
        return mtlinv.asarray((1 + 0.1 * rng.standard_normal(h, dtype=np.float32)).astype(BF16))

    nbytes = 0
    layers = []
    for _ in range(config.n_layers):
        parts = [random_linear(rng, n, k, args) for n, k in (((config.n_heads + 2 * config.n_kv_heads) * d, h),
                                                              (h, config.n_heads * d), (2 * config.ffn, h),
                                                              (h, config.ffn))]
        nbytes += sum(b for _, b in parts) + 2 * 2 * h
        (qkv, _), (o, _), (gate_up, _), (down, _) = parts
        layers.append(DeviceLayer(norm(), qkv, o, norm(), gate_up, down))
        print(f"\rrandom weights: layer {len(layers)}/{config.n_layers}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    output, out_bytes = random_linear(rng, config.vocab, h, args)
    embedding = mtlinv.asarray(rng.standard_normal((config.vocab, h), dtype=np.float32).astype(BF16))
    return DeviceWeights(config, embedding, tuple(layers), norm(), output), nbytes + out_bytes + 2 * h


def step_bytes(config, weight_bytes, rows, positions, itemsize=2):
    """What one step of `rows` rows must read at least: the weights, the embedding's rows and the K and V of
    `positions` cache positions in every layer."""
    cache = 2 * config.n_layers * config.n_kv_heads * positions * config.head_dim * itemsize
    return weight_bytes + rows * config.hidden * itemsize + cache


def repeating_prompt(n, vocab, block=64, seed=1):
    """n tokens that repeat one block of random ids: text a prompt-lookup draft can propose from."""
    ids = np.random.default_rng(seed).integers(0, vocab, size=block)
    return [int(ids[i % block]) for i in range(n)]


class Prefilled:
    """The model with the prompt already in its cache. decoding.greedy and decoding.speculative begin every run
    with forward(prompt, 0); here that call returns the prompt's logits computed once before (the same call under
    the same limit has the same bits), so that the timed loops time the decoding alone."""

    def __init__(self, model: DeviceModel, prompt, last_logits):
        self.model, self.prompt, self.last_logits = model, list(prompt), last_logits

    def forward(self, tokens, start_pos):
        if start_pos == 0:
            if list(tokens) != self.prompt:
                raise ValueError("Prefilled: only the prompt it was made with starts at position 0")
            self.model.kv_len = len(self.prompt)  # its K and V are still in the cache: later calls start past it
            return self.last_logits
        return self.model.forward(tokens, start_pos)

    def rollback(self, n_valid):
        self.model.rollback(n_valid)


class Clock:
    """Wall time until sync() returns, and the device's span by CUDA events where torch is there."""

    def __init__(self, torch, sync):
        self.torch, self.sync = torch, sync

    def time(self, fn):
        self.sync()
        if self.torch is not None:
            start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
        t0 = time.perf_counter()
        fn()
        if self.torch is not None:
            end.record()
        self.sync()
        wall = time.perf_counter() - t0
        if self.torch is None:
            return wall, None
        end.synchronize()
        return wall, start.elapsed_time(end) / 1e3


def time_mtlinv_steps(model, args, clock):
    """Each row count's step at position --context, under limit max(rows); row 0's bits checked against the 1-row
    step. Returns {rows: (wall samples, gpu samples)}, {rows: row 0 equal} and the 1-row logits' sha256 (two builds or
    settings that must not move a result print the same)."""
    config = model.weights.config
    tokens = repeating_prompt(max(args.rows), config.vocab, seed=2)
    first_rows, samples = {}, {}
    with mtlinv.batch_invariant(max(args.rows)):
        for m in args.rows:
            def step():
                model.rollback(args.context)
                return model.forward_on_device(tokens[:m], args.context)

            first_rows[m] = np.asarray(step())[0].tobytes()
            for _ in range(2):
                step()
            walls, gpus = [], []
            for _ in range(args.reps):
                wall, gpu = clock.time(step)
                walls.append(wall)
                gpus.append(gpu)
            samples[m] = (walls, None if gpus[0] is None else gpus)
    model.rollback(args.context)
    return samples, {m: first_rows[m] == first_rows[1] for m in args.rows}, hashlib.sha256(first_rows[1]).hexdigest()


def decode_tokens(model, prompt, last_logits, args):
    """Greedy and speculative (prompt-lookup draft) decoding of --tokens tokens under limit k + 1, the prompt's
    forward left out; the first token comes from it, so tokens/s counts the tokens after it."""
    target = Prefilled(model, prompt, last_logits)
    out = {}
    with mtlinv.batch_invariant(args.k + 1):
        decoding.greedy(target, prompt, min(4, args.tokens))  # warm-up: first launches, graph builds
        t0 = time.perf_counter()
        greedy = decoding.greedy(target, prompt, args.tokens)
        out["greedy_s"] = time.perf_counter() - t0
        draft = PromptLookupDraft(model.weights.config.vocab)
        t0 = time.perf_counter()
        spec = decoding.speculative(target, draft, prompt, args.tokens, args.k, reference=greedy)
        out["speculative_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    PromptLookupDraft(model.weights.config.vocab).forward(prompt, 0)
    out["draft_prompt_s"] = time.perf_counter() - t0  # inside speculative_s: the draft indexes the prompt
    n = len(greedy) - 1
    out.update({
        "tokens": len(greedy), "greedy_tokens_per_s": n / out["greedy_s"],
        "speculative_tokens_per_s": (len(spec.tokens) - 1) / out["speculative_s"],
        "speculative_tokens_per_s_without_indexing": (len(spec.tokens) - 1) / (out["speculative_s"] -
                                                                               out["draft_prompt_s"]),
        "identical": spec.tokens == greedy and spec.first_diff is None, "proposed": spec.proposed,
        "accepted": spec.accepted, "acceptance": spec.acceptance_rate, "target_calls": spec.target_calls,
        "distinct_greedy_tokens": len(set(greedy)),
    })
    return out


def torch_step_times(torch, config, args, positions_rows):
    """The same step in PyTorch (bf16 dense, random weights, a CUDA graph per row count), timed as replays.
    Returns {rows: (wall samples, gpu samples)} and the bytes of its weights."""
    from torch.nn import functional as F
    from torch.nn.attention.bias import causal_lower_right

    dev, bf16 = "cuda", torch.bfloat16
    h, d, hq, hkv, f = config.hidden, config.head_dim, config.n_heads, config.n_kv_heads, config.ffn
    gen = torch.Generator(device=dev).manual_seed(0)

    def mat(n, k):
        return (torch.randn(n, k, generator=gen, device=dev, dtype=bf16) * k ** -0.5).contiguous()

    def vec():
        return 1 + 0.1 * torch.randn(h, generator=gen, device=dev, dtype=bf16)

    cap = args.context + max(args.rows)
    layers = [dict(attn_norm=vec(), qkv=mat((hq + 2 * hkv) * d, h), o=mat(h, hq * d), ffn_norm=vec(),
                   gate_up=mat(2 * f, h), down=mat(h, f),
                   k=torch.randn(1, hkv, cap, d, generator=gen, device=dev, dtype=bf16),
                   v=torch.randn(1, hkv, cap, d, generator=gen, device=dev, dtype=bf16))
              for _ in range(config.n_layers)]
    embedding, out_norm, lm_head = mat(config.vocab, h), vec(), mat(config.vocab, h)
    weight_bytes = sum(t.nbytes for layer in layers for name, t in layer.items() if name not in ("k", "v"))
    weight_bytes += out_norm.nbytes + lm_head.nbytes
    inv_freq = config.rope_theta ** (-torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)

    def make_step(m):
        pos = args.context
        angles = torch.arange(pos, pos + m, device=dev, dtype=torch.float32)[:, None] * inv_freq[None]
        cos, sin = (torch.cat([t, t], -1).to(bf16) for t in (angles.cos(), angles.sin()))
        mask = causal_mask(torch, F, causal_lower_right, m, pos + m, hq, hkv, d)
        ids = torch.arange(m, device=dev) % config.vocab

        def rope(x):  # [heads, m, d], rotate-half (the GGUF llama's NEOX order is the same cost)
            x1, x2 = x[..., :d // 2], x[..., d // 2:]
            return x * cos + torch.cat([-x2, x1], -1) * sin

        def step():
            x = embedding[ids]
            for layer in layers:
                qkv = F.linear(F.rms_norm(x, (h,), layer["attn_norm"], config.rms_eps), layer["qkv"])
                q, k, v = qkv.split([hq * d, hkv * d, hkv * d], -1)
                q = rope(q.view(m, hq, d).transpose(0, 1))
                layer["k"][0, :, pos:pos + m] = rope(k.view(m, hkv, d).transpose(0, 1))
                layer["v"][0, :, pos:pos + m] = v.view(m, hkv, d).transpose(0, 1)
                a = F.scaled_dot_product_attention(q[None], layer["k"][:, :, :pos + m], layer["v"][:, :, :pos + m],
                                                   attn_mask=mask, enable_gqa=True)
                x = x + F.linear(a[0].transpose(0, 1).reshape(m, hq * d), layer["o"])
                gate, up = F.linear(F.rms_norm(x, (h,), layer["ffn_norm"], config.rms_eps),
                                    layer["gate_up"]).chunk(2, -1)
                x = x + F.linear(F.silu(gate) * up, layer["down"])
            return F.linear(F.rms_norm(x, (h,), out_norm, config.rms_eps), lm_head)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        return graph.replay

    clock = Clock(torch, torch.cuda.synchronize)
    samples = {}
    with torch.no_grad():
        for m in positions_rows:
            replay = make_step(m)
            for _ in range(3):
                replay()
            walls, gpus = zip(*(clock.time(replay) for _ in range(args.reps)))
            samples[m] = (list(walls), list(gpus))
    del layers, embedding, lm_head
    torch.cuda.empty_cache()
    return samples, weight_bytes


def mlx_step_times(mx, config, args, prompt):
    """The same step in mlx-lm's llama, random weights quantized by mlx.nn.quantize (bfloat16 scales), the cache
    holding `prompt`; each step's tokens trimmed from the cache after it, outside the time. Returns {rows: (wall
    samples, None)} and the bytes of its weights apart from the embedding, whose rows a step reads alone."""
    import mlx.nn as nn
    from mlx.utils import tree_flatten
    from mlx_lm.models import cache as mlx_cache
    from mlx_lm.models import llama

    margs = llama.ModelArgs(model_type="llama", hidden_size=config.hidden, num_hidden_layers=config.n_layers,
                            intermediate_size=config.ffn, num_attention_heads=config.n_heads,
                            num_key_value_heads=config.n_kv_heads, head_dim=config.head_dim,
                            rms_norm_eps=config.rms_eps, vocab_size=config.vocab, rope_theta=config.rope_theta,
                            tie_word_embeddings=False)
    mx.random.seed(0)
    model = llama.Model(margs)  # lazy: each float weight exists only while its quantized form is computed
    model.set_dtype(mx.bfloat16)
    nn.quantize(model, group_size=args.group_size, bits=args.bits)
    mx.eval(model.parameters())
    weight_bytes = sum(v.nbytes for name, v in tree_flatten(model.parameters())
                       if not name.startswith("model.embed_tokens"))
    kv = mlx_cache.make_prompt_cache(model)
    ids = mx.array([prompt])
    for start in range(0, len(prompt), 512):  # the prompt in pieces, as mlx-lm's generate fills its cache
        mx.eval(model(ids[:, start:start + 512], cache=kv))
    tokens = mx.array([repeating_prompt(max(args.rows), config.vocab, seed=2)])
    samples = {}
    for m in args.rows:
        walls = []
        for i in range(2 + args.reps):  # two to warm up
            t0 = time.perf_counter()
            mx.eval(model(tokens[:, :m], cache=kv))
            if i >= 2:
                walls.append(time.perf_counter() - t0)
            mlx_cache.trim_prompt_cache(kv, m)
        samples[m] = (walls, None)
    del model, kv
    mx.clear_cache()  # MLX keeps freed buffers for reuse: give the model's back before mtlinv decodes
    return samples, weight_bytes


def causal_mask(torch, F, causal_lower_right, m, keys, hq, hkv, d):
    """The bottom-right causal mask verification needs (None for one row): torch's CausalBias where its
    attention takes it with GQA, else a dense boolean mask."""
    if m == 1:
        return None
    bias = causal_lower_right(m, keys)
    q = torch.zeros(1, hq, m, d, device="cuda", dtype=torch.bfloat16)
    kv = torch.zeros(1, hkv, keys, d, device="cuda", dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(q, kv, kv, attn_mask=bias, enable_gqa=True)
        return bias
    except (TypeError, RuntimeError, NotImplementedError):
        return torch.ones(m, keys, dtype=torch.bool, device="cuda").tril(keys - m)


def cuda_torch():
    """torch when mtlinv runs on CUDA and torch is installed with CUDA, else None."""
    torch = timing.cuda_module("torch")
    return torch if torch is not None and torch.cuda.is_available() else None


def mlx_peer(choice, mx):
    """mlx.core (`mx`, None where MLX is not installed) where the MLX step runs (--mlx: on; auto where MLX runs on a
    GPU), else None."""
    if choice == "off":
        return None
    if mx is None or (choice == "auto" and mx.default_device() != mx.gpu):
        if choice == "on":
            raise SystemExit("--mlx on needs MLX (pip install mlx, or mlx[cpu] on Linux)")
        return None
    try:
        import mlx_lm  # noqa: F401  (the model the step runs)
    except ImportError:
        if choice == "on":
            raise SystemExit("--mlx on needs mlx-lm (pip install mlx-lm)")
        return None
    return mx


def main(argv=None) -> int:
    args = parse_args(argv)
    info = mtlinv.device_info()
    torch = cuda_torch()
    host_mx = timing.mlx_core()  # MLX where installed: the MLX step's, and on a Mac the floors' copy bandwidth
    mx = mlx_peer(args.mlx, host_mx)
    config = LlamaConfig(n_layers=args.layers, n_heads=args.heads, n_kv_heads=args.kv_heads, hidden=args.hidden,
                         ffn=args.ffn, head_dim=args.head_dim, rope_theta=500000.0, rms_eps=1e-5, vocab=args.vocab,
                         context=args.context + max(max(args.rows), args.tokens + args.k + 2))
    shape = (f"{args.layers} layers, hidden {args.hidden}, FFN {args.ffn}, GQA {args.heads}/{args.kv_heads} x "
             f"{args.head_dim}, vocab {args.vocab}, {weights_label(args)}, "
             f"{args.context} cached positions")
    say = report.Lines()
    say(f"# A decoding step: {shape}\n")
    say(f"mtlinv on {info['backend']} ({info['name']}); torch "
        f"{torch.__version__ + ' on ' + torch.cuda.get_device_name() if torch else 'not run (no CUDA torch)'}")
    if mx is not None:
        say(f"MLX {mx.__version__} on {mx.default_device()} (mlx-lm's llama)")
    # mtlinv's floor: CUDA's device-to-device copy, else the copy where MLX would run (on a Mac its GPU, whether or
    # not the MLX step runs), else numpy's on the host.
    copy_bw = timing.device_copy_bandwidth(torch) if torch else timing.peer_copy_bandwidth(host_mx)
    on_mlx_gpu = torch is None and host_mx is not None and host_mx.default_device() == host_mx.gpu
    say(f"copy bandwidth: {copy_bw / 1e9:.0f} GB/s "
        f"({'device-to-device' if torch else 'MLX on the GPU' if on_mlx_gpu else 'numpy on the host'}, read + write)")
    # MLX's floor: where it runs (the same copy, but beside a CUDA GPU, where MLX runs on the CPU: the host's).
    mlx_bw = None if mx is None else copy_bw if torch is None else timing.peer_copy_bandwidth(mx)

    t0 = time.perf_counter()
    weights, weight_bytes = random_weights(config, args)
    model = DeviceModel(weights, config.context)
    prompt = repeating_prompt(args.context, args.vocab)
    say(f"weights: {weight_bytes / 1e9:.2f} GB on the device, built in {time.perf_counter() - t0:.0f} s")
    with mtlinv.batch_invariant(args.k + 1):  # the limit decoding runs under (decode_tokens): the same bits
        t0 = time.perf_counter()
        last_logits = np.asarray(model.forward_on_device(prompt, 0))[-1:].astype(np.float32)
    say(f"prompt: {args.context} tokens in one forward, {time.perf_counter() - t0:.2f} s")

    samples, row0_same, logits_sha256 = time_mtlinv_steps(model, args, Clock(torch, mtlinv.synchronize))
    say(f"the 1-row step's logits: sha256 {logits_sha256}")
    steps = []
    for m, (walls, gpus) in samples.items():
        floor = step_bytes(config, weight_bytes, m, args.context + m) / copy_bw
        steps.append({"impl": "mtlinv", "rows": m, "label": "mtlinv.Decoder", "time": report.spread(walls),
                      "gpu": report.spread(gpus) if gpus else None, "floor_s": floor,
                      "row0_bits_equal_1_row": row0_same[m], "logits_sha256": logits_sha256 if m == 1 else None})
    torch_weight_bytes, torch_samples = None, {}
    if torch is not None and not args.no_torch:
        try:  # a failure here (a torch without some op) must not cost mtlinv's figures
            torch_samples, torch_weight_bytes = torch_step_times(torch, config, args, args.rows)
        except Exception:
            say(f"\nthe PyTorch step FAILED:\n{traceback.format_exc()}")
        for m, (walls, gpus) in torch_samples.items():
            floor = step_bytes(config, torch_weight_bytes, m, args.context + m) / copy_bw
            steps.append({"impl": "torch", "rows": m, "label": "PyTorch bf16, CUDA graph",
                          "time": report.spread(walls), "gpu": report.spread(gpus), "floor_s": floor})
    mlx_weight_bytes, mlx_samples = None, {}
    if mx is not None:
        try:  # as for torch: a failure here (an mlx-lm without some API, memory) must not cost mtlinv's figures
            mlx_samples, mlx_weight_bytes = mlx_step_times(mx, config, args, prompt)
        except Exception:
            say(f"\nthe MLX step FAILED:\n{traceback.format_exc()}")
        for m, (walls, _) in mlx_samples.items():
            floor = step_bytes(config, mlx_weight_bytes, m, args.context + m) / mlx_bw
            label = f"mlx-lm llama, {args.bits}-bit g{args.group_size} bf16 scales"
            steps.append({"impl": "mlx", "rows": m, "label": label, "time": report.spread(walls), "gpu": None,
                          "floor_s": floor})

    say(f"\nmedians of {args.reps} steps at position {args.context} (min-max in the JSON); limit {max(args.rows)}; "
        "floor: the step's bytes at copy bandwidth\n")
    for line in report.md_header(["step", "rows", "ms (wall)", "ms (GPU span)", "floor ms", "% of floor",
                                  "rows / 1 row", "row 0 = 1-row bits"]):
        say(line)
    for s in steps:
        one = next(o for o in steps if o["impl"] == s["impl"] and o["rows"] == 1)
        t = s["time"]["median"]
        say(report.md_row([s["label"], s["rows"], f"{t * 1e3:.2f}",
                           f"{s['gpu']['median'] * 1e3:.2f}" if s["gpu"] else "-", f"{s['floor_s'] * 1e3:.2f}",
                           f"{100 * s['floor_s'] / t:.0f}%", f"{t / one['time']['median']:.2f}",
                           {True: "yes", False: "**NO**"}.get(s.get("row0_bits_equal_1_row"), "-")]))

    gen = None
    if args.tokens > 1:
        gen = decode_tokens(model, prompt, last_logits, args)
        say(f"\ndecoding {gen['tokens']} tokens after the {args.context}-token prompt (its forward left out), "
            f"limit {args.k + 1}:\n")
        for line in report.md_header(["decoding", "tokens/s", "tokens/s, the draft's prompt indexing left out",
                                      "acceptance", "identical to greedy"]):
            say(line)
        say(report.md_row(["greedy", f"{gen['greedy_tokens_per_s']:.1f}", "-", "-", "-"]))
        say(report.md_row([f"speculative, prompt-lookup draft, k = {args.k}", f"{gen['speculative_tokens_per_s']:.1f}",
                           f"{gen['speculative_tokens_per_s_without_indexing']:.1f}",
                           f"{gen['accepted']}/{gen['proposed']} ({gen['acceptance']:.2f})",
                           "yes" if gen["identical"] else "**NO**"]))
        say(f"\n(greedy output: {gen['distinct_greedy_tokens']} distinct tokens of {gen['tokens']}; the draft indexes "
            f"the prompt's n-grams in Python, {gen['draft_prompt_s'] * 1e3:.1f} ms of the speculative run)")

    report.write(args.out, "bench_decode_step", {
        "shape": {k: v for k, v in vars(args).items() if k != "out"}, "shape_label": shape, "copy_bytes_per_s": copy_bw,
        "weight_bytes": weight_bytes, "torch_weight_bytes": torch_weight_bytes, "mlx_weight_bytes": mlx_weight_bytes,
        "mlx_copy_bytes_per_s": mlx_bw,
        "torch": torch.__version__ if torch else None, "mlx": mx.__version__ if mx else None, "steps": steps,
        "decoding": gen}, say.text())
    bad = [m for m, same in row0_same.items() if not same]
    if bad or (gen and not gen["identical"]):
        print(f"FAILED: row 0 differs from the 1-row step at rows {bad}" if bad else
              "FAILED: speculative decoding's tokens differ from greedy's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
