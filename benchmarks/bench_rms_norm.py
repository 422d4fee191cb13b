"""rms_norm on the active device next to NumPy, on a 4096x4096 float32 input.

    python benchmarks/bench_rms_norm.py
"""
import numpy as np

import mtlinv
from timing import median_seconds, ms


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 4096)).astype(np.float32)
    w = rng.standard_normal(4096).astype(np.float32)
    tx, tw = mtlinv.asarray(x), mtlinv.asarray(w)

    def numpy_rms_norm():
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    t_dev = median_seconds(lambda: mtlinv.rms_norm(tx, tw, 1e-6))
    t_np = median_seconds(numpy_rms_norm)
    info = mtlinv.device_info()
    print(f"rms_norm 4096x4096 float32 on {info['backend']} ({info['name']})")
    print(f"  mtlinv {ms(t_dev)} ms   numpy {ms(t_np)} ms   mtlinv/numpy {t_dev / t_np:6.2f}x")


if __name__ == "__main__":
    main()
