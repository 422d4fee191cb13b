"""Greedy and greedy-speculative decoding over any model with a KV cache.

The loops need only `DecoderModel`: the float64 reference, and later the mtlinv device model, plug in unchanged.
Speculative decoding reproduces greedy decoding exactly iff the target's logits for a position do not depend on
how many positions are verified in the same call (M) — the property mtlinv's canonical kernels provide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._kinds import is_int


class DecoderModel(Protocol):
    """A causal LM with a KV cache. Positions are absolute; the cache holds positions [0, kv_len)."""

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        """Logits [len(tokens), vocab] for tokens at start_pos..; writes their K/V. start_pos == kv_len."""

    def rollback(self, n_valid: int) -> None:
        """Truncate the cache to its first n_valid positions."""


def _argmax(logits) -> list[int]:
    """Greedy choice per row; ties go to the lowest id (np.argmax), so the choice is a function of the bits."""
    return [int(i) for i in np.argmax(np.asarray(logits), axis=-1)]


def _require_count(what: str, name: str, value) -> None:
    if not is_int(value) or value < 1:
        raise ValueError(f"{what}: {name} must be an int >= 1, got {value!r}")


def greedy(model: DecoderModel, prompt_ids: Sequence[int], n_tokens: int, eos_id: int | None = None) -> list[int]:
    """Up to n_tokens new tokens, one forward call each (M = 1) after the prompt; stops after eos_id."""
    if len(prompt_ids) == 0:
        raise ValueError("greedy needs a non-empty prompt")
    _require_count("greedy", "n_tokens", n_tokens)
    model.rollback(0)
    out = [_argmax(model.forward(prompt_ids, 0))[-1]]
    while len(out) < n_tokens and out[-1] != eos_id:
        out.append(_argmax(model.forward([out[-1]], len(prompt_ids) + len(out) - 1))[0])
    return out


@dataclass(frozen=True)
class SpeculativeResult:
    """tokens: the output. proposed/accepted: draft tokens offered and taken. target_calls: target forward calls,
    the prompt's included. first_diff: first index where tokens differ from the reference given (None: they agree,
    or no reference)."""

    tokens: list[int]
    proposed: int
    accepted: int
    target_calls: int
    draft_calls: int
    first_diff: int | None

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


def speculative(target: DecoderModel, draft: DecoderModel, prompt_ids: Sequence[int], n_tokens: int, k: int,
                eos_id: int | None = None, reference: Sequence[int] | None = None) -> SpeculativeResult:
    """Greedy speculative decoding of up to n_tokens new tokens (stopping after eos_id).

    Each round the draft proposes up to k tokens greedily; the target scores the pending token and the proposals
    in ONE forward call (M = k + 1); the longest prefix of proposals equal to the target's argmax is kept, plus the
    target's own next token. Both caches are rolled back to what was kept. target and draft must be separate
    instances (each owns its cache), even when they share weights.
    """
    if len(prompt_ids) == 0:
        raise ValueError("speculative needs a non-empty prompt")
    _require_count("speculative", "n_tokens", n_tokens)
    _require_count("speculative", "k", k)
    if target is draft:
        raise ValueError("target and draft must be separate model instances: each needs its own KV cache")
    target.rollback(0)
    draft.rollback(0)
    ctx = list(prompt_ids)  # every committed token; the last one is "pending": not yet in the target's cache
    ctx.append(_argmax(target.forward(prompt_ids, 0))[-1])
    out_start = len(prompt_ids)
    target_calls, draft_calls, proposed, accepted = 1, 0, 0, 0
    # The draft prefills the prompt with the very call the target made (same tokens, same M), so a self-draft's
    # cache holds the target's bits and every later rejection is a kernel effect of the verification call alone.
    draft.forward(prompt_ids, 0)
    draft_calls += 1
    draft_len = len(prompt_ids)  # positions of ctx in the draft's cache
    while len(ctx) - out_start < n_tokens and eos_id not in ctx[out_start:]:
        pos = len(ctx) - 1
        n_draft = min(k, n_tokens - (len(ctx) - out_start) - 1)  # no proposals past the end
        proposals: list[int] = []
        if n_draft:
            # The draft first catches up on committed tokens it has not seen (the pending one, and after a
            # fully accepted round also the last proposal, which it never had to run).
            logits = draft.forward(ctx[draft_len:], draft_len)
            draft_calls += 1
            proposals.append(_argmax(logits)[-1])
            while len(proposals) < n_draft:
                proposals.append(_argmax(draft.forward(proposals[-1:], pos + len(proposals)))[0])
                draft_calls += 1
        choices = _argmax(target.forward([ctx[-1], *proposals], pos))
        target_calls += 1
        n_ok = 0
        while n_ok < len(proposals) and proposals[n_ok] == choices[n_ok]:
            n_ok += 1
        ctx += proposals[:n_ok] + [choices[n_ok]]
        proposed += len(proposals)
        accepted += n_ok
        target.rollback(pos + 1 + n_ok)
        if proposals:
            draft_len = min(pos + len(proposals), pos + 1 + n_ok)
            draft.rollback(draft_len)
    tokens = ctx[out_start:]
    if eos_id in tokens:
        tokens = tokens[:tokens.index(eos_id) + 1]
    first = first_difference(tokens, reference) if reference is not None else None
    return SpeculativeResult(tokens, proposed, accepted, target_calls, draft_calls, first)


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First index where a and b differ (a length difference counts at the shorter length); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
