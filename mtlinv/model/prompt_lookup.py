"""A draft with no weights for speculative decoding: prompt lookup. It proposes the token that followed the most
recent earlier occurrence of the context's last n tokens (n = max_ngram down to 1), so it costs no forward pass on
the device, and text that quotes or repeats its context is drafted right. Whatever it proposes, the target's
verification keeps only its own greedy tokens: with set_limit(k + 1) the output is greedy decoding's, token for
token, and each round costs one verification call of k + 1 rows, about what one decoding step costs on a GPU.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._kinds import is_int


class PromptLookupDraft:
    """A DecoderModel (mtlinv.model.decoding) whose logits are one-hot at its proposal. Its "cache" is the
    context itself; every n-gram of the context is indexed by the positions that follow it, so a proposal costs
    max_ngram dictionary lookups, and a rollback undoes only the positions it drops."""

    def __init__(self, vocab: int, max_ngram: int = 3):
        for name, value in (("vocab", vocab), ("max_ngram", max_ngram)):
            if not is_int(value) or value < 1:
                raise ValueError(f"PromptLookupDraft: {name} must be an int >= 1, got {value!r}")
        self.vocab = int(vocab)
        self.max_ngram = int(max_ngram)
        self._ctx: list[int] = []
        # n-gram -> the positions p (ascending) whose preceding n tokens are it: ctx[p - n:p] == n-gram.
        self._followers: dict[tuple[int, ...], list[int]] = {}

    @property
    def kv_len(self) -> int:
        return len(self._ctx)

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        """One-hot logits [M, vocab]: row i proposes the token after tokens[:i + 1] (at start_pos.., which must be
        the context's length)."""
        if start_pos != len(self._ctx):
            raise ValueError(f"forward at start_pos={start_pos} but the context holds {len(self._ctx)} tokens")
        if len(tokens) == 0:
            raise ValueError("forward needs at least one token")
        for i, token in enumerate(tokens):  # all checked before any is taken in: an error leaves the context as it was
            if not is_int(token) or not 0 <= token < self.vocab:
                raise ValueError(f"forward: tokens[{i}]={token!r} is not an id in [0, {self.vocab})")
        logits = np.zeros((len(tokens), self.vocab), np.float32)
        for i, token in enumerate(tokens):
            self._append(int(token))
            logits[i, self._propose()] = 1.0
        return logits

    def rollback(self, n_valid: int) -> None:
        if not is_int(n_valid) or not 0 <= n_valid <= len(self._ctx):
            raise ValueError(f"rollback({n_valid!r}) with {len(self._ctx)} tokens in the context")
        for p in range(len(self._ctx) - 1, n_valid - 1, -1):  # the latest first: each is its n-grams' last entry
            for n in range(1, min(self.max_ngram, p) + 1):
                key = tuple(self._ctx[p - n:p])
                self._followers[key].pop()
                if not self._followers[key]:
                    del self._followers[key]
        del self._ctx[n_valid:]

    def _append(self, token: int) -> None:
        p = len(self._ctx)
        self._ctx.append(token)
        for n in range(1, min(self.max_ngram, p) + 1):
            self._followers.setdefault(tuple(self._ctx[p - n:p]), []).append(p)

    def _propose(self) -> int:
        """The token after the latest earlier occurrence of the longest suffix (up to max_ngram) seen before; the
        last token again when no suffix recurs (a guess like any other: verification decides)."""
        end = len(self._ctx)
        for n in range(min(self.max_ngram, end - 1), 0, -1):
            followers = self._followers.get(tuple(self._ctx[end - n:end]))
            if followers:  # every indexed position is < end: the suffix itself is not followed yet
                return self._ctx[followers[-1]]
        return self._ctx[-1]
