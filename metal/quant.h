// The affine quantized format of mtlinv.quant (MLX's): W(n, k) = scales[n, g] * q(n, k) + biases[n, g], with
// g = k / group_size and q the BITS-bit value at bits [k * BITS, (k + 1) * BITS) of row n's little-endian stream
// of uint32 words (wq [N, K * BITS / 32]). The dequantisation shared by qgemv (metal/qgemv.metal) and qgemm
// (metal/qgemm.metal), and the packed one of qgemv_mma (metal/qgemv_mma.metal).
#pragma once
#include "common.h"
#include "pair16.h"

// float(q), exactly, for q < 2^23, without an integer-to-float conversion (a quarter-rate instruction on NVIDIA
// GPUs, where it bounded qgemv): q placed in the mantissa of 2^23 is the float 2^23 + q, and subtracting 2^23 is
// exact.
inline float quant_float(uint q) {
  return as_type<float>(q | 0x4B000000u) - 8388608.0f;
}

// The dequantisation of every quantized kernel, and of mtlinv.quant.dequantize_float32: scale * q + bias in
// float32, the product rounded before the add. Two roundings rather than an fma because that is the value the
// Python format helpers and the lossless GGUF importers reproduce; the kernels are compiled without contraction
// (design.md §2 rule 4), so no target fuses it. S is the type the scales are stored in. On a GPU that flushes
// float32 subnormals (docs/kernel_guide.md, "Subnormals"), a float32 or bfloat scale, bias or weight below 2^-126
// becomes 0; nothing else does (with q >= 1, scale * q is at least the scale).
template <typename S>
inline float quant_dequantize(float scale, uint q, float bias) {
  return scale * quant_float(q) + bias;
}

// An int8 code (stored as char, whose signedness C++ targets choose differently: its bits are read as uchar) as
// the float it stands for, exactly: the code plus 128 is an unsigned byte, quant_float'ed, minus 128.
inline float quant_int8(char code) {
  return quant_float(uint(uchar(code)) ^ 0x80u) - 128.0f;
}

// A group's scale and bias as a kernel reads them: group i's values of scales and biases, as stored (S: float, half
// or bfloat). In the super-block form (S = char: GGUF's Q4_K, Q5_K and Q6_K at their own bytes, mtlinv.gguf_kquants)
// scales and biases are int8 codes, and super-block s (QGEMV_SUPER values of a row) has the factors supers[2 s] and
// supers[2 s + 1]: the scale is supers[2 s] * code and the bias supers[2 s + 1] * code', each rounded to float32,
// then the weight quant_dequantize<float>'s. For a K-quant block both products are exact (a float16 factor, 11
// significant bits, times a code of at most 8), so the weights are those of the float32 import, bit for bit.
template <typename S>
struct QuantGroups {
  static S scale(device const S* scales, device const float*, uint i, uint) { return scales[i]; }
  static S bias(device const S* biases, device const float*, uint i, uint) { return biases[i]; }
};
template <>
struct QuantGroups<char> {
  static float scale(device const char* scales, device const float* supers, uint i, uint s) {
    return supers[2 * s] * quant_int8(scales[i]);
  }
  static float bias(device const char* biases, device const float* supers, uint i, uint s) {
    return supers[2 * s + 1] * quant_int8(biases[i]);
  }
};

// A half scale has at most 11 significant bits and q at most 8, and their product is below 2^24: scale * q is exact
// in float32 and rounds to itself, so an fma gives the same float in one instruction. Both it and the sum with a
// half bias are multiples of 2^-24, however tiny the scale (half subnormals included), so neither is a float32
// subnormal that a GPU could flush. (Not for bfloat scales: their product with q can overflow float32, where the
// fma could still return a finite value.)
template <>
inline float quant_dequantize<half>(float scale, uint q, float bias) {
  return fma(scale, quant_float(q), bias);
}

// The mask of two BITS-bit codes in bits [0, BITS) and [16, 16 + BITS) of a word.
inline uint quant_code_mask(uint bits) {
  return ((1u << bits) - 1u) * 0x10001u;
}

// Two codes, in bits [0, BITS) and [16, 16 + BITS) of `pair` (bits above them ignored), as the 16-bit pair
// (T(q_a), T(q_b)), exactly. A code placed in the mantissa of 2^m (m: T's mantissa bits, 10 for half, 7 for bfloat)
// is the T value 2^m + q for q < 2^m, and subtracting 2^m is exact: one masking logic instruction and one packed add
// per pair. bfloat's 7 bits hold codes of at most 7 bits; its 8-bit codes take one more step (below).
template <typename T, uint BITS>
struct QuantCodePair;
template <uint BITS>
struct QuantCodePair<half, BITS> {
  static uint exact(uint pair) {
    return pair16_add<half>(pair16_and_or(pair, quant_code_mask(BITS), 0x64006400u), 0xE400E400u);  // 1024 + q - 1024
  }
};
template <uint BITS>
struct QuantCodePair<bfloat, BITS> {
  static uint exact(uint pair) {
    return pair16_add<bfloat>(pair16_and_or(pair, quant_code_mask(BITS), 0x43004300u), 0xC300C300u);  // 128 + q - 128
  }
};
// An 8-bit code's low 7 bits in the mantissa of 2^7 give 128 + (q & 127); what the packed add then subtracts follows
// the code's bit 7: 128 where it is clear (q < 128), +0 where it is set (q = 128 + (q & 127)). Both sums are exact
// (q < 256 has 8 significant bits, bfloat's precision): T(q) in four instructions a pair, where the float32 route
// (quant_float twice, then a pack) takes about seven (docs/decisions.md, "qgemv: 8-bit codes in bfloat16"). The
// subtrahend is the clear bit times 0x186: 0x80 -> 0xC300, bfloat's -128, within its half.
template <>
struct QuantCodePair<bfloat, 8> {
  static uint exact(uint pair) {
    const uint low = pair16_and_or(pair, 0x007F007Fu, 0x43004300u);  // 128 + (q & 127)
    const uint minus128 = (~pair & 0x00800080u) * 0x186u;           // -128 where q < 128, else +0
    return pair16_add<bfloat>(low, minus128);
  }
};

// The dequantisation of two values (codes as QuantCodePair takes them) whose scales and biases are of their own
// type T (scale2, bias2: each splat to a pair): T(scale q + bias), the exact value rounded once, as an fma in T
// computes it: one packed instruction per pair after the codes' conversion. (mlx.core.dequantize rounds the product
// first; one rounding is both cheaper here and closer to the float32 weight.)
template <typename T, uint BITS>
inline uint quant_dequantize_pair(uint codes, uint scale2, uint bias2) {
  return pair16_fma<T>(scale2, QuantCodePair<T, BITS>::exact(codes), bias2);
}
