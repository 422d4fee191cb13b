"""Tokenizers built from a model's own vocabulary, on the `tokenizers` package.

GGUF `tokenizer.ggml.model == "gpt2"`: byte-level BPE over the file's tokens and merges, with the pre-tokenizer
`tokenizer.ggml.pre` names (GPT-2's regex; SmolLM2's digit split; Llama 3's `llama-bpe` and Qwen2's `qwen2` regexes,
as llama.cpp's llama-vocab.cpp writes them). GGUF `"llama"`: a SentencePiece BPE vocabulary (pieces with scores,
"▁" for a space, <0xNN> byte pieces for what no piece covers), merged by the score of the merged piece as
llama.cpp does. An MLX checkpoint's tokenizer.json is taken as it is (`from_file`). Control tokens
(`<|im_start|>`, ...) are matched whole in the text.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Regex, Tokenizer as HFTokenizer, decoders, models, normalizers, pre_tokenizers

from .._kinds import is_int
from .gguf_model import GGUFModel

# llama.cpp's `tokenizer.ggml.pre` names whose pre-tokenizer splits every digit apart before the GPT-2 regex
# (SmolLM2's tokenizer.json has Digits(individual_digits=True) ahead of ByteLevel).
_DIGIT_SPLIT_PRE = frozenset({"smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva"})
_PLAIN_GPT2_PRE = frozenset({"default", "gpt-2", "gpt2", "mpt", "olmo", "jais"})
# Pre-tokenizer regexes of llama.cpp (llama-vocab.cpp) by `tokenizer.ggml.pre` name; byte-level BPE runs on the
# pieces they isolate. Llama 3's groups digits by up to three, Qwen2's splits every digit.
_LLAMA3_REGEX = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_REGEX = _LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
_REGEX_PRE = {"llama-bpe": _LLAMA3_REGEX, "llama3": _LLAMA3_REGEX, "qwen2": _QWEN2_REGEX}
_CONTROL = 3  # llama.cpp token types: control, and a byte piece of a SentencePiece vocabulary
_BYTE = 6
_SPACE = "\u2581"  # "▁", SentencePiece's space


def require_utf8(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: bytes that were not UTF-8, as argv gives them
        raise ValueError(f"{what} is not valid UTF-8 at character {e.start}: {text[e.start:e.end]!r}") from None


class Tokenizer:
    """Text <-> token ids for one GGUF model.

    tokens: the vocabulary, index = id (byte-level strings, e.g. "Ġworld"); merges: "left right" strings in
    rank order; token_types: llama.cpp token types per id; pre: the `tokenizer.ggml.pre` name.
    """

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int],
                 bos_id: int, eos_id: int, pre: str = "default"):
        if pre in _DIGIT_SPLIT_PRE:
            pre_tok = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        elif pre in _PLAIN_GPT2_PRE:
            pre_tok = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        elif pre in _REGEX_PRE:
            pre_tok = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(_REGEX_PRE[pre]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        else:
            raise ValueError(f"tokenizer pre-tokenizer {pre!r} is not supported")
        if len(token_types) != len(tokens):
            raise ValueError(f"tokenizer: {len(token_types)} token types for {len(tokens)} tokens")
        for name, i in (("bos_token_id", bos_id), ("eos_token_id", eos_id)):
            if not 0 <= i < len(tokens):
                raise ValueError(f"tokenizer: {name}={i} is outside the vocabulary [0, {len(tokens)})")
        vocab = {tok: i for i, tok in enumerate(tokens)}
        # A merge is "left right"; a left part may itself start with a space-like char, so split after index 0.
        bad = next((m for m in merges if " " not in m[1:]), None)
        if bad is not None:
            raise ValueError(f"tokenizer: merge {bad!r} is not 'left right'")
        pairs = [(m[:m.index(" ", 1)], m[m.index(" ", 1) + 1:]) for m in merges]
        self._tok = HFTokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
        self._tok.pre_tokenizer = pre_tok
        self._tok.decoder = decoders.ByteLevel()
        self._finish(tokens, token_types, vocab, bos_id, eos_id)

    def _finish(self, tokens, token_types, vocab, bos_id, eos_id) -> None:
        self._tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                      for i, t in enumerate(token_types) if t == _CONTROL])
        self.vocab = vocab
        self.bos_id = bos_id
        self.eos_id = eos_id

    @classmethod
    def sentencepiece(cls, tokens: Sequence[str], scores: Sequence[float], token_types: Sequence[int], bos_id: int,
                      eos_id: int, add_space_prefix: bool = True) -> Tokenizer:
        """A SentencePiece BPE vocabulary (GGUF `llama`): the merges are every split of a piece into two pieces,
        ranked by the merged piece's score (llama.cpp's order); spaces become "▁", and one is prepended to the
        text when add_space_prefix; characters no piece covers fall back to their UTF-8 bytes' <0xNN> pieces."""
        if not (len(tokens) == len(scores) == len(token_types)):
            raise ValueError(f"tokenizer: {len(tokens)} tokens, {len(scores)} scores, {len(token_types)} types")
        vocab = {tok: i for i, tok in enumerate(tokens)}
        ranked = []
        for i, piece in enumerate(tokens):
            if token_types[i] in (_CONTROL, _BYTE) or len(piece) < 2:
                continue
            for cut in range(1, len(piece)):
                left, right = piece[:cut], piece[cut:]
                if left in vocab and right in vocab:
                    ranked.append((-scores[i], i, vocab[left], left, right))
        merges = [(left, right) for *_, left, right in sorted(ranked)]
        unk = next((t for t, ty in zip(tokens, token_types) if ty == 2), None)
        tok = cls.__new__(cls)
        tok._tok = HFTokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True,
                                          byte_fallback=True))
        steps = [normalizers.Prepend(_SPACE)] if add_space_prefix else []
        tok._tok.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", _SPACE)])
        strip = [decoders.Strip(" ", 1, 0)] if add_space_prefix else []
        tok._tok.decoder = decoders.Sequence([decoders.Replace(_SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                              *strip])
        tok._finish(tokens, token_types, vocab, bos_id, eos_id)
        return tok

    @classmethod
    def from_gguf(cls, model: GGUFModel) -> Tokenizer:
        return cls.from_metadata(model.metadata, model.path)

    @classmethod
    def from_metadata(cls, md: dict, path) -> Tokenizer:
        """The tokenizer of a GGUF's `tokenizer.ggml.*` keys (path: for messages)."""
        kind = md.get("tokenizer.ggml.model")
        if kind is None:
            raise ValueError(f"{path}: the file has no tokenizer (no tokenizer.ggml.model key)")
        if kind not in ("gpt2", "llama"):
            raise ValueError(f"{path}: tokenizer.ggml.model is {kind!r}; supported: 'gpt2' (byte-level BPE), "
                             f"'llama' (SentencePiece BPE)")
        table = "merges" if kind == "gpt2" else "scores"
        missing = [key for key in ("tokens", table, "token_type", "bos_token_id", "eos_token_id")
                   if f"tokenizer.ggml.{key}" not in md]
        if missing:
            names = ", ".join(f"tokenizer.ggml.{k}" for k in missing)
            raise ValueError(f"{path}: missing metadata keys {names}")
        args = (md["tokenizer.ggml.tokens"], md[f"tokenizer.ggml.{table}"], md["tokenizer.ggml.token_type"],
                int(md["tokenizer.ggml.bos_token_id"]), int(md["tokenizer.ggml.eos_token_id"]))
        try:
            if kind == "llama":
                return cls.sentencepiece(*args, add_space_prefix=bool(md.get("tokenizer.ggml.add_space_prefix", True)))
            return cls(*args, md.get("tokenizer.ggml.pre", "default"))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def from_file(cls, path, bos_id: int | None, eos_id: int | None) -> Tokenizer:
        """A Hugging Face tokenizer.json (an MLX checkpoint's), taken as it is: its normalizer, pre-tokenizer, model
        and decoder are the model's own."""
        tok = cls.__new__(cls)
        try:
            tok._tok = HFTokenizer.from_file(str(path))
        except Exception as e:  # the tokenizers library raises its own Exception type for a bad file
            raise ValueError(f"{path}: not a tokenizer the tokenizers library reads: {e}") from None
        tok.vocab = tok._tok.get_vocab(with_added_tokens=True)
        tok.bos_id, tok.eos_id = bos_id, eos_id
        return tok

    def token_id(self, token: str) -> int | None:
        """The id of a token string, or None."""
        return self._tok.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; control tokens written in the text (e.g. "<|im_end|>") become their single id."""
        require_utf8(text, "text")
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """Text of `ids`; bytes that do not form whole UTF-8 characters decode to U+FFFD."""
        ids = list(ids)
        for i in ids:
            if not is_int(i) or not 0 <= i < len(self.vocab):
                raise ValueError(f"decode: id {i!r} is not a token id in [0, {len(self.vocab)})")
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)
