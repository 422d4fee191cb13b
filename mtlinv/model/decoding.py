"""Greedy, sampled and speculative decoding over any model with a KV cache.

The loops need only `DecoderModel`: the float64 reference, and later the mtlinv device model, plug in unchanged.
Speculative decoding reproduces greedy decoding exactly iff the target's logits for a position do not depend on
how many positions are verified in the same call (M) — the property mtlinv's canonical kernels provide.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._kinds import is_int
from .sampling import GREEDY, Sampler


class DecoderModel(Protocol):
    """A causal LM with a KV cache. Positions are absolute; the cache holds positions [0, kv_len)."""

    def forward(self, tokens: Sequence[int], start_pos: int) -> np.ndarray:
        """Logits [len(tokens), vocab] for tokens at start_pos..; writes their K/V. start_pos == kv_len."""

    def rollback(self, n_valid: int) -> None:
        """Truncate the cache to its first n_valid positions."""


def _stop_ids(eos_id) -> frozenset[int]:
    """The ids after which decoding stops: eos_id may be None, one id, or a collection of ids."""
    if eos_id is None:
        return frozenset()
    ids = [eos_id] if is_int(eos_id) else list(eos_id)
    bad = next((i for i in ids if not is_int(i)), None)
    if bad is not None:
        raise ValueError(f"eos_id: {bad!r} is not a token id")
    return frozenset(int(i) for i in ids)


def _require_count(what: str, name: str, value) -> None:
    if not is_int(value) or value < 1:
        raise ValueError(f"{what}: {name} must be an int >= 1, got {value!r}")


def greedy(model: DecoderModel, prompt_ids: Sequence[int], n_tokens: int, eos_id=None,
           sampler: Sampler = GREEDY) -> list[int]:
    """Up to n_tokens new tokens, one forward call each (M = 1) after the prompt; stops after a token of eos_id
    (None, an id or a collection of ids). With a sampling `sampler` this is plain (non-speculative) sampling."""
    return [t for step in stream(model, None, prompt_ids, n_tokens, 0, eos_id, sampler) for t in step]


@dataclass
class Counts:
    """What a decoding stream did so far. proposed/accepted: draft tokens offered and taken. target_calls: target
    forward calls, the prompt's included."""

    proposed: int = 0
    accepted: int = 0
    target_calls: int = 0
    draft_calls: int = 0


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
                eos_id=None, reference: Sequence[int] | None = None, sampler: Sampler = GREEDY,
                draft_sampler: Sampler | None = None) -> SpeculativeResult:
    """Speculative decoding of up to n_tokens new tokens (stopping after a token of eos_id); see `stream`."""
    _require_count("speculative", "k", k)
    counts = Counts()
    tokens = [t for step in stream(target, draft, prompt_ids, n_tokens, k, eos_id, sampler, draft_sampler, counts)
              for t in step]
    first = first_difference(tokens, reference) if reference is not None else None
    return SpeculativeResult(tokens, counts.proposed, counts.accepted, counts.target_calls, counts.draft_calls,
                             first)


def stream(target: DecoderModel, draft: DecoderModel | None, prompt_ids: Sequence[int], n_tokens: int, k: int,
           eos_id=None, sampler: Sampler = GREEDY, draft_sampler: Sampler | None = None,
           counts: Counts | None = None) -> Iterator[list[int]]:
    """Decodes up to n_tokens new tokens, yielding the tokens each target call commits, and stops after a token
    of eos_id. The token at absolute position p is sampler.choose(logits of position p - 1, p).

    draft None: one target call per token (M = 1) after the prompt. Otherwise speculative: each round the draft
    proposes up to k tokens (chosen by draft_sampler, by default `sampler` itself, whose noise at a position is the
    target's: a draft close to the target then proposes the target's token more often); the target scores the
    pending token and the proposals in ONE forward call (M = k + 1); the longest prefix of proposals equal to the
    target's own choices is kept, plus the target's choice after it. Both caches are rolled back to what was kept.
    Since a choice depends only on (its logits, seed, position), the output is the draft-less one whenever the
    target's logits do not depend on M (mtlinv's limit >= k + 1). target and draft must be separate instances
    (each owns its cache), even when they share weights.
    """
    what = "greedy" if draft is None else "speculative"  # the arguments are checked now, not at the first next()
    if len(prompt_ids) == 0:
        raise ValueError(f"{what} needs a non-empty prompt")
    _require_count(what, "n_tokens", n_tokens)
    if draft is not None:
        _require_count(what, "k", k)
        if target is draft:
            raise ValueError("target and draft must be separate model instances: each needs its own KV cache")
    return _rounds(target, draft, list(prompt_ids), n_tokens, k, _stop_ids(eos_id), sampler,
                   draft_sampler if draft_sampler is not None else sampler, counts if counts is not None else Counts())


def _rounds(target, draft, prompt_ids, n_tokens, k, stops, sampler, draft_sampler, counts) -> Iterator[list[int]]:
    target.rollback(0)
    ctx = list(prompt_ids)  # every committed token; the last one is "pending": not yet in the target's cache
    out_start = len(prompt_ids)
    ctx.append(sampler.choose(target.forward(prompt_ids, 0)[-1], out_start))
    counts.target_calls += 1
    yield ctx[-1:]
    if draft is not None:
        # The draft prefills the prompt with the very call the target made (same tokens, same M), so a self-draft's
        # cache holds the target's bits and every later rejection is a kernel effect of the verification call alone.
        draft.rollback(0)
        draft.forward(prompt_ids, 0)
        counts.draft_calls += 1
    draft_len = len(prompt_ids)  # positions of ctx in the draft's cache
    while len(ctx) - out_start < n_tokens and ctx[-1] not in stops:
        pos = len(ctx) - 1
        n_draft = min(k, n_tokens - (len(ctx) - out_start) - 1) if draft is not None else 0  # none past the end
        proposals: list[int] = []
        if n_draft:
            # The draft first catches up on committed tokens it has not seen (the pending one, and after a
            # fully accepted round also the last proposal, which it never had to run).
            proposals.append(draft_sampler.choose(draft.forward(ctx[draft_len:], draft_len)[-1], pos + 1))
            counts.draft_calls += 1
            while len(proposals) < n_draft:
                at = pos + len(proposals)
                proposals.append(draft_sampler.choose(draft.forward(proposals[-1:], at)[0], at + 1))
                counts.draft_calls += 1
        choices = sampler(target.forward([ctx[-1], *proposals], pos), range(pos + 1, pos + 2 + len(proposals)))
        counts.target_calls += 1
        n_ok = 0
        while n_ok < len(proposals) and proposals[n_ok] == choices[n_ok] and proposals[n_ok] not in stops:
            n_ok += 1
        kept = proposals[:n_ok] + [choices[n_ok]]
        ctx += kept
        counts.proposed += len(proposals)
        counts.accepted += n_ok
        target.rollback(pos + 1 + n_ok)
        if proposals:
            draft_len = min(pos + len(proposals), pos + 1 + n_ok)
            draft.rollback(draft_len)
        yield kept


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First index where a and b differ (a length difference counts at the shorter length); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))
