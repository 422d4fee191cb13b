"""Builds the K-quant test models of tests/model/fixtures/ with real tools, and llama.cpp's logits for them.

A small llama with random weights (2 layers, hidden 256, 4 query and 2 KV heads of 64, FFN 256, a 300-token
byte-level BPE vocabulary, the embedding tied to the output) is written as an F32 GGUF by the `gguf` package's
writer, then quantised by llama.cpp's own quantiser (`llama_cpp.llama_model_quantize`, from llama-cpp-python) to:

- Q4_K_M, llama.cpp's usual mix (Q4_K and Q6_K here: every row length is a multiple of 256);
- pure Q4_K, Q5_K, Q5_0, Q5_1 and Q6_K (`pure`: every matrix in the one type, the embedding too).

Then MLX checkpoints, written by mlx-lm's own model classes, quantize_model and save path (tied 4-bit models with
2 layers, hidden 128, 2 query heads and 1 KV head of 64, group 64: mlx-llama-q4, mlx-qwen2 with its q/k/v biases,
mlx-qwen3 with its q/k norms, and mlx-llama3-rope-scaled with Llama 3's rope_scaling; every RMS norm weight is
drawn at random around 1 and every bias around 0 with deviation 0.5, since mlx-lm initialises them to ones and
to within +-1/sqrt(K), which would hide a norm or a bias left out), with the same
vocabulary as tokenizer.json, and mlx-lm's logits for each (mlx_reference_logits.npz).

The same writer makes the model as qwen2 (with q/k/v biases), qwen3 (with q/k norms) and a llama with Llama 3's
RoPE scaling (llama.cpp's rope_freqs.weight), each quantised to pure Q4_K (tiny-{qwen2,qwen3,llama3}-Q4_K.gguf),
with llama.cpp's logits in arch_reference_logits.npz.

For each GGUF file it records llama.cpp's logits (`llama_cpp.Llama`, logits_all) of a fixed token sequence into
reference_logits.npz, with llama.cpp's token ids of a fixed text. Run once; the outputs (about 3 MB) are committed, so the tests need neither
llama.cpp nor this script:

    pip install ".[model,fixtures]"  # llama-cpp-python builds llama.cpp from source (about 40 min on 2 busy cores)
    python tools/make_model_fixtures.py tests/model/fixtures [--only gguf|mlx|archs]
"""
from __future__ import annotations

import argparse
import ctypes
import pathlib
import tempfile

import gguf
import numpy as np

N_LAYERS, HIDDEN, N_HEADS, N_KV_HEADS, FFN, CONTEXT = 2, 256, 4, 2, 256, 256
SEED = 20240601
# The token sequence whose logits llama.cpp records (ids of the fixture vocabulary: bytes and merges).
TOKENS = [297, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 258, 270, 33, 10]
CHAT_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# A text llama.cpp's tokenizer encodes for the tokenizer test (its ids go into reference_logits.npz).
TOKENIZER_TEXT = "<|im_start|>user\nThe quick fox, then the sea: 12 345!<|im_end|>\n"
# Texts for the vocabulary-only files (tok-*.gguf): contractions, digit runs, spaces, newlines, non-ASCII.
TOKENIZER_TEXTS = ["The quick fox, then the sea: 12 345!\n", "don't   stop 2024\n\nthe END", "héllo wörld 日本 x"]
TEXT_FOR_MERGES = ("the quick brown fox jumps over the lazy dog and then the other one went to see the sea in 2024 "
                   "2024 2024 with 12345 12345 12345 as don't don't don't")
# name -> (llama_ftype constant name in llama_cpp, pure)
FILES = {
    "Q4_K_M": ("LLAMA_FTYPE_MOSTLY_Q4_K_M", False),
    "Q4_K": ("LLAMA_FTYPE_MOSTLY_Q4_K_S", True),
    "Q5_K": ("LLAMA_FTYPE_MOSTLY_Q5_K_S", True),
    "Q5_0": ("LLAMA_FTYPE_MOSTLY_Q5_0", True),
    "Q5_1": ("LLAMA_FTYPE_MOSTLY_Q5_1", True),
    "Q6_K": ("LLAMA_FTYPE_MOSTLY_Q6_K", True),
}


