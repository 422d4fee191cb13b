"""What every case of `mtlinv check` is made of: the dtypes it audits, a case record, and the row check."""
from __future__ import annotations

import dataclasses
from typing import Callable

import ml_dtypes
import numpy as np

import mtlinv

DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


@dataclasses.dataclass
class Case:
    op: str
    desc: str
    run: Callable[[int], tuple[bool, str]]  # limit -> (passed, detail)


def rows_invariant(call: Callable[[np.ndarray], np.ndarray], x: np.ndarray, limit: int) -> tuple[bool, str]:
    """call(x[:m]) row r == call(x[r:r+1]) for every m <= limit and r < m. x is [rows, ...]."""
    singles = [np.asarray(call(x[r:r + 1])) for r in range(limit)]
    with mtlinv.batch_invariant(limit):
        for m in range(1, limit + 1):
            full = np.asarray(call(x[:m]))
            for r in range(m):
                if full[r:r + 1].tobytes() != singles[r].tobytes():
                    return False, f"M={m} row {r} differs from the row alone"
    return True, f"M=1..{limit}, every row"
