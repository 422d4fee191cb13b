"""Audit cases of the ops beyond gemv and rms_norm (quantized matmul, attention)."""
from __future__ import annotations


def extra_cases(quick: bool) -> list:
    return []
