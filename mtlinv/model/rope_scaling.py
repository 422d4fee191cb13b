"""RoPE frequency tables of scaled RoPEs, computed once on the host in float64 (the decoder takes them as float32,
the float64 reference as they are). Pair j of a head of D dims turns by p * freqs[j] at position p; unscaled,
freqs[j] = base^(-2j/D).

Supported: Llama 3's `rope_type: llama3` (as mlx-lm's Llama3RoPE and Hugging Face's compute it: long wavelengths
slowed by `factor`, short ones kept, a smooth blend between), `linear` (every frequency divided by `factor`), and
llama.cpp's `rope_freqs.weight` (per-pair divisors, which its converter writes for Llama 3). Other rope types
(yarn, dynamic, longrope, ...) are refused by name.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


class RopeScalingError(ValueError):
    """A rope scaling this package does not run, or one with bad parameters (names the key and value)."""


SUPPORTED_TYPES = ("default", "linear", "llama3")


def base_frequencies(head_dim: int, base: float) -> np.ndarray:
    """base^(-2j/D) for j < D/2, float64."""
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def _positive(scaling: Mapping, key: str, default=None) -> float:
    v = scaling.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise RopeScalingError(f"rope_scaling {key}={v!r} must be a positive finite number")
    return float(v)


def scaled_frequencies(head_dim: int, base: float, scaling: Mapping | None) -> tuple[float, ...] | None:
    """The frequency table of a config.json `rope_scaling` (None or type `default`: None, the plain RoPE)."""
    if not scaling:
        return None
    kind = scaling.get("type") or scaling.get("rope_type", "default")  # mlx-lm's initialize_rope reads them so
    if kind == "default":
        return None
    freqs = base_frequencies(head_dim, base)
    if kind == "linear":
        factor = _positive(scaling, "factor")
        if factor < 1:  # the decoder takes frequencies in (0, 1]; a factor below 1 would speed the rotation up
            raise RopeScalingError(f"rope_scaling factor={factor} of type 'linear' must be >= 1")
        return tuple(freqs / factor)
    if kind != "llama3":
        raise RopeScalingError(f"rope_scaling type {kind!r} is not supported; supported: {', '.join(SUPPORTED_TYPES)}")
    factor = _positive(scaling, "factor")
    low = _positive(scaling, "low_freq_factor", 1.0)
    high = _positive(scaling, "high_freq_factor", 4.0)
    old_context = _positive(scaling, "original_max_position_embeddings", 8192)
    if not high > low:
        raise RopeScalingError(f"rope_scaling high_freq_factor={high} must exceed low_freq_factor={low}")
    # mlx-lm's Llama3RoPE, in periods (1 / frequency): long wavelengths slowed by `factor`, short ones kept, those
    # between blended.
    periods = 1.0 / freqs
    wavelens = 2 * math.pi * periods
    periods = np.where(wavelens > old_context / low, periods * factor, periods)
    medium = (wavelens > old_context / high) & (wavelens < old_context / low)
    smooth = (old_context / wavelens - low) / (high - low)
    periods = np.where(medium, periods / ((1 - smooth) / factor + smooth), periods)
    return tuple(1.0 / periods)


def divided_frequencies(head_dim: int, base: float, divisors: Sequence[float]) -> tuple[float, ...]:
    """llama.cpp's rope_freqs.weight: pair j turns by base^(-2j/D) / divisors[j] (ggml's freq_factors)."""
    d = np.asarray(divisors, np.float64)
    if d.shape != (head_dim // 2,) or not np.all(np.isfinite(d)) or not np.all(d >= 1):
        raise RopeScalingError(f"rope_freqs.weight must hold {head_dim // 2} finite divisors of at least 1, got "
                               f"shape {d.shape}, min {d.min() if d.size else None}")
    return tuple(base_frequencies(head_dim, base) / d)
