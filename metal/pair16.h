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
// This fallback (emulator, Metal) computes in float32 and gives the correctly rounded results, subnormals of T kept,
// as the packed instructions do. A sum rounded to float32 and then to T is rounded correctly, since float32's 24
// bits are at least 2p + 1 for p = 11 (half) and p = 8 (bfloat). For the fma that is not enough (a b has up to 22
// significant bits, and a b + c rounded to float32 can land on a tie of T that the exact value is not on), so the
// float32 sum is rounded to odd first (an exact two-sum tells whether it was rounded, and which way), which a later
// rounding to T, 13 or more bits shorter, turns into the correct rounding (Boldo and Melquiond, "Emulation of FMA
// and correctly rounded sums: proved algorithms using rounding to odd", 2008). The CUDA shim replaces the fallback
// (src/cuda/shim/pair16.cuh, which defines MTLINV_TARGET_PAIR16) with packed instructions, which round once: the
// same bits.
// A GPU may flush float32 subnormals to zero, as operands and as results (the Metal Shading Language allows it), and
// the two-sum is exact only where none occurs. So the float32 path runs only where no value it computes can be one:
// always for half; bfloat, whose exponent range is float32's, takes an integer path where operands are subnormal or
// small (pair16_bfloat_float32_safe, pair16_bfloat_fma_exact). The bits then do not depend on whether the GPU
// flushes (tests/ops/test_subnormals.py runs both paths in the emulator's flush-to-zero mode).
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

// a b + c for 16-bit a, b, c widened to float32, rounded to odd in float32: the sum p + c of the exact product,
// rounded to the nearest float s, or, if s is not exact and has an even last bit, to its neighbour toward p + c
// (a finite inexact s is never 0).
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

// a b is exact in float32, unless bfloat values near the top of the range take it past float32's: then the sum is
// taken at half scale, where halving a and c is exact and the doubling keeps the odd last bit, or overflows as the
// exact result does; an infinite c is the result (the finite a b cannot cancel it).
inline float pair16_fma_to_odd(float a, float b, float c) {
  const float p = a * b;
  if (isinf(p) && isfinite(a) && isfinite(b)) {
    return isinf(c) ? c : 2.0f * pair16_sum_to_odd((0.5f * a) * b, 0.5f * c);
  }
  return pair16_sum_to_odd(p, c);
}

// The float32 path of one element: T(a b + c) for the bits a, b, c of T values.
template <typename T>
inline ushort pair16_fma_float32(ushort a, ushort b, ushort c) {
  return as_type<ushort>(T(pair16_fma_to_odd(float(as_type<T>(a)), float(as_type<T>(b)), float(as_type<T>(c)))));
}

// Whether the float32 path computes no float32 subnormal from the bfloat bits a, b, c. Every value it computes is
// an integer multiple of the smallest quantum (unit in the last place) of a b and c, so if that is at least 2^-125,
// none lies strictly between 0 and 2^-126, even halved in the overflow branch. A finite nonzero bfloat of biased
// exponent E is an integer times 2^(max(E, 1) - 134), and its operands must not be subnormal themselves. (For half
// the quanta are at least 2^-24, and 2^-48 for a product: always safe.)
inline bool pair16_bfloat_float32_safe(ushort a, ushort b, ushort c) {
  const uint ea = (a >> 7) & 0xFFu, eb = (b >> 7) & 0xFFu, ec = (c >> 7) & 0xFFu;
  const bool za = (a & 0x7FFFu) == 0, zb = (b & 0x7FFFu) == 0, zc = (c & 0x7FFFu) == 0;
  if ((ea == 0 && !za) || (eb == 0 && !zb) || (ec == 0 && !zc)) {
    return false;
  }
  return (za || zb || ea + eb >= 143) && (zc || ec >= 9);
}

// The bit length of x: 0 for 0, else 1 + the position of its top bit.
inline uint pair16_bit_length(ulong x) {
  uint n = 0;
  for (uint step = 32; step > 0; step >>= 1) {
    if ((x >> step) != 0) {
      x >>= step;
      n += step;
    }
  }
  return x != 0 ? n + 1 : n;
}

