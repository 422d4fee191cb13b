#pragma once
#include <vector>

#include "../tensor.h"

namespace mtlinv {

// y = a + b (same shape and dtype).
Tensor add(const Tensor& a, const Tensor& b);
// y = silu(gate) * up (same shape and dtype).
Tensor swiglu(const Tensor& gate, const Tensor& up);
// x [L, 2 F] (a stacked gate|up projection's output) -> swiglu(x[:, :F], x[:, F:]) [L, F], the same bits.
Tensor swiglu_halves(const Tensor& x);
// Writes x [L, H, D] into dst [H, C, D] at sequence indices seq_offset .. seq_offset + L - 1, rotating pairs
// (x[2j], x[2j+1]) for positions start_pos + l when `rotate` (llama GGUF RoPE, frequency base^(-2j/D)). dst is
// written in place: a KV cache, or a fresh [H, L, D] query tensor with seq_offset 0.
// `op` names the caller's op in errors (write_heads, or rope_heads, which writes through it).
void write_heads(const Tensor& x, const Tensor& dst, int64_t seq_offset, int64_t start_pos, bool rotate, double base,
                 const char* op = "write_heads");
// A fused q|k|v projection's output x [L, q_heads + 2 Hkv, D] -> the rotated queries [q_heads, L, D] (returned);
// rotated keys and unrotated values written into k_dst and v_dst [Hkv, C, D] at sequence indices seq_offset..: the
// bits of rope_heads and two write_heads calls, in one launch. With `freqs` (float32 [D / 2], on the device) pair j
// turns by p * freqs[j] instead of p * base^(-2j/D) (base is then unused): a scaled RoPE (Llama 3's), whose table
// the caller computes once. Its values are not read here (that would wait for the device at every call): make them
// with rope_freqs, which checks them.
Tensor qkv_to_heads(const Tensor& x, int64_t q_heads, const Tensor& k_dst, const Tensor& v_dst, int64_t seq_offset,
                    int64_t start_pos, double base, const Tensor* freqs = nullptr);
// A RoPE frequency table as qkv_to_heads takes it: float32 [D / 2] on the device, from values that must each be in
// (0, 1] (as base^(-2j/D) is for base >= 1: every angle stays below 2^32, finite; rope_base says why); throws
// InvalidArgument naming `op` and the first value outside.
Tensor rope_freqs(const char* op, const char* arg, const std::vector<float>& freqs);
// A RoPE base as the kernels take it, float32: throws InvalidArgument naming `op` and `arg` unless base is in
// [1, FLT_MAX]. The kernels rotate pair j of position p by p * base^(-2j/D). From 1 up every frequency is at most 1
// and every angle below 2^32, finite on every backend; below 1 the frequencies reach base^(-(D-2)/D), nearly
// 1/base, so a subnormal base makes them infinite from D = 16 (NaN results), and a small normal one overflows the
// angles of late positions (from base ~ 2^-96). No RoPE model uses a base below 1, which would turn its slowest
// pair fastest.
float rope_base(const char* op, const char* arg, double base);
// x [H, L, D] -> [L, H * D].
Tensor heads_to_rows(const Tensor& x);
// table [V, D], ids (int32/uint32) [L] -> [L, D]; ids outside [0, V) are an error.
Tensor embedding(const Tensor& table, const Tensor& ids);
// The same with ids on the host, checked there and uploaded as uint32: the Tensor form reads its ids back from
// the device to check them, this one checks them before they go there.
Tensor embedding(const Tensor& table, const std::vector<int64_t>& ids);

}  // namespace mtlinv