def byte_tokens() -> list[str]:
    """GPT-2's byte-to-unicode map: the byte-level BPE strings of the 256 bytes, in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def merge_most_frequent(words: list[list[str]]) -> tuple[str, str] | None:
    """One BPE training step: the most frequent adjacent pair (ties to the larger pair), merged in place in every
    word; None when no word has two pieces left."""
    pairs = {}
    for w in words:
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
    if not pairs:
        return None
    a, b = max(pairs, key=lambda p: (pairs[p], p))
    for w in words:
        i = 0
        while i < len(w) - 1:
            if (w[i], w[i + 1]) == (a, b):
                w[i:i + 2] = [a + b]
            i += 1
    return a, b


def vocabulary():
    """(tokens, token types, merges): 256 bytes, merges learnt greedily from a sentence, then 3 control tokens."""
    tokens = byte_tokens()
    space = tokens[ord(" ")]
    words = [([space] if i else []) + [tokens[ord(c)] for c in w] for i, w in enumerate(TEXT_FOR_MERGES.split())]
    # Merges inside digit runs and contractions first: pieces only some pre-tokenizers isolate (Llama 3's digit
    # groups of up to three, Qwen2's single digits, GPT-2's space-prefixed runs), so the files tell them apart.
    merges = ["2 0", "20 2", "1 2", "12 3", "3 4", "34 5", "' t"]
    tokens += [m.replace(" ", "") for m in merges]
    while len(tokens) < 297:
        pair = merge_most_frequent(words)
        if pair is None:
            break
        merges.append(" ".join(pair))
        tokens.append("".join(pair))
    while len(tokens) < 297:  # pad with unused tokens (never produced by a merge)
        tokens.append(f"<unused{len(tokens)}>")
    types = [1] * len(tokens) + [3, 3, 3]
    tokens += ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return tokens, types, merges


def sentencepiece_vocabulary():
    """(tokens, scores, types) of a SentencePiece BPE vocabulary: <unk>, <s>, </s>, the 256 byte pieces, the
    characters of TEXT_FOR_MERGES with "▁", and pieces merged greedily from it (earlier merges score higher)."""
    words = [["\u2581", *w] for w in TEXT_FOR_MERGES.split()]
    chars = sorted({c for w in words for c in w})
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    scores += [0.0] * 256
    types += [6] * 256
    merged = []
    while len(merged) < 40:
        pair = merge_most_frequent(words)
        if pair is None:
            break
        merged.append("".join(pair))
    pieces = [p for p in merged if p not in chars]
    tokens += chars + pieces
    scores += [-1000.0 - i for i in range(len(chars))] + [-float(i) for i in range(len(pieces))]
    types += [1] * (len(chars) + len(pieces))
    return tokens, scores, types


def write_vocab_only(path: pathlib.Path, kind: str, pre: str | None) -> None:
    """A GGUF with the hyperparameters and a vocabulary, no tensors: what llama.cpp loads with vocab_only."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    if kind == "gpt2":
        tokens, types, merges = vocabulary()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_merges(merges)
        bos, eos = len(tokens) - 2, len(tokens) - 1
    else:
        tokens, scores, types = sentencepiece_vocabulary()
        w.add_tokenizer_model("llama")
        w.add_token_scores(scores)
        bos, eos = 1, 2
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


VOCAB_ONLY = {"tok-llama-bpe": ("gpt2", "llama-bpe"), "tok-qwen2": ("gpt2", "qwen2"), "tok-spm": ("llama", None)}


def tokenize_with_llama_cpp(path: pathlib.Path) -> list[list[int]]:
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return [llm.tokenize(t.encode(), add_bos=False, special=True) for t in TOKENIZER_TEXTS]


