"""A context manager over the process-wide batch-invariance limit."""
from contextlib import contextmanager

from ._native import get_limit, set_limit


@contextmanager
def batch_invariant(limit: int):
    """Runs the block with the batch-invariance limit set to `limit`, then restores the previous value."""
    previous = set_limit(limit)
    try:
        yield limit
    finally:
        set_limit(previous)


__all__ = ["batch_invariant", "get_limit", "set_limit"]
