"""Byte-level BPE tokenizer built from a GGUF's own vocabulary (`tokenizer.ggml.model == "gpt2"`).

Built on the `tokenizers` package: BPE over the GGUF's tokens and merges, GPT-2 byte-to-unicode mapping and
pre-tokenizer regex, and control tokens (`<|im_start|>`, ...) matched whole in the text.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import AddedToken, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

from .._kinds import is_int
from .gguf_model import GGUFModel

# llama.cpp's `tokenizer.ggml.pre` names whose pre-tokenizer splits every digit apart before the GPT-2 regex
# (SmolLM2's tokenizer.json has Digits(individual_digits=True) ahead of ByteLevel).
_DIGIT_SPLIT_PRE = frozenset({"smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva"})
_PLAIN_GPT2_PRE = frozenset({"default", "gpt-2", "gpt2", "mpt", "olmo", "jais"})
_CONTROL = 3  # llama.cpp token type of control tokens


def _require_utf8(text: str, what: str) -> None:
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
        self._tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                                      for i, t in enumerate(token_types) if t == _CONTROL])
        self.vocab = vocab
        self.bos_id = bos_id
        self.eos_id = eos_id

    @classmethod
    def from_gguf(cls, model: GGUFModel) -> Tokenizer:
        md = model.metadata
        kind = md.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(f"{model.path}: tokenizer.ggml.model is {kind!r}; only 'gpt2' (byte-level BPE) is "
                             f"supported")
        missing = [key for key in ("tokens", "merges", "token_type", "bos_token_id", "eos_token_id")
                   if f"tokenizer.ggml.{key}" not in md]
        if missing:
            names = ", ".join(f"tokenizer.ggml.{k}" for k in missing)
            raise ValueError(f"{model.path}: missing metadata keys {names}")
        try:
            return cls(md["tokenizer.ggml.tokens"], md["tokenizer.ggml.merges"], md["tokenizer.ggml.token_type"],
                       int(md["tokenizer.ggml.bos_token_id"]), int(md["tokenizer.ggml.eos_token_id"]),
                       md.get("tokenizer.ggml.pre", "default"))
        except ValueError as e:
            raise ValueError(f"{model.path}: {e}") from None

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
        _require_utf8(text, "text")
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """Text of `ids`; bytes that do not form whole UTF-8 characters decode to U+FFFD."""
        ids = list(ids)
        for i in ids:
            if not is_int(i) or not 0 <= i < len(self.vocab):
                raise ValueError(f"decode: id {i!r} is not a token id in [0, {len(self.vocab)})")
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special)
