// The affine quantized format of mtlinv.quant (MLX's): W(n, k) = scales[n, g] * q(n, k) + biases[n, g], with
// g = k / group_size and q the BITS-bit value at bits [k * BITS, (k + 1) * BITS) of row n's little-endian stream
// of uint32 words (wq [N, K * BITS / 32]). The dequantisation shared by qgemv (metal/qgemv.metal) and qgemm
// (metal/qgemm.metal).
#pragma once
#include "common.h"

// float(q), exactly, for q < 2^23, without an integer-to-float conversion (a quarter-rate instruction on NVIDIA
// GPUs, where it bounded qgemv): q placed in the mantissa of 2^23 is the float 2^23 + q, and subtracting 2^23 is
// exact.
inline float quant_float(uint q) {
  return as_type<float>(q | 0x4B000000u) - 8388608.0f;
}

// The dequantisation of every quantized kernel, and of mtlinv.quant.dequantize_float32: scale * q + bias in
// float32, the product rounded before the add. Two roundings rather than an fma because that is the value the
// Python format helpers and the lossless GGUF importers reproduce; the kernels are compiled without contraction
// (design.md §2 rule 4), so no target fuses it. S is the type the scales are stored in.
template <typename S>
inline float quant_dequantize(float scale, uint q, float bias) {
  return scale * quant_float(q) + bias;
}

// A half scale has at most 11 significant bits and q at most 8, and their product is below 2^24: scale * q is exact
// in float32 and rounds to itself, so an fma gives the same float in one instruction. (Not for bfloat scales: their
// product with q can overflow float32, where the fma could still return a finite value.)
template <>
inline float quant_dequantize<half>(float scale, uint q, float bias) {
  return fma(scale, quant_float(q), bias);
}
