// Barriers and the simd_* functions, each one call of the runtime's emu::simd_exchange (src/emu/runtime.h).
//
// Every function takes a trailing `emu::Site site = emu::Site::here()`: a default argument is evaluated at the
// caller, so the site is the kernel's line, and the runtime checks that all lanes meet at the same one.
// The combine functions are static members of simd_ops<T>, one per operation and type: the runtime also checks
// that all lanes passed the same function.
//
// Results never depend on the order in which lanes arrive:
// - simd_sum / simd_max / simd_min / simd_and / simd_or / simd_xor reduce by a fixed pairwise tree over lane
//   indices: level 1 combines lanes (0,1) (2,3) ..., level 2 combines those pairs, and so on up to 32; an absent
//   lane (partial last simdgroup) is skipped, not replaced by zero, so the order among present lanes is the same.
// - simd_prefix_*_sum add left to right in lane order; the exclusive sum of the first present lane is T(0).
// - A shuffle whose source lane is out of range or absent returns the calling lane's own value (MSL's rule for
//   simd_shuffle_down / _up, applied to every shuffle so the emulator stays deterministic).
// All lanes of the simdgroup must call (converged control flow, design rule 6); the runtime faults otherwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../runtime.h"
#include "math.h"
#include "scalar.h"
#include "vec.h"

namespace metal {

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return static_cast<mem_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

namespace detail {

// The combine of simdgroup_barrier: lanes only meet, no data moves.
struct simd_meet {
  static void combine(const unsigned char*, const int32_t*, uint32_t, unsigned char*, std::size_t) {}
};

template <class T>
struct simd_ops {
  static_assert(std::is_trivially_copyable<T>::value, "simd_* values must be plain data");
  static_assert(sizeof(T) <= ::emu::kMaxSimdBytes, "simd_* values are at most 32 bytes");
  static constexpr uint32_t kLanes = ::emu::kSimdWidth;

  // The runtime passes bytes == sizeof(T); the layouts are in[32][sizeof(T)] and out[32][sizeof(T)].
  static void shuffle(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out,
                      std::size_t) {
    each_lane(active, [&](uint32_t i) { copy_lane(in, source(active, params[i], i), out, i); });
  }
  static void broadcast(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out,
                        std::size_t bytes) {
    shuffle(in, params, active, out, bytes);
  }
  static void shuffle_down(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out,
                           std::size_t) {
    each_lane(active, [&](uint32_t i) {
      copy_lane(in, source(active, int64_t{i} + params[i], i), out, i);
    });
  }
  static void shuffle_up(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out,
                         std::size_t) {
    each_lane(active, [&](uint32_t i) {
      copy_lane(in, source(active, int64_t{i} - params[i], i), out, i);
    });
  }
  static void shuffle_xor(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out,
                          std::size_t) {
    each_lane(active, [&](uint32_t i) {
      copy_lane(in, source(active, int64_t{i} ^ params[i], i), out, i);
    });
  }
  static void broadcast_first(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out,
                              std::size_t) {
    const uint32_t first = first_lane(active);
    each_lane(active, [&](uint32_t i) { copy_lane(in, first, out, i); });
  }

  static void sum(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(a + b); });
  }
  static void max(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(::metal::max(a, b)); });
  }
  static void min(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(::metal::min(a, b)); });
  }
  static void bit_and(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(a & b); });
  }
  static void bit_or(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(a | b); });
  }
  static void bit_xor(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    tree(in, active, out, [](const T& a, const T& b) { return static_cast<T>(a ^ b); });
  }

  static void prefix_inclusive_sum(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out,
                                   std::size_t) {
    prefix(in, active, out, true);
  }
  static void prefix_exclusive_sum(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out,
                                   std::size_t) {
    prefix(in, active, out, false);
  }

 private:
  static T load(const unsigned char* in, uint32_t lane) {
    T v;
    std::memcpy(&v, in + lane * sizeof(T), sizeof(T));
    return v;
  }
  static void store(unsigned char* out, uint32_t lane, const T& v) {
    std::memcpy(out + lane * sizeof(T), &v, sizeof(T));
  }
  static void copy_lane(const unsigned char* in, uint32_t from, unsigned char* out, uint32_t to) {
    std::memcpy(out + to * sizeof(T), in + from * sizeof(T), sizeof(T));
  }
  static bool present(uint32_t active, int64_t lane) {
    return lane >= 0 && lane < kLanes && ((active >> lane) & 1u);
  }
  static uint32_t source(uint32_t active, int64_t wanted, uint32_t own) {
    return present(active, wanted) ? static_cast<uint32_t>(wanted) : own;
  }
  static uint32_t first_lane(uint32_t active) {
    uint32_t i = 0;
    while (!((active >> i) & 1u)) ++i;
    return i;
  }
  template <class Fn>
  static void each_lane(uint32_t active, Fn fn) {
    for (uint32_t i = 0; i < kLanes; ++i) {
      if ((active >> i) & 1u) fn(i);
    }
  }

  // The pairwise tree described at the top of this file; every present lane receives the result.
  template <class Op>
  static void tree(const unsigned char* in, uint32_t active, unsigned char* out, Op op) {
    T val[kLanes];
    bool has[kLanes];
    for (uint32_t i = 0; i < kLanes; ++i) {
      has[i] = (active >> i) & 1u;
      if (has[i]) val[i] = load(in, i);
    }
    for (uint32_t width = 1; width < kLanes; width *= 2) {
      for (uint32_t i = 0; i < kLanes; i += 2 * width) {
        const uint32_t j = i + width;
        if (!has[j]) continue;
        val[i] = has[i] ? op(val[i], val[j]) : val[j];
        has[i] = true;
      }
    }
    each_lane(active, [&](uint32_t i) { store(out, i, val[0]); });
  }

  static void prefix(const unsigned char* in, uint32_t active, unsigned char* out, bool inclusive) {
    T acc{};
    bool started = false;
    each_lane(active, [&](uint32_t i) {
      const T v = load(in, i);
      if (!inclusive) store(out, i, acc);
      acc = started ? static_cast<T>(acc + v) : v;
      started = true;
      if (inclusive) store(out, i, acc);
    });
  }
};