def write_f32(path: pathlib.Path, arch: str = "llama", rope_divisors: np.ndarray | None = None,
              arch_draws: bool = False) -> None:
    """The tiny model as an F32 GGUF of `arch`: llama (q and k rows permuted for interleaved RoPE, as llama.cpp's
    converter writes them; with rope_divisors, a rope_freqs.weight tensor as it writes for Llama 3), qwen2 (with
    q/k/v biases) or qwen3 (with q/k norms), both in Hugging Face's row order (llama.cpp rotates them as NEOX).
    arch_draws: every layer draws both architectures' extra tensors from the random stream, keeping `arch`'s (how
    the ARCH_FILES fixtures were made); without it, none (how the K-quant fixtures were): each committed file comes
    out again from its own draws."""
    rng = np.random.default_rng(SEED)
    tokens, types, merges = vocabulary()
    head_dim = HIDDEN // N_HEADS

    def mat(n, k):
        return (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)

    def norm(n=HIDDEN):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.5 * rng.standard_normal(n)).astype(np.float32)

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("mtlinv-fixture")
    w.add_block_count(N_LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_chat_template(CHAT_TEMPLATE)
    # Embedding rows of unit scale: tied to the output, they give logits of a useful spread.
    w.add_tensor("token_embd.weight", rng.standard_normal((len(tokens), HIDDEN)).astype(np.float32))
    w.add_tensor("output_norm.weight", norm())
    if rope_divisors is not None:
        w.add_tensor("rope_freqs.weight", rope_divisors.astype(np.float32))
    for i in range(N_LAYERS):
        for name, array in (("attn_norm", norm()), ("attn_q", mat(N_HEADS * head_dim, HIDDEN)),
                            ("attn_k", mat(N_KV_HEADS * head_dim, HIDDEN)), ("attn_v", mat(N_KV_HEADS * head_dim, HIDDEN)),
                            ("attn_output", mat(HIDDEN, N_HEADS * head_dim)), ("ffn_norm", norm()),
                            ("ffn_gate", mat(FFN, HIDDEN)), ("ffn_up", mat(FFN, HIDDEN)), ("ffn_down", mat(HIDDEN, FFN))):
            w.add_tensor(f"blk.{i}.{name}.weight", array)
        if not arch_draws:
            continue
        extras = {"qwen2": (("attn_q.bias", bias(N_HEADS * head_dim)), ("attn_k.bias", bias(N_KV_HEADS * head_dim)),
                            ("attn_v.bias", bias(N_KV_HEADS * head_dim))),
                  "qwen3": (("attn_q_norm.weight", norm(head_dim)), ("attn_k_norm.weight", norm(head_dim)))}
        for name, array in extras.get(arch, ()):
            w.add_tensor(f"blk.{i}.{name}", array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src: pathlib.Path, dst: pathlib.Path, ftype: str, pure: bool) -> None:
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype)
    params.pure = pure
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({dst.name}) returned {rc}")


# GGUF files of the other architectures: name -> (arch, Llama 3 rope_scaling or None), each quantised to pure Q4_K.
ARCH_FILES = {
    "qwen2": ("qwen2", None),
    "qwen3": ("qwen3", None),
    # original_max_position_embeddings 16: the blend falls on pairs whose angles differ within the 16 positions.
    "llama3": ("llama", dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                             original_max_position_embeddings=16)),
}


def write_arch_ggufs(out: pathlib.Path) -> dict[str, np.ndarray]:
    """tiny-{name}-Q4_K.gguf of ARCH_FILES, and llama.cpp's logits of TOKENS for each. The Llama 3 file's
    rope_freqs.weight holds the divisors llama.cpp's converter writes: unscaled over scaled frequency per pair."""
    from mtlinv.model.rope_scaling import base_frequencies, scaled_frequencies
    head_dim = HIDDEN // N_HEADS
    logits = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (arch, scaling) in ARCH_FILES.items():
            divisors = None
            if scaling is not None:
                scaled = scaled_frequencies(head_dim, 10000.0, scaling)
                divisors = base_frequencies(head_dim, 10000.0) / np.array(scaled)
            f32 = pathlib.Path(tmp) / f"{name}-F32.gguf"
            write_f32(f32, arch, divisors, arch_draws=True)
            dst = out / f"tiny-{name}-Q4_K.gguf"
            quantize(f32, dst, "LLAMA_FTYPE_MOSTLY_Q4_K_S", True)
            logits[name], _ = run_llama_cpp(dst)
            print(f"{dst}: {dst.stat().st_size} bytes")
    return logits


