// Argument struct of the quantized matmul kernels (metal/qgemv.metal), shared by the host and the kernels.
// 4-byte scalars only, so the layout is identical on every target (size static_assert'ed in
// src/core/plans/qgemv.cpp).
#pragma once
#ifndef __METAL_VERSION__
#include <cstdint>
#endif

// qgemv: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) with W(n, k) = scales[n, g] * q(n, k) + biases[n, g],
// g = k / group_size, q unpacked from wq [N, K * bits / 32] (MLX's affine format). The bit width is a template
// parameter of the kernels (one kernel per width), the group size a runtime value.
struct QGemvArgs {
  uint32_t rows;          // M: rows of x (all leading dimensions of x flattened)
  uint32_t k;             // reduced extent, a multiple of group_size
  uint32_t n;             // outputs per row
  uint32_t group_size;    // 32, 64 or 128: K positions sharing one scale and bias
  uint32_t k_splits;      // simdgroups sharing one output tile's K range (canonical kernel); from K and the device
  uint32_t has_bias;      // 1: add bias[n] in the epilogue
  uint32_t vector_loads;  // 1: x starts 16-byte aligned, full vectors of it may be loaded at once
  uint32_t w_vector_loads;  // 1: wq starts 16-byte aligned (qgemv loads runs of 4- and 8-bit words 16 bytes at once)
};
