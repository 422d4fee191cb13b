"""Timing helpers shared by the benchmark scripts: warm-up, then repeated wall-clock runs; copy bandwidth."""
import importlib
import statistics
import time

import mtlinv


def median_seconds(fn, **kwargs):
    """Median wall time of fn() (sample_seconds)."""
    return statistics.median(sample_seconds(fn, **kwargs))


def sample_seconds(fn, *, repeat=5, warmup=1, min_time=0.0):
    """Wall times of fn() over `repeat` runs after `warmup` runs (more runs until `min_time` passes)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


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


def device_copy_bandwidth(torch, nbytes=2 << 30, reps=20):
    """A device-to-device copy through torch on the current CUDA device, bytes read + written per second (the
    memory-bound ceiling): the median of `reps` copies, each timed by an event pair, after one to warm up."""
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_()
    times = []
    for _ in range(reps + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del a, b
    return 2 * nbytes / statistics.median(times[1:])


def host_copy_bandwidth(nbytes=256 << 20, reps=5):
    """numpy's copy of a 256 MiB array, bytes read + written per second: the ceiling where the device is the CPU
    (the emulator), or a unified memory that the host shares."""
    import numpy as np

    a = np.ones(nbytes, np.uint8)
    b = np.empty_like(a)
    return 2 * nbytes / median_seconds(lambda: np.copyto(b, a), repeat=reps)


def mlx_core():
    """mlx.core when MLX is installed (the GPU on a Mac; the CPU with mlx[cpu] on Linux), else None: the scripts'
    peer on the machines mtlinv is for."""
    try:
        import mlx.core as mx
    except ImportError:
        return None
    return mx


def peer_copy_bandwidth(mx):
    """Copy bandwidth where the peer runs, bytes read + written per second: on MLX's GPU (a Mac's unified memory,
    which the CPU alone does not saturate) its elementwise add of 256 MiB, a read and a write of each byte as a
    copy; else numpy's copy on the host."""
    if mx is None or mx.default_device() != mx.gpu:
        return host_copy_bandwidth()
    nbytes = 256 << 20
    a = mx.ones((nbytes,), dtype=mx.uint8)
    mx.eval(a)
    return 2 * nbytes / median_seconds(lambda: mx.eval(a + 1), repeat=5)


def peer(fallback="numpy f32"):
    """(mlx.core or None, the peer's name for the tables, the copy bandwidth where it runs)."""
    mx = mlx_core()
    return mx, f"MLX ({mx.default_device()})" if mx else fallback, peer_copy_bandwidth(mx)
