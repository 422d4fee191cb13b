"""Kinds of Python scalar arguments, shared by the pure-Python modules (the ops check theirs in pyx/arguments.pxi).
A bool is an int to isinstance (True == 1), so each excludes it explicitly."""
import numpy as np


def is_int(value) -> bool:
    """An int or a NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """An int, a float or a NumPy number of either kind, not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
