// MSL vector types on the emulator: src/shim/vec.h, with the element type conversion it leaves to the target,
// and the vector names at global scope like the scalar types.
#pragma once
#include <type_traits>
#if defined(__F16C__) && defined(__SSE4_1__)
#include <immintrin.h>
#endif

#include "scalar.h"
#include "target.h"

namespace metal {
namespace detail {

// Four half or bfloat values to float in one step (F16C / SSE4.1): the emulator's hottest conversion, done in
// one instruction where the CPU has one, with the same exact results as the element-wise conversion.
#if defined(__F16C__) && defined(__SSE4_1__)
template <class T, class U, int N>
constexpr bool converts_whole = std::is_same<T, float>::value && N == 4 &&
                                (std::is_same<U, half>::value || std::is_same<U, bfloat>::value);
template <class V>
inline void convert_whole(float* dst, const V& src) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&src[0]));
  if constexpr (std::is_same<typename V::value_type, half>::value) {
    _mm_storeu_ps(dst, _mm_cvtph_ps(raw));
  } else {
    _mm_storeu_ps(dst, _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(raw), 16)));
  }
}
#else
template <class T, class U, int N>
constexpr bool converts_whole = false;
template <class V>
inline void convert_whole(float*, const V&) {}
#endif

}  // namespace detail
}  // namespace metal

#include "../../shim/vec.h"

MTLINV_SHIM_VEC_ELEMENTS(MTLINV_SHIM_VEC_NAMES)
