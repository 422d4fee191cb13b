// Arithmetic on pairs of 16-bit floats (half or bfloat) packed in a uint, element 0 in the low half: each result
// rounded to T once, as one packed instruction computes it on GPUs with 16-bit pair arithmetic (NVIDIA's
// HADD2/HFMA2, Apple's half2). A packed instruction handles two values: qgemv_mma (metal/qgemv_mma.metal)
// dequantises with them in less than half the instructions of float32 arithmetic.
//
//   pair16_add<T>(a, b) = (T(a0 + b0), T(a1 + b1))
//   pair16_fma<T>(a, b, c) = (T(a0 b0 + c0), T(a1 b1 + c1))   the exact a b + c, rounded once
//
// and two bit operations that build pairs, which compilers do not always turn into the single instruction NVIDIA
// GPUs have for them (LOP3, PRMT):
//
//   pair16_and_or(a, mask, bits) = (a & mask) | bits
//   pair16_interleave(a, b) = ((a0, b0), (a1, b1)), the 16-bit halves of a and b regrouped
//
// This fallback (emulator, Metal) computes in float32 and gives the correctly rounded results. A sum rounded to
// float32 and then to T is rounded correctly, since float32's 24 bits are at least 2p + 1 for p = 11 (half) and
// p = 8 (bfloat). For the fma that is not enough (a b has up to 22 significant bits, and a b + c rounded to float32
// can land on a tie of T that the exact value is not on), so the float32 sum is rounded to odd first (an exact
// two-sum tells whether it was rounded, and which way), which a later rounding to T, 13 or more bits shorter,
// turns into the correct rounding (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved
// algorithms using rounding to odd", 2008). The CUDA shim replaces the fallback (src/cuda/shim/pair16.cuh, which
// defines MTLINV_TARGET_PAIR16) with packed instructions, which round once: the same bits.
#pragma once
#include "common.h"

// (T(lo), T(hi)) packed.
template <typename T>
inline uint pair16_pack(float lo, float hi) {
  static_assert(sizeof(T) == 2, "pair16 packs 16-bit elements");
  return uint(as_type<ushort>(T(lo))) | (uint(as_type<ushort>(T(hi))) << 16);
}

// (x, x) packed, for an x already of type T (no rounding).
template <typename T>
inline uint pair16_splat(T x) {
  return uint(as_type<ushort>(x)) * 0x10001u;
}

#if !defined(MTLINV_TARGET_PAIR16)
inline uint pair16_and_or(uint a, uint mask, uint bits) {
  return (a & mask) | bits;
}

inline uint2 pair16_interleave(uint a, uint b) {
  return uint2((a & 0xFFFFu) | (b << 16), (a >> 16) | (b & 0xFFFF0000u));
}

template <typename T>
inline float2 pair16_widen(uint p) {
  return float2(float(as_type<T>(ushort(p & 0xFFFFu))), float(as_type<T>(ushort(p >> 16))));
}

template <typename T>
inline uint pair16_add(uint a, uint b) {
  const float2 s = pair16_widen<T>(a) + pair16_widen<T>(b);
  return pair16_pack<T>(s.x, s.y);
}

// p + c rounded to float32 by rounding to odd: if the nearest float s is not exact and has an even last bit, its
// neighbour toward p + c instead (a finite inexact s is never 0).
inline float pair16_sum_to_odd(float p, float c) {
  const float s = p + c;
  const float p_part = s - c;
  const float c_part = s - p_part;
  const float err = (p - p_part) + (c - c_part);  // p + c = s + err exactly (Knuth's two-sum)
  const uint bits = as_type<uint>(s);
  if (!isfinite(s) || err == 0.0f || (bits & 1u) != 0) {
    return s;
  }
  return as_type<float>((err > 0.0f) == (s > 0.0f) ? bits + 1u : bits - 1u);
}

// a b + c for 16-bit a, b, c, rounded to odd in float32 (a b is exact in float32, unless bfloat values near the top
// of the range take it past float32's: then the sum is taken at half scale, where halving a and c is exact and the
// doubling keeps the odd last bit, or overflows as the exact result does).
inline float pair16_fma_to_odd(float a, float b, float c) {
  const float p = a * b;
  if (isinf(p) && isfinite(a) && isfinite(b)) {
    return 2.0f * pair16_sum_to_odd((0.5f * a) * b, 0.5f * c);
  }
  return pair16_sum_to_odd(p, c);
}

template <typename T>
inline uint pair16_fma(uint a, uint b, uint c) {
  const float2 fa = pair16_widen<T>(a);
  const float2 fb = pair16_widen<T>(b);
  const float2 fc = pair16_widen<T>(c);
  return pair16_pack<T>(pair16_fma_to_odd(fa.x, fb.x, fc.x), pair16_fma_to_odd(fa.y, fb.y, fc.y));
}
#endif
