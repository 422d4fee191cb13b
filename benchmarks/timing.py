"""Timing helpers shared by the benchmark scripts: warm-up, then the median of repeated wall-clock runs."""
import importlib
import statistics
import time

import mtlinv


def median_seconds(fn, *, repeat=5, warmup=1, min_time=0.0):
    """Median wall time of fn() over `repeat` runs after `warmup` runs (more runs until `min_time` passes)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def ms(seconds):
    return f"{seconds * 1e3:9.3f}"


def cuda_module(name):
    """The module `name` (torch, cupy) when mtlinv runs on CUDA and it is installed, else None: the scripts'
    optional GPU-side baselines."""
    if mtlinv.device_info()["backend"] != "cuda":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
