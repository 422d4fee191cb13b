// Affine quantized weights in MLX's format, the layout qgemv consumes, made and read on the host: one
// implementation behind Python (mtlinv.quant), C (mtlinv_quantize, ...) and C++.
//
// A weight [rows, K] is quantized along K in groups of group_size (16, 32, 64 or 128) consecutive elements. Each group
// has one scale and one bias in the weight's dtype (float32, float16 or bfloat16) and stores integers
// q in [0, 2^bits - 1] (bits 2, 3, 4, 5, 6 or 8) so that w ~= scale * q + bias. The q of a row form one
// little-endian bit stream (element k at bits [k*bits, (k+1)*bits)) stored as K*bits/32 uint32 words; for bits 3,
// 5 and 6 a value may straddle two words.
//
// quantize and dequantize give the bits of mlx.core.quantize / dequantize (mode "affine", CPU backend, MLX 0.32;
// MLX refuses group_size 16, which the same per-group arithmetic serves here: qgemv's exact import of GGUF Q6_K):
// float32 arithmetic with one rounding per operation (never contracted), scale and bias rounded to the dtype only
// when stored. dequantize_float32 is the float32 dequantisation a float32-accumulating kernel performs
// (float32(scale) * q + float32(bias)). tests/ops/test_quant_format.py checks every function against a NumPy
// reference, bit for bit.
//
// Host memory, row-major; outputs must not overlap inputs. Every function throws InvalidArgument naming the
// argument for an unsupported bits or group_size, a K that is not a multiple of group_size (0 is: no columns), a
// size past 64 bits or a NULL pointer where there is data, and DTypeError for a dtype other than the three
// floats. Each call touches only its arguments: calls may run on any threads at once.
#pragma once
#include <cstdint>

#include "dtype.h"

namespace mtlinv {

// Throws InvalidArgument (naming `fn`) unless bits is 2, 3, 4, 5, 6 or 8 and group_size 16, 32, 64 or 128.
void check_quant_params(const char* fn, int group_size, int bits);
// uint32 words of a packed row of K values (K*bits/32), after the checks above and of K (a multiple of
// group_size, or 0); rows * K must fit 64 bits.
int64_t quant_row_words(const char* fn, int64_t rows, int64_t k, int group_size, int bits);

// w [rows, K] of dtype -> wq [rows, K*bits/32], scales and biases [rows, K/group_size] of dtype. Throws
// InvalidArgument when w holds an infinity or NaN, or a group's max - min overflows float32 (MLX would store an
// infinite scale and dequantize the group to NaN); the outputs are then unspecified.
void quantize(const void* w, DType dtype, int64_t rows, int64_t k, int group_size, int bits, uint32_t* wq,
              void* scales, void* biases);
// wq [rows, K*bits/32], scales and biases [rows, K/group_size] of dtype -> out [rows, K] of dtype.
void dequantize(const uint32_t* wq, const void* scales, const void* biases, DType dtype, int64_t rows, int64_t k,
                int group_size, int bits, void* out);
// The same, out float32 [rows, K].
void dequantize_float32(const uint32_t* wq, const void* scales, const void* biases, DType dtype, int64_t rows,
                        int64_t k, int group_size, int bits, float* out);

// The bit stream alone: q [rows, K] (values below 2^bits, K a multiple of 32) -> wq [rows, K*bits/32], and back.
// pack throws InvalidArgument naming the first value of 2^bits or more.
void pack_bits(const uint8_t* q, int64_t rows, int64_t k, int bits, uint32_t* wq);
void unpack_bits(const uint32_t* wq, int64_t rows, int64_t k, int bits, uint8_t* q);

}  // namespace mtlinv