// a b + c for finite bfloat bits a, b, c: the exact value rounded once to bfloat (nearest, ties to even,
// subnormals kept), in integer arithmetic, where no GPU flushes anything. The terms are integers times powers of
// two; the larger one (by its top bit) is placed at bits 61..0 of a 64-bit sum, the other in the same unit, exactly
// while it fits, else truncated with a sticky last bit: it is then more than 2^45 times smaller, so the rounding
// point lies far above that bit, and an odd last bit tells it which side of a tie the exact sum is on.
inline ushort pair16_bfloat_fma_exact(ushort a, ushort b, ushort c) {
  // |x| = m 2^(max(E, 1) - 134): m the 7 fraction bits with the implicit bit of a normal x.
  const uint ea = (a >> 7) & 0xFFu, eb = (b >> 7) & 0xFFu, ec = (c >> 7) & 0xFFu;
  const ulong mp = ulong(((a & 0x7Fu) | (ea != 0 ? 0x80u : 0u)) * ((b & 0x7Fu) | (eb != 0 ? 0x80u : 0u)));
  const ulong mc = ulong((c & 0x7Fu) | (ec != 0 ? 0x80u : 0u));
  const bool sp = ((a ^ b) & 0x8000u) != 0;
  const bool sc = (c & 0x8000u) != 0;
  if (mp == 0) {
    // c, or a sum of two zeros: -0 only if both are.
    return mc != 0 || sp ? c : ushort(c & 0x7FFFu);
  }
  const int xp = int(max(ea, 1u) + max(eb, 1u)) - 268;  // |a b| = mp 2^xp
  const int xc = int(max(ec, 1u)) - 134;                // |c| = mc 2^xc
  const int tp = xp + int(pair16_bit_length(mp));       // |a b| < 2^tp, and so for c
  const int tc = xc + int(pair16_bit_length(mc));
  const bool p_high = mc == 0 || tp >= tc;
  const ulong mh = p_high ? mp : mc;
  const ulong ml = p_high ? mc : mp;
  const int th = p_high ? tp : tc;
  const int xh = p_high ? xp : xc;
  const int xl = p_high ? xc : xp;
  // The sum in units of 2^unit: the high term's top bit at bit 61, the low term exactly when k >= 0 (it then fits:
  // its top bit is at most the high term's), else truncated with its sticky bit.
  const int unit = th - 62;
  const ulong hs = mh << (xh - unit);
  const int k = xl - unit;
  const ulong ls = ml == 0  ? 0
                   : k >= 0  ? ml << k
                   : k > -64 ? (ml >> -k) | ((ml & ((ulong(1) << -k) - 1)) != 0 ? 1 : 0)
                             : 1;
  const bool sh = p_high ? sp : sc;
  const bool sl = p_high ? sc : sp;
  const long sum = (sh ? -long(hs) : long(hs)) + (sl ? -long(ls) : long(ls));
  if (sum == 0) {
    return 0;  // an exact cancellation is +0
  }
  const ushort sign = sum < 0 ? 0x8000 : 0;
  const ulong mag = ulong(sum < 0 ? -sum : sum);
  // Round to 8 significant bits, or to the subnormal quantum 2^-133 below 2^-126: drop bits, then m 2^q.
  const int drop = max(int(pair16_bit_length(mag)) - 8, -133 - unit);
  ulong m = 0;
  if (drop <= 0) {
    m = mag << -drop;
  } else if (drop < 64) {
    m = mag >> drop;
    const ulong rest = mag & ((ulong(1) << drop) - 1);
    const ulong half_unit = ulong(1) << (drop - 1);
    m += rest > half_unit || (rest == half_unit && (m & 1) != 0) ? 1 : 0;
  }  // else |sum| < 2^(unit + 63) <= 2^-134: rounds to 0
  int q = unit + drop;
  if (m == 256) {
    m = 128;
    ++q;
  }
  if (m < 128) {
    return sign | ushort(m);  // subnormal (q = -133), or zero
  }
  const int e = q + 134;  // m 2^q = (m / 128) 2^(q + 7): biased exponent q + 7 + 127
  return e >= 255 ? ushort(sign | 0x7F80u) : ushort(sign | (uint(e) << 7) | (uint(m) & 0x7Fu));
}

// A subnormal's stand-in where an operand is infinite or NaN: the smallest normal of its sign. IEEE's a b + c then
// depends on the finite operands only through their signs and whether they are zero, and float32 keeps that one.
inline ushort pair16_bfloat_normal_stand_in(ushort x) {
  return (x & 0x7F80u) == 0 && (x & 0x7Fu) != 0 ? ushort((x & 0x8000u) | 0x0080u) : x;
}

// One element of pair16_fma.
template <typename T>
inline ushort pair16_fma_one(ushort a, ushort b, ushort c);
template <>
inline ushort pair16_fma_one<half>(ushort a, ushort b, ushort c) {
  return pair16_fma_float32<half>(a, b, c);
}
template <>
inline ushort pair16_fma_one<bfloat>(ushort a, ushort b, ushort c) {
  if (pair16_bfloat_float32_safe(a, b, c)) {
    return pair16_fma_float32<bfloat>(a, b, c);
  }
  if ((a & 0x7F80u) == 0x7F80u || (b & 0x7F80u) == 0x7F80u || (c & 0x7F80u) == 0x7F80u) {
    return pair16_fma_float32<bfloat>(pair16_bfloat_normal_stand_in(a), pair16_bfloat_normal_stand_in(b),
                                      pair16_bfloat_normal_stand_in(c));
  }
  return pair16_bfloat_fma_exact(a, b, c);
}

// One element of pair16_add: T(a + b) through float32 (sums of half values are multiples of 2^-24), and a bfloat
// sum that could meet a float32 subnormal as a b + c with b = 1.
template <typename T>
inline ushort pair16_add_one(ushort a, ushort b);
template <>
inline ushort pair16_add_one<half>(ushort a, ushort b) {
  return as_type<ushort>(half(float(as_type<half>(a)) + float(as_type<half>(b))));
}
template <>
inline ushort pair16_add_one<bfloat>(ushort a, ushort b) {
  if (pair16_bfloat_float32_safe(a, 0x3F80, b)) {
    return as_type<ushort>(bfloat(float(as_type<bfloat>(a)) + float(as_type<bfloat>(b))));
  }
  return pair16_fma_one<bfloat>(a, 0x3F80, b);
}

template <typename T>
inline uint pair16_add(uint a, uint b) {
  return uint(pair16_add_one<T>(ushort(a & 0xFFFFu), ushort(b & 0xFFFFu))) |
         (uint(pair16_add_one<T>(ushort(a >> 16), ushort(b >> 16))) << 16);
}

template <typename T>
inline uint pair16_fma(uint a, uint b, uint c) {
  return uint(pair16_fma_one<T>(ushort(a & 0xFFFFu), ushort(b & 0xFFFFu), ushort(c & 0xFFFFu))) |
         (uint(pair16_fma_one<T>(ushort(a >> 16), ushort(b >> 16), ushort(c >> 16))) << 16);
}
#endif