def run_llama_cpp(path: pathlib.Path) -> tuple[np.ndarray, list[int]]:
    """llama.cpp's logits [len(TOKENS), vocab] of TOKENS, and its token ids of TOKENIZER_TEXT."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                          n_gpu_layers=0)
    llm.eval(TOKENS)
    ids = llm.tokenize(TOKENIZER_TEXT.encode(), add_bos=False, special=True)
    return np.array(llm.scores[:len(TOKENS)], np.float32), ids


# Every MLX fixture: tied, 2 layers, hidden 128, 2 query heads and 1 KV head of 64, FFN 256.
MLX_SHAPE = dict(hidden_size=128, num_hidden_layers=2, intermediate_size=256, num_attention_heads=2,
                 num_key_value_heads=1, tie_word_embeddings=True, max_position_embeddings=256)
MLX_MODELS = {  # directory -> config.json of a tiny model mlx-lm builds
    "mlx-llama-q4": dict(MLX_SHAPE, model_type="llama", rms_norm_eps=1e-5, rope_theta=10000.0),
    "mlx-qwen2": dict(MLX_SHAPE, model_type="qwen2", rms_norm_eps=1e-6, rope_theta=1e6),
    "mlx-qwen3": dict(MLX_SHAPE, model_type="qwen3", head_dim=64, rms_norm_eps=1e-6, rope_theta=1e6),
    # original_max_position_embeddings 16: the blend between kept and slowed frequencies falls on pairs whose
    # angles differ within the 16 positions the logits cover.
    "mlx-llama3-rope-scaled": dict(MLX_SHAPE, model_type="llama", rms_norm_eps=1e-5, rope_theta=500000.0,
                                   rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                     high_freq_factor=4.0, original_max_position_embeddings=16)),
}


def write_mlx(out: pathlib.Path) -> dict[str, np.ndarray]:
    """The MLX checkpoints; returns mlx-lm's logits of TOKENS for each, as mlx-lm loads it from its directory."""
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm import load as mlx_load
    from mlx_lm.utils import quantize_model, save_config, save_model
    from transformers import PreTrainedTokenizerFast

    from mtlinv.model.tokenizer import Tokenizer

    tokens, types, merges = vocabulary()
    hf = Tokenizer(tokens, merges, types, len(tokens) - 2, len(tokens) - 1, "gpt-2")._tok
    logits = {}
    for name, cfg in MLX_MODELS.items():
        mx.random.seed(SEED)
        cfg = dict(cfg, vocab_size=len(tokens), bos_token_id=len(tokens) - 2, eos_token_id=len(tokens) - 1)
        arch = importlib.import_module(f"mlx_lm.models.{cfg['model_type']}")
        model = arch.Model(arch.ModelArgs.from_dict(cfg))
        # RMS norm weights start as ones and projection biases within +-1/sqrt(K): drawn around 1 and at the scale
        # of the projections' outputs instead, so that the tests see each one.
        params = tree_flatten(model.parameters())
        model.load_weights([(k, 1.0 + 0.2 * mx.random.normal(v.shape)) for k, v in params if k.endswith("norm.weight")]
                           + [(k, 0.5 * mx.random.normal(v.shape)) for k, v in params if k.endswith("proj.bias")],
                           strict=False)
        mx.eval(model.parameters())
        model, cfg = quantize_model(model, cfg, group_size=64, bits=4)
        path = out / name
        path.mkdir(exist_ok=True)
        save_model(path, model)
        save_config(cfg, path / "config.json")
        fast = PreTrainedTokenizerFast(tokenizer_object=hf, bos_token=tokens[-2], eos_token=tokens[-1])
        fast.chat_template = CHAT_TEMPLATE
        fast.save_pretrained(path)
        model, _ = mlx_load(str(path))
        logits[name] = np.array(model(mx.array([TOKENS]))[0].astype(mx.float32))
        print(f"{path}: {sum(f.stat().st_size for f in path.iterdir())} bytes")
    return logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--only", choices=("gguf", "mlx", "archs"), default=None)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "archs"):
        np.savez_compressed(args.out / "arch_reference_logits.npz", tokens=np.array(TOKENS),
                            **write_arch_ggufs(args.out))
    if args.only == "archs":
        return
    if args.only != "gguf":
        np.savez_compressed(args.out / "mlx_reference_logits.npz", tokens=np.array(TOKENS), **write_mlx(args.out))
    if args.only == "mlx":
        return
    logits = {}
    with tempfile.TemporaryDirectory() as tmp:
        f32 = pathlib.Path(tmp) / "tiny-F32.gguf"
        write_f32(f32)
        for name, (ftype, pure) in FILES.items():
            dst = args.out / f"tiny-{name}.gguf"
            quantize(f32, dst, ftype, pure)
            logits[name], ids = run_llama_cpp(dst)
            print(f"{dst}: {dst.stat().st_size} bytes")
    np.savez_compressed(args.out / "reference_logits.npz", tokens=np.array(TOKENS), text=np.array(TOKENIZER_TEXT),
                        text_ids=np.array(ids),
                        **logits)
    ids = {}
    for name, (kind, pre) in VOCAB_ONLY.items():
        write_vocab_only(args.out / f"{name}.gguf", kind, pre)
        for i, row in enumerate(tokenize_with_llama_cpp(args.out / f"{name}.gguf")):
            ids[f"{name}/{i}"] = np.array(row)
    np.savez_compressed(args.out / "reference_tokens.npz", texts=np.array(TOKENIZER_TEXTS), **ids)


if __name__ == "__main__":
    main()