template <>
struct simd_ops<bool> {
  static void all(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    fill(active, out, count(in, active) == __builtin_popcount(active));
  }
  static void any(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    fill(active, out, count(in, active) > 0);
  }
  // Lane i receives whether it is the lowest present lane; the inputs are ignored.
  static void is_first(const unsigned char*, const int32_t*, uint32_t active, unsigned char* out, std::size_t) {
    const uint32_t first = static_cast<uint32_t>(__builtin_ctz(active));
    for (uint32_t i = 0; i < ::emu::kSimdWidth; ++i) out[i] = (i == first);
  }

 private:
  static int count(const unsigned char* in, uint32_t active) {
    int n = 0;
    for (uint32_t i = 0; i < ::emu::kSimdWidth; ++i) n += ((active >> i) & 1u) && in[i];
    return n;
  }
  static void fill(uint32_t active, unsigned char* out, bool value) {
    for (uint32_t i = 0; i < ::emu::kSimdWidth; ++i) {
      if ((active >> i) & 1u) out[i] = value;
    }
  }
};

template <class T>
T simd_call(const T& v, int32_t param, ::emu::SimdCombine combine, ::emu::Site site) {
  T out{};
  ::emu::simd_exchange(&v, param, &out, sizeof(T), combine, site);
  return out;
}

template <class T>
constexpr bool is_integer_value_v = std::is_integral<T>::value;
template <class T, int N, bool P>
constexpr bool is_integer_value_v<vec<T, N, P>> = std::is_integral<T>::value;

}  // namespace detail

// The emulator has one coherent memory, so the flags only document intent: every barrier orders everything.
inline void threadgroup_barrier(mem_flags flags, ::emu::Site site = ::emu::Site::here()) {
  (void)flags;
  ::emu::barrier(site);
}
inline void simdgroup_barrier(mem_flags flags, ::emu::Site site = ::emu::Site::here()) {
  (void)flags;
  unsigned char none = 0;
  ::emu::simd_exchange(&none, 0, &none, 0, &detail::simd_meet::combine, site);
}

template <class T>
T simd_shuffle(T v, ushort lane, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, lane, &detail::simd_ops<T>::shuffle, site);
}
template <class T>
T simd_broadcast(T v, ushort lane, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, lane, &detail::simd_ops<T>::broadcast, site);
}
template <class T>
T simd_shuffle_down(T v, ushort delta, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, delta, &detail::simd_ops<T>::shuffle_down, site);
}
template <class T>
T simd_shuffle_up(T v, ushort delta, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, delta, &detail::simd_ops<T>::shuffle_up, site);
}
template <class T>
T simd_shuffle_xor(T v, ushort mask, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, mask, &detail::simd_ops<T>::shuffle_xor, site);
}
template <class T>
T simd_broadcast_first(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::broadcast_first, site);
}
template <class T>
T simd_sum(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::sum, site);
}
template <class T>
T simd_max(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::max, site);
}
template <class T>
T simd_min(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::min, site);
}
template <class T>
T simd_prefix_inclusive_sum(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::prefix_inclusive_sum, site);
}
template <class T>
T simd_prefix_exclusive_sum(T v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<T>::prefix_exclusive_sum, site);
}
template <class T>
T simd_and(T v, ::emu::Site site = ::emu::Site::here()) {
  static_assert(detail::is_integer_value_v<T>, "simd_and takes integers");
  return detail::simd_call(v, 0, &detail::simd_ops<T>::bit_and, site);
}
template <class T>
T simd_or(T v, ::emu::Site site = ::emu::Site::here()) {
  static_assert(detail::is_integer_value_v<T>, "simd_or takes integers");
  return detail::simd_call(v, 0, &detail::simd_ops<T>::bit_or, site);
}
template <class T>
T simd_xor(T v, ::emu::Site site = ::emu::Site::here()) {
  static_assert(detail::is_integer_value_v<T>, "simd_xor takes integers");
  return detail::simd_call(v, 0, &detail::simd_ops<T>::bit_xor, site);
}
inline bool simd_all(bool v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<bool>::all, site);
}
inline bool simd_any(bool v, ::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(v, 0, &detail::simd_ops<bool>::any, site);
}
inline bool simd_is_first(::emu::Site site = ::emu::Site::here()) {
  return detail::simd_call(false, 0, &detail::simd_ops<bool>::is_first, site);
}

}  // namespace metal

using mem_flags = metal::mem_flags;
