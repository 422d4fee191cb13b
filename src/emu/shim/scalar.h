// MSL scalar types on the emulator: the short integer names, and the conversions of the 16-bit floats `half`
// (IEEE binary16: F16C where the build enables it, else the same rounding in software) and `bfloat` (bfloat16),
// over which src/shim/scalar.h defines the types themselves, their operators and as_type.
#pragma once
#include <cstdint>
#include <cstring>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "target.h"

namespace metal {
namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// binary32 -> binary16, round to nearest, ties to even; overflow gives inf. A NaN keeps its sign and the top 9
// bits of its payload and becomes quiet: the same bits as the F16C instruction, so the emulator's results do not
// depend on the build's -m flags (the tests compare both paths).
inline uint16_t f32_to_f16_soft(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    return ax == 0x7f800000u ? static_cast<uint16_t>(sign | 0x7c00u)
                             : static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds past 65504
  if (ax >= 0x38800000u) {                                              // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15), then round away the low 13 bits; a carry ripples into the exponent.
    uint32_t m = ax - 0x38000000u;
    m += 0xfffu + ((m >> 13) & 1u);
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  if (ax <= 0x33000000u) return sign;  // <= 2^-25: half of the smallest subnormal ties to even, i.e. zero
  // Subnormal result: the significand with its implicit bit, in units of 2^-24, rounded to nearest even.
  const uint32_t e = ax >> 23;  // 102..112
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may become 0x400: the smallest normal, correctly
  return static_cast<uint16_t>(sign | r);
}

// binary16 -> binary32, exact. NaNs become quiet with their payload kept, like F16C.
inline float f16_to_f32_soft(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_float(sign | 0x7f800000u | (m ? 0x400000u : 0u) | (m << 13));
  if (e == 0) {
    // Subnormal (or zero): m * 2^-24 is exact in float.
    const float mag = static_cast<float>(m) * 0x1p-24f;
    return bits_float(sign | float_bits(mag));
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

struct binary16 {
  static uint16_t from_float(float f) {
#if defined(__F16C__)
    return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
    return f32_to_f16_soft(f);
#endif
  }
  static float to_float(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return f16_to_f32_soft(h);
#endif
  }
};

// Whether the calling thread reads float32 subnormals as zero: a fiber of the emulator's flush-to-zero mode
// (emu::set_flush_subnormals; src/emu/fiber.cpp sets x86-64's MXCSR.DAZ, bit 6, or arm64's FPCR.FZ, bit 24).
// Asked only when a conversion meets a subnormal.
inline bool thread_flushes_subnormals() {
#if defined(__x86_64__)
  return (__builtin_ia32_stmxcsr() & 0x40u) != 0;
#elif defined(__aarch64__)
  uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  return (fpcr >> 24 & 1u) != 0;
#else
  return false;
#endif
}

// bfloat16 is the top half of a binary32, so widening is a shift and narrowing rounds away the low 16 bits
// (nearest even; a carry into the exponent gives the next binade or inf). NaNs stay NaN: quiet, payload's top
// bits and sign kept. A subnormal bfloat is a float32 subnormal: in flush-to-zero mode both conversions give it
// as a zero of its sign, as the arithmetic of that mode reads and writes float32 subnormals (half needs no such
// case: no float32 subnormal converts to a nonzero half, nor a half to a float32 subnormal).
struct bfloat16 {
  static uint16_t from_float(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    if ((x & 0x7f800000u) == 0 && (x & 0x7fffffu) != 0 && thread_flushes_subnormals())
      return static_cast<uint16_t>((x >> 16) & 0x8000u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  static float to_float(uint16_t b) {
    if ((b & 0x7f80u) == 0 && (b & 0x7fu) != 0 && thread_flushes_subnormals())
      return bits_float(static_cast<uint32_t>(b & 0x8000u) << 16);
    return bits_float(static_cast<uint32_t>(b) << 16);
  }
};

}  // namespace detail
}  // namespace metal

#include "../../shim/scalar.h"

// The MSL names at global scope.
MTLINV_SHIM_INTEGER_NAMES
using half = metal::half;
using bfloat = metal::bfloat;
