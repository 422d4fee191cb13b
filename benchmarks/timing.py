"""Timing helpers shared by the benchmark scripts: warm-up, then the median of repeated wall-clock runs."""
import statistics
import time


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
