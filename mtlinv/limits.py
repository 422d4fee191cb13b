"""Scopes of the batch-invariance limit: `with batch_invariant(n)` overrides the process value (set_limit) for the
calling thread or asyncio task alone."""
from contextlib import contextmanager

from ._native import _enter_limit_scope, _exit_limit_scope, get_limit, set_limit


@contextmanager
def batch_invariant(limit: int):
    """Runs the block with the batch-invariance limit `limit` (in [0, 2^30]) in the calling context: the ops it
    calls, on this thread or in this asyncio task, take `limit`, while other threads and tasks keep theirs and the
    process value stays as it was. Scopes nest; leaving one restores what the context saw before. The value lives
    in a contextvars.ContextVar: a task created inside the block starts with it, a new thread starts without it."""
    token = _enter_limit_scope(limit)
    try:
        yield limit
    finally:
        _exit_limit_scope(token)


__all__ = ["batch_invariant", "get_limit", "set_limit"]
