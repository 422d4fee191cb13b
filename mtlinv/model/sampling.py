"""Seeded sampling whose randomness depends only on (seed, position): the token at absolute position p is

    argmax over the kept tokens i of  logits[i] / T + g_i(seed, p)

with g(seed, p) a vector of standard Gumbel noise drawn from a counter-based stream keyed by (seed, p) alone
(the Gumbel-max trick: this argmax is distributed as softmax(logits / T) over the kept tokens). The kept set
(top-k, top-p, min-p) is a function of the logits only, never of the noise.

So the choice at position p is a pure function of (that position's logits, seed, p). A speculative run that
verifies a proposal at position p from logits with the same bits as plain decoding's (mtlinv's limit k+1 makes
them so) accepts it exactly when plain sampling would have produced it, and otherwise produces plain sampling's
own token there: speculative and plain sampling give identical sequences for a seed. A sampler that draws from
one running random stream (as mlx-lm's read a process-global state) cannot: the number of draws before position
p depends on how many tokens each verification call scored.

The noise is float64 from NumPy's PCG64 raw output (a stable stream) through NumPy's log; the logits are
widened to float64 before the division by T. Two runs on one machine therefore choose alike; another machine's
libm could, in a tie to the last bit of float64, choose otherwise.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._kinds import is_int, is_real

_SEED_LIMIT = 1 << 64
# The smallest temperature above 0: float32 logits (at most 3.4e38 in size) divided by it stay finite in float64
# (at most 1.8e308). A smaller one made logits / T infinite, and the argmax of the infinities chose token 0.
MIN_TEMPERATURE = 1e-200


def gumbel(seed: int, position: int, n: int) -> np.ndarray:
    """n standard Gumbel variates (float64) that depend only on (seed, position)."""
    raw = np.random.PCG64(np.random.SeedSequence([seed, position])).random_raw(n)
    u = ((raw >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53  # in (0, 1): no log(0)
    return -np.log(-np.log(u))


@dataclass(frozen=True)
class Sampler:
    """How a token is chosen from one position's logits.

    temperature 0: greedy (the first of the largest logits). Otherwise the kept tokens are the top_k (0: all)
    largest logits, ties at the k-th value kept; among them, with probabilities p = softmax(logits / T) over these
    top-k tokens, the smallest set of most probable ones whose p reaches top_p (1.0: all; among equal p, lower ids
    first), less those whose p is below min_p times the largest (0.0: none). The token is drawn from
    softmax(logits / T) renormalised over the kept set, with the noise of (seed, position).
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0

    def __post_init__(self):
        t = self.temperature
        if not is_real(t) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        if 0 < t < MIN_TEMPERATURE:
            raise ValueError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g}, got {t!r}")
        if not is_int(self.top_k) or self.top_k < 0:
            raise ValueError(f"top_k must be an int >= 0 (0: no top-k), got {self.top_k!r}")
        if not is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not is_real(self.min_p) or not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p!r}")
        if not is_int(self.seed) or not 0 <= self.seed < _SEED_LIMIT:
            raise ValueError(f"seed must be an int in [0, 2^64), got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def kept(self, logits) -> np.ndarray:
        """Boolean mask [V] of the tokens that may be drawn from one position's logits (all True when greedy)."""
        x = np.asarray(logits, np.float64)
        keep = np.ones(x.shape, bool)
        if self.greedy:
            return keep
        if 0 < self.top_k < x.size:
            keep &= x >= np.partition(x, x.size - self.top_k)[x.size - self.top_k]
        if self.top_p < 1.0 or self.min_p > 0.0:
            p = _softmax(np.where(keep, x / self.temperature, -np.inf))
            if self.top_p < 1.0:
                order = np.lexsort((np.arange(x.size), -p))  # most probable first, lower id first among equals
                before = np.cumsum(p[order]) - p[order]  # probability of the tokens ahead of each one
                keep[order[before >= self.top_p]] = False
            if self.min_p > 0.0:
                keep &= p >= self.min_p * p.max()
        return keep

    def choose(self, logits, position: int) -> int:
        """The token at absolute position `position` drawn from that position's logits [V]."""
        x = np.asarray(logits, np.float64)
        if self.greedy:
            return int(np.argmax(x))
        score = x / self.temperature + gumbel(self.seed, position, x.size)
        return int(np.argmax(np.where(self.kept(x), score, -np.inf)))

    def __call__(self, logits, positions: Sequence[int]) -> list[int]:
        """One token per row of logits [M, V]; row i gives the token at positions[i]."""
        rows = np.asarray(logits)
        if len(positions) != rows.shape[0]:
            raise ValueError(f"{rows.shape[0]} rows of logits for {len(positions)} positions")
        return [self.choose(row, int(p)) for row, p in zip(rows, positions)]


GREEDY = Sampler()


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()
