// Tests of the emulator's MSL shim (src/emu/msl_shim.h).
//
// build_shim_test.sh compiles this file twice, as the pre-pass output of a kernel file is compiled:
//   -DEMU_CHECKED=1  only the KERNELS section: the checked build of the test kernels (namespace emu_checked);
//   -DEMU_CHECKED=0  the KERNELS section again (namespace emu_fast) and the test program.
// The kernels are what tools/msl2cpp.py emits, written out by hand, around the real metal/common.h and args.h.
//
// Without src/emu/runtime.cpp the program supplies a one-lane stand-in runtime (kernels run with one thread per
// threadgroup, and it records every barrier / simd call site). With -DSHIM_TEST_WITH_RUNTIME it links the real
// runtime and runs the kernels on full and partial simdgroups.
//
// Usage: test_shim [DIR]   DIR may hold f16_numpy.bin / bf16_ml_dtypes.bin, reference conversions written by
// build_shim_test.sh with numpy / ml_dtypes; missing files are skipped with a note.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "msl_shim.h"

// ===== KERNELS =================================================================================================
namespace MTLINV_VARIANT_NS {
#include "common.h"
#include "args.h"

// metal/rms_norm.metal as the pre-pass emits it.
template <typename T>
void test_rms_norm(const ::emu::KernelCtx& __ctx) {
  constant RmsNormArgs& args = ::emu::bind_constant<RmsNormArgs>(__ctx, 0);
  EMU_DPTR(const T) x = ::emu::bind_device<const T>(__ctx, 1);
  EMU_DPTR(const T) w = ::emu::bind_device<const T>(__ctx, 2);
  EMU_DPTR(T) y = ::emu::bind_device<T>(__ctx, 3);
  uint row = ::emu::attr<uint>(__ctx.threadgroup_position_in_grid);
  uint tid = ::emu::attr<uint>(__ctx.thread_index_in_threadgroup);
  uint threads = ::emu::attr<uint>(__ctx.threads_per_threadgroup);
  uint lane = ::emu::attr<uint>(__ctx.thread_index_in_simdgroup);
  uint simd_id = ::emu::attr<uint>(__ctx.simdgroup_index_in_threadgroup);
  {
    static thread_local float simd_partials[SIMD_WIDTH];
    static thread_local float row_scale[1];

    EMU_DPTR(const T) xr = x + row * args.cols;
    EMU_DPTR(T) yr = y + row * args.cols;

    float sumsq = 0.0f;
    for (uint c = tid; c < args.cols; c += threads) {
      float v = float(xr[c]);
      sumsq = fma(v, v, sumsq);
    }
    sumsq = simd_ladder_sum(sumsq);
    if (lane == 0) {
      simd_partials[simd_id] = sumsq;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    if (simd_id == 0) {
      uint simds = (threads + SIMD_WIDTH - 1) / SIMD_WIDTH;
      float total = lane < simds ? simd_partials[lane] : 0.0f;
      total = simd_ladder_sum(total);
      if (lane == 0) {
        row_scale[0] = rsqrt(total / float(args.cols) + args.eps);
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    float scale = row_scale[0];
    for (uint c = tid; c < args.cols; c += threads) {
      yr[c] = T(float(xr[c]) * scale * float(w[c]));
    }
  }
}
MTLINV_KERNEL(test_rms_norm_f32, test_rms_norm, float)
MTLINV_KERNEL(test_rms_norm_f16, test_rms_norm, half)
MTLINV_KERNEL(test_rms_norm_bf16, test_rms_norm, bfloat)

// y[i] = x[i] * eps, read V elements at a time through a cast to a vector pointer (metal/load.h does this);
// the grid has one thread per vector, so a row length that is not a multiple of V reads past the end.
template <typename T, int V>
void test_scale_vec(const ::emu::KernelCtx& __ctx) {
  constant RmsNormArgs& args = ::emu::bind_constant<RmsNormArgs>(__ctx, 0);
  EMU_DPTR(const T) x = ::emu::bind_device<const T>(__ctx, 1);
  EMU_DPTR(float) y = ::emu::bind_device<float>(__ctx, 2);
  uint gid = ::emu::attr<uint>(__ctx.thread_position_in_grid);
  {
    vec<float, V> v = vec<float, V>(*((EMU_DPTR(const vec<T, V>))(x + gid * V)));
    v *= args.eps;
    for (int i = 0; i < V; ++i) {
      y[gid * V + i] = v[i];
    }
  }
}
MTLINV_KERNEL(test_scale_h4, test_scale_vec, half, 4)

// Every simd function once, on values passed through threadgroup memory; output kSimdOutputs floats per thread.
constant constexpr uint kSimdOutputs = 17;
template <typename T>
void test_simd(const ::emu::KernelCtx& __ctx) {
  EMU_DPTR(const T) x = ::emu::bind_device<const T>(__ctx, 0);
  EMU_DPTR(T) out = ::emu::bind_device<T>(__ctx, 1);
  uint2 group = ::emu::attr<uint2>(__ctx.threadgroup_position_in_grid);
  uint tid = ::emu::attr<uint>(__ctx.thread_index_in_threadgroup);
  uint threads = ::emu::attr<uint>(__ctx.threads_per_threadgroup);
  ushort lane = ::emu::attr<ushort>(__ctx.thread_index_in_simdgroup);
  {
    static thread_local float staged[64];
    uint at = group.x * threads + tid;
    staged[tid] = x[at];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float v = staged[(tid + 1) % threads];
    threadgroup_barrier(mem_flags::mem_threadgroup);

    EMU_DPTR(T) o = out + at * kSimdOutputs;
    o[0] = simd_sum(v);
    o[1] = simd_prefix_inclusive_sum(v);
    o[2] = simd_prefix_exclusive_sum(v);
    o[3] = simd_shuffle_down(v, 3);
    o[4] = simd_shuffle_up(v, 5);
    o[5] = simd_shuffle_xor(v, 1);
    o[6] = simd_broadcast(v, 2);
    o[7] = simd_broadcast_first(v);
    o[8] = simd_max(v);
    o[9] = simd_min(v);
    o[10] = simd_all(v > -990.0f) ? 1.0f : 0.0f;
    o[11] = simd_any(lane == 7) ? 1.0f : 0.0f;
    o[12] = simd_is_first() ? 1.0f : 0.0f;
    o[13] = float(simd_sum(half(v)));
    o[14] = simd_sum(float4(v, 2.0f * v, -v, 1.0f)).y;
    o[15] = float(simd_xor(int(lane)));
    o[16] = simd_shuffle(v, ushort(31 - lane));
    simdgroup_barrier(mem_flags::mem_none);
  }
}
MTLINV_KERNEL(test_simd, test_simd, float)

// Half the lanes call simd_sum from one line, half from another: the runtime must see two different sites,
// which it can only if the shim's default argument captured each call's own line.
[[maybe_unused]] constant constexpr int kDivergentSumLine = __LINE__ + 8;  // only the test program reads it
template <typename T>
void test_diverge(const ::emu::KernelCtx& __ctx) {
  EMU_DPTR(T) out = ::emu::bind_device<T>(__ctx, 0);
  uint lane = ::emu::attr<uint>(__ctx.thread_index_in_simdgroup);
  {
    T v = T(lane);
    if (lane < 16) {
      v = simd_sum(v);
    } else {
      v = simd_sum(v);
    }
    out[lane] = v;
  }
}
MTLINV_KERNEL(test_diverge, test_diverge, float)
}  // namespace MTLINV_VARIANT_NS

// The pointer type of each build.
#if EMU_CHECKED
static_assert(std::is_same<EMU_DPTR(const float), emu::checked_ptr<const float>>::value, "checked build");
#else
static_assert(std::is_same<EMU_DPTR(const float), const float*>::value, "fast build");
#endif

#if !EMU_CHECKED
// ===== TEST PROGRAM ============================================================================================
namespace shim_test {
MTLINV_MSL_USING
using emu_fast::RmsNormArgs;  // args.h is included inside the kernels' namespace, as the pre-pass does

int failures = 0;
#define CHECK(cond, ...)                                                               \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      if (++::shim_test::failures <= 40) {                                             \
        std::fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);  \
        std::fprintf(stderr, __VA_ARGS__);                                             \
        std::fputc('\n', stderr);                                                      \
      }                                                                                \
    }                                                                                  \
  } while (0)

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class Fn>
std::string fault_of(Fn fn) {
  try {
    fn();
  } catch (const emu::Fault& e) {
    return e.what();
  }
  return "";
}

// ----- reference rounding, independent of the shim ---------------------------------------------------------------
// Every non-negative finite value of a 16-bit format in bit-pattern order (which is value order), and one more:
// the value the infinity pattern would have if the exponent went on. Round to nearest even against this table
// gives inf exactly where IEEE does (ties at the top go to the even pattern, which is inf).
struct Format16 {
  int mant_bits;
  int bias;
  uint16_t inf_bits;
  std::vector<double> values;

  Format16(int mant, int bias_, uint16_t inf) : mant_bits(mant), bias(bias_), inf_bits(inf) {
    for (uint32_t b = 0; b <= inf; ++b) values.push_back(value(static_cast<uint16_t>(b)));
  }
  double value(uint16_t b) const {
    const int e = b >> mant_bits;
    const double m = b & ((1 << mant_bits) - 1);
    return e == 0 ? std::ldexp(m, 1 - bias - mant_bits) : std::ldexp(m + (1 << mant_bits), e - bias - mant_bits);
  }
  // Bits of x rounded to nearest even; callers handle NaN.
  uint16_t round(double x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    if (a >= values.back()) return static_cast<uint16_t>(sign | inf_bits);
    const size_t lo = static_cast<size_t>(std::upper_bound(values.begin(), values.end(), a) - values.begin()) - 1;
    const double below = a - values[lo];
    const double above = values[lo + 1] - a;
    size_t pick = below < above ? lo : above < below ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
    return static_cast<uint16_t>(sign | pick);
  }
};
const Format16& binary16_ref() {
  static const Format16 f(10, 15, 0x7c00);
  return f;
}
const Format16& bfloat16_ref() {
  static const Format16 f(7, 127, 0x7f80);
  return f;
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_f32_to_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
bool have_f16c() { return __builtin_cpu_supports("f16c"); }
#else
uint16_t hw_f32_to_f16(float) { return 0; }
float hw_f16_to_f32(uint16_t) { return 0; }
bool have_f16c() { return false; }
#endif

// ----- half and bfloat conversions ---------------------------------------------------------------------------------
void test_half_exhaustive() {
  const Format16& ref = binary16_ref();
  const bool hw = have_f16c();
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = half::from_bits(h);
    const float soft = metal::detail::f16_to_f32_soft(h);
    CHECK(bits_of(soft) == bits_of(f), "half %04x: soft path %08x, selected path %08x", h, bits_of(soft), bits_of(f));
    if (hw) CHECK(bits_of(hw_f16_to_f32(h)) == bits_of(f), "half %04x: F16C disagrees", h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
      CHECK(std::isnan(f), "half %04x must widen to NaN", h);
      CHECK(std::isnan(float(half(f))), "half %04x must round-trip to NaN", h);
      CHECK(metal::detail::f32_to_f16_soft(f) == half(f).bits, "NaN %04x: soft and selected narrowing differ", h);
      continue;
    }
    const double expect = (h & 0x8000 ? -1.0 : 1.0) * ((h & 0x7fff) == 0x7c00 ? INFINITY : ref.value(h & 0x7fff));
    CHECK(bits_of(f) == bits_of(static_cast<float>(expect)), "half %04x widens to %a, want %a", h, double(f), expect);
    CHECK(half(f).bits == h, "half %04x: round trip gives %04x", h, half(f).bits);
    CHECK(metal::detail::f32_to_f16_soft(f) == h, "half %04x: soft round trip", h);
  }
}

// Floats where half rounding is delicate: every midpoint between neighbouring halves and the floats next to it,
// random values across the half range (subnormal to overflow), and random bit patterns.
std::vector<float> half_probe_floats() {
  const Format16& ref = binary16_ref();
  std::vector<float> fs;
  for (uint32_t b = 0; b < ref.inf_bits; ++b) {
    const float mid = static_cast<float>((ref.values[b] + ref.values[b + 1]) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      fs.push_back(f);
      fs.push_back(-f);
    }
  }
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    const uint32_t exponent = 100 + r % 45;  // 2^-27 .. 2^17
    fs.push_back(float_of((r & 0x80000000u) | (exponent << 23) | (static_cast<uint32_t>(rng()) & 0x7fffffu)));
  }
  for (int i = 0; i < 1000000; ++i) fs.push_back(float_of(static_cast<uint32_t>(rng())));
  return fs;
}

void test_half_rounding() {
  const Format16& ref = binary16_ref();
  const bool hw = have_f16c();
  const std::vector<float> fs = half_probe_floats();
  for (float f : fs) {
    const uint16_t got = half(f).bits;
    CHECK(metal::detail::f32_to_f16_soft(f) == got, "float %a: soft path %04x, selected %04x", double(f),
          metal::detail::f32_to_f16_soft(f), got);
    if (hw) CHECK(hw_f32_to_f16(f) == got, "float %a: F16C %04x, shim %04x", double(f), hw_f32_to_f16(f), got);
    if (std::isnan(f)) {
      CHECK((got & 0x7c00) == 0x7c00 && (got & 0x3ff), "NaN %08x narrows to %04x", bits_of(f), got);
    } else {
      CHECK(got == ref.round(f), "float %a: half %04x, reference %04x", double(f), got, ref.round(f));
    }
  }
  std::printf("  half: %zu floats rounded%s\n", fs.size(), hw ? " (also against F16C)" : "");
}

void test_bfloat_conversions() {
  const Format16& ref = bfloat16_ref();
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bfloat::from_bits(static_cast<uint16_t>(b));
    CHECK(bits_of(f) == b << 16, "bfloat %04x widens to %08x", b, bits_of(f));
    if (std::isnan(f)) {
      CHECK(std::isnan(float(bfloat(f))), "bfloat NaN %04x must stay NaN", b);
    } else {
      CHECK(bfloat(f).bits == b, "bfloat %04x round trip gives %04x", b, bfloat(f).bits);
    }
  }
  std::vector<float> fs;
  for (uint32_t b = 0; b < ref.inf_bits; ++b) {
    const uint32_t mid = (b << 16) | 0x8000u;
    for (uint32_t u : {mid, mid - 1, mid + 1}) {
      fs.push_back(float_of(u));
      fs.push_back(float_of(u | 0x80000000u));
    }
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000000; ++i) fs.push_back(float_of(static_cast<uint32_t>(rng())));
  for (float f : fs) {
    const uint16_t got = bfloat(f).bits;
    if (std::isnan(f)) {
      CHECK(std::isnan(float(bfloat::from_bits(got))), "NaN %08x narrows to %04x", bits_of(f), got);
    } else {
      CHECK(got == ref.round(f), "float %a: bfloat %04x, reference %04x", double(f), got, ref.round(f));
    }
  }
  std::printf("  bfloat: 65536 patterns, %zu floats rounded\n", fs.size());
}

// Reference conversions written by numpy (float16) and ml_dtypes (bfloat16): u32 count, floats, u16 results.
template <class T>
void test_against_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::printf("  %s: %s not found, skipped\n", what, path.c_str());
    return;
  }
  uint32_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 4);
  std::vector<uint32_t> fs(n);
  std::vector<uint16_t> hs(n);
  in.read(reinterpret_cast<char*>(fs.data()), 4 * static_cast<std::streamsize>(n));
  in.read(reinterpret_cast<char*>(hs.data()), 2 * static_cast<std::streamsize>(n));
  CHECK(in.good() && n > 0, "%s: truncated file", path.c_str());
  for (uint32_t i = 0; i < n; ++i) {
    const float f = float_of(fs[i]);
    const uint16_t got = T(f).bits;
    if (std::isnan(f)) {
      CHECK(std::isnan(float(T::from_bits(got))), "%s: NaN %08x", what, fs[i]);
    } else {
      CHECK(got == hs[i], "%s: float %08x (%a) gives %04x, reference %04x", what, fs[i], double(f), got, hs[i]);
    }
  }
  std::printf("  %s: %u floats match\n", what, n);
}

// ----- 16-bit arithmetic and overloads -----------------------------------------------------------------------------
static_assert(std::is_same<decltype(half() * 2.0f), float>::value, "half * float is float");
static_assert(std::is_same<decltype(2.0f * half()), float>::value, "float * half is float");
static_assert(std::is_same<decltype(half() + 1), half>::value, "half + int is half (MSL conversions)");
static_assert(std::is_same<decltype(1u + half()), half>::value, "uint + half is half");
static_assert(std::is_same<decltype(half() * half()), half>::value, "half * half is half");
static_assert(std::is_same<decltype(bfloat() / bfloat()), bfloat>::value, "bfloat / bfloat is bfloat");
static_assert(std::is_same<decltype(half() + bfloat()), float>::value, "mixed 16-bit formats meet in float");
static_assert(std::is_same<decltype(half() < 1.0f), bool>::value && std::is_same<decltype(1.0f < half()), bool>::value,
              "comparisons");
static_assert(std::is_same<decltype(-half()), half>::value, "negation");
static_assert(std::is_convertible<int, half>::value && std::is_convertible<half, float>::value, "implicit");
static_assert(!std::is_convertible<half, bfloat>::value, "half -> bfloat is explicit, as in MSL");
static_assert(std::is_constructible<bfloat, half>::value, "bfloat(h)");

template <class T>
void check_arith(const Format16& ref, const char* name, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int checked = 0;
  for (int i = 0; i < 400000; ++i) {
    const T a = T::from_bits(static_cast<uint16_t>(rng()));
    const T b = T::from_bits(static_cast<uint16_t>(rng()));
    const double da = float(a), db = float(b);
    const std::pair<T, double> cases[] = {{a + b, da + db}, {a - b, da - db}, {a * b, da * db}, {a / b, da / db}};
    for (const auto& c : cases) {
      if (std::isnan(c.second)) {
        CHECK(std::isnan(float(c.first)), "%s: %04x op %04x should be NaN", name, a.bits, b.bits);
      } else {
        CHECK(c.first.bits == ref.round(c.second), "%s: %04x op %04x = %04x, correctly rounded %04x", name, a.bits,
              b.bits, c.first.bits, ref.round(c.second));
      }
      ++checked;
    }
  }
  std::printf("  %s: %d results of + - * / correctly rounded\n", name, checked);
}

void test_scalar_ops() {
  check_arith<half>(binary16_ref(), "half", 11);
  check_arith<bfloat>(bfloat16_ref(), "bfloat", 12);
  half h = 1.0f;
  h += 1;
  h *= 2.0f;
  CHECK(float(h) == 4.0f, "compound ops: %g", double(float(h)));
  CHECK(h * 2.0f == 8.0f && h + 1 == 5 && 3 < h && h > 3.5f && h != half(3), "mixed operators");
  CHECK(float(-h) == -4.0f && (-half(0.0f)).bits == 0x8000, "negation flips the sign bit");
  CHECK(float(half(65519.0f)) == 65504.0f && std::isinf(float(half(65520.0f))), "overflow threshold");
  CHECK(float(bfloat(h)) == 4.0f && float(half(bfloat(3.0f))) == 3.0f, "explicit cross conversion");
  CHECK(as_type<uint>(1.0f) == 0x3f800000u && as_type<float>(0x40000000u) == 2.0f, "as_type float/uint");
  const half2 pair(half(1.0f), half(-2.0f));
  CHECK(as_type<uint>(pair) == 0xc0003c00u, "as_type half2 -> uint: %08x", as_type<uint>(pair));
  CHECK(float(as_type<half2>(0x3c00c000u).y) == 1.0f, "as_type uint -> half2");
  CHECK(as_type<ushort>(half(1.0f)) == 0x3c00, "as_type half -> ushort");
}

// ----- vectors -----------------------------------------------------------------------------------------------------
static_assert(sizeof(float4) == 16 && alignof(float4) == 16 && sizeof(float3) == 16 && alignof(float3) == 16,
              "float vectors");
static_assert(sizeof(half4) == 8 && alignof(half4) == 8 && sizeof(half2) == 4 && sizeof(bfloat4) == 8, "16-bit");
static_assert(sizeof(uchar4) == 4 && sizeof(uchar2) == 2 && sizeof(ushort4) == 8 && sizeof(int3) == 16, "ints");
static_assert(sizeof(packed_float3) == 12 && alignof(packed_float3) == 4 && sizeof(packed_half3) == 6, "packed");
static_assert(std::is_same<decltype(half4() * 2.0f), half4>::value, "the scalar converts to the element type");
static_assert(std::is_same<decltype(2 * float4()), float4>::value, "scalar on the left");
static_assert(std::is_same<decltype(float4() * half()), float4>::value, "half scalar with float4");
static_assert(std::is_same<decltype(float4() < float4()), bool4>::value, "comparisons give bool vectors");
static_assert(std::is_same<decltype(packed_float3() + float3()), float3>::value, "packed arithmetic");
static_assert(!std::is_convertible<float, float4>::value, "broadcast is explicit");
static_assert(!std::is_convertible<half4, float4>::value && std::is_constructible<float4, half4>::value,
              "element conversion is explicit");

void test_vectors() {
  float4 a(1.0f, 2.0f, 3.0f, 4.0f);
  const float4 b = float4(0.5f);
  float4 c = a * b + 1.0f;
  CHECK(c.x == 1.5f && c.y == 2.0f && c.z == 2.5f && c.w == 3.0f, "a * b + 1");
  c = 2.0f / a - b;
  CHECK(c[0] == 1.5f && c[3] == 0.0f, "scalar / vector");
  c += a;
  c -= 1;
  c *= float4(2.0f);
  CHECK(c.r == 3.0f && c.a == 6.0f, "compound ops, rgba names: %g %g", double(c.r), double(c.a));
  CHECK(all(-a == float4(-1.0f, -2.0f, -3.0f, -4.0f)), "unary minus");
  const bool4 lt = a < 2.5f;
  CHECK(lt.x && lt.y && !lt.z && !lt.w && any(lt) && !all(lt), "comparisons, all/any");
  CHECK(dot(a, a) == 30.0f, "dot");
  const float4 s = select(a, b, lt);
  CHECK(s.x == 0.5f && s.z == 3.0f, "select");

  const half4 h4(1.0f, 2.5f, -3.0f, 65504.0f);
  const float4 f4 = float4(h4);
  CHECK(f4.y == 2.5f && f4.w == 65504.0f, "float4(half4)");
  const half4 hh = h4 * 2.0f;
  CHECK(std::isinf(float(hh.w)) && float(hh.x) == 2.0f, "half4 arithmetic rounds per element");
  const float4 joined(float3(1.0f, 2.0f, 3.0f), 7.0f);
  const float4 pairs(float2(1.0f, 2.0f), half2(half(3.0f), half(4.0f)));
  CHECK(joined.w == 7.0f && pairs.z == 3.0f, "constructors from vectors and scalars");

  uchar4 u(250, 1, 2, 3);
  u += uchar4(10, 1, 1, 1);
  CHECK(u.x == 4 && u.y == 2, "uchar4 wraps: %d", u.x);
  const int4 i4 = (int4(1, 2, 3, 4) << 2) % 5 & int4(7);
  CHECK(i4.x == 4 && i4.y == 3 && i4.z == 2 && i4.w == 1, "integer vector ops");
  const uint2 m = max(uint2(1u, 9u), 4u);
  CHECK(m.x == 4u && m.y == 9u && clamp(int3(-5, 5, 50), -1, 10).z == 10, "vector max/clamp with scalars");

  packed_float3 p(1.0f, 2.0f, 3.0f);
  const float3 q = p + float3(1.0f);
  p = q;
  CHECK(p.z == 4.0f && p[0] == 2.0f, "packed <-> unpacked");
}

// ----- math --------------------------------------------------------------------------------------------------------
void test_math() {
  // (1 + 2^-23)^2 - (1 + 2^-22) is 2^-46: only a fused multiply-add keeps it.
  const float a = 1.0f + 0x1p-23f, c = -(1.0f + 0x1p-22f);
  CHECK(fma(a, a, c) == 0x1p-46f, "fma must be fused: %a", double(fma(a, a, c)));
  CHECK(precise::fma(a, a, c) == 0x1p-46f && fast::fma(a, a, c) == 0x1p-46f, "precise:: and fast::");
  CHECK(metal::precise::sqrt(4.0f) == 2.0f && metal::fast::exp(0.0f) == 1.0f, "metal::precise / metal::fast");
  CHECK(rsqrt(4.0f) == 0.5f && float(rsqrt(half(16.0f))) == 0.25f, "rsqrt");
  CHECK(max(NAN, 1.0f) == 1.0f && max(1.0f, NAN) == 1.0f && min(NAN, -1.0f) == -1.0f, "NaN operands are ignored");
  CHECK(fmax(2.0f, 3.0f) == 3.0f && fmin(2.0f, 3.0f) == 2.0f, "fmax/fmin");
  CHECK(max(3u, 7u) == 7u && min(-3, 7) == -3 && clamp(12, 0, 10) == 10 && abs(-5) == 5, "integer functions");
  CHECK(clamp(1.5f, 0.0f, 1.0f) == 1.0f && abs(-2.0f) == 2.0f && fabs(half(-2.0f)) == 2.0f, "float functions");
  CHECK(isnan(NAN) && isinf(-INFINITY) && isfinite(FLT_MAX) && !isfinite(half(INFINITY)), "classification");
  CHECK(isnan(half::from_bits(0x7e00)) && isnan(bfloat(NAN)), "16-bit NaN");
  CHECK(floor(-1.5f) == -2.0f && ceil(-1.5f) == -1.0f && round(2.5f) == 3.0f && rint(2.5f) == 2.0f &&
            trunc(-1.7f) == -1.0f,
        "rounding functions");
  CHECK(exp2(3.0f) == 8.0f && log2(8.0f) == 3.0f && pow(2.0f, 10.0f) == 1024.0f && copysign(1.0f, -0.0f) == -1.0f,
        "exp2/log2/pow/copysign");
  CHECK(std::fabs(exp(1.0f) - 2.7182817f) < 1e-6f && std::fabs(log(M_PI_F) - 1.1447299f) < 1e-6f &&
            sin(0.0f) == 0.0f && cos(0.0f) == 1.0f && tanh(0.0f) == 0.0f,
        "transcendentals");
  CHECK(M_LOG2E_F == static_cast<float>(1.4426950408889634) && MAXFLOAT == FLT_MAX && FLT_MIN > 0.0f, "constants");
  CHECK(float(HALF_MAX) == 65504.0f && float(numeric_limits<half>::max()) == 65504.0f &&
            float(numeric_limits<half>::lowest()) == -65504.0f && float(numeric_limits<half>::epsilon()) == 0x1p-10f &&
            float(numeric_limits<half>::min()) == 0x1p-14f && float(numeric_limits<bfloat>::epsilon()) == 0x1p-7f &&
            std::isinf(float(numeric_limits<bfloat>::infinity())) && numeric_limits<float>::max() == FLT_MAX,
        "numeric_limits");
  const float4 e = exp2(float4(0.0f, 1.0f, 2.0f, 3.0f));
  const half2 r = sqrt(half2(half(4.0f), half(9.0f)));
  CHECK(e.w == 8.0f && float(r.y) == 3.0f && fma(e, e, e).y == 6.0f && isnan(float2(NAN, 1.0f)).x,
        "element-wise math on vectors");
  CHECK(float(fma(half(2.0f), half(3.0f), half(1.0f))) == 7.0f && float(max(half(2.0f), half(NAN))) == 2.0f,
        "half math");
}

// ----- checked pointers --------------------------------------------------------------------------------------------
void test_checked_ptr() {
  alignas(16) float buf[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const emu::checked_ptr<float> p(buf, sizeof buf, 2, "K", "x");
  CHECK(p[7] == 7.0f && p[7u] == 7.0f && p[int64_t{0}] == 0.0f && *p == 0.0f, "in-range reads");
  p[3] = 30.0f;
  CHECK(buf[3] == 30.0f, "writes go to the buffer");
  CHECK(fault_of([&] { (void)p[8]; }) ==
            "kernel K: buffer 2 (x): access of 4 bytes at byte offset 32 outside [0, 32)",
        "fault message: %s", fault_of([&] { (void)p[8]; }).c_str());
  const emu::checked_ptr<const float> q = p;
  CHECK(fault_of([&] { (void)q[-1]; }) ==
            "kernel K: buffer 2 (x): load of 4 bytes at byte offset -4 outside [0, 32)",
        "negative index: %s", fault_of([&] { (void)q[-1]; }).c_str());
  CHECK(!fault_of([&] { (void)q[size_t{1} << 62]; }).empty() && !fault_of([&] { (void)q[~0ull]; }).empty() &&
            !fault_of([&] { (void)q[uint(8)]; }).empty(),
        "huge and unsigned indices fault");

  // Arithmetic is unchecked; the access is.
  emu::checked_ptr<const float> r = q + 12;
  CHECK(!fault_of([&] { (void)*r; }).empty(), "wandered outside");
  r -= 10;
  CHECK(*r == 2.0f && r[-2] == 0.0f, "came back");
  CHECK((2 + q)[1] == 30.0f && (q + 5 - 1)[0] == 4.0f && *(++r) == 30.0f && *(r++) == 30.0f && *r == 4.0f,
        "pointer arithmetic");
  CHECK(r - q == 4 && q < r && r > q && q + 4 == r && q != r && q <= q && r >= q, "differences and comparisons");

  // A cast to a vector element keeps the buffer and the position: 4 half4 fit in 32 bytes, the 5th does not.
  const auto v = (emu::checked_ptr<const half4>)(q);
  CHECK(fault_of([&] { (void)v[3]; }).empty(), "last whole vector is in range");
  CHECK(fault_of([&] { (void)v[4]; }) == "kernel K: buffer 2 (x): load of 8 bytes at byte offset 32 outside [0, 32)",
        "vector fault: %s", fault_of([&] { (void)v[4]; }).c_str());
  const auto v2 = (emu::checked_ptr<const float4>)(q + 4);
  CHECK(fault_of([&] { (void)v2[0]; }).empty() && !fault_of([&] { (void)v2[1]; }).empty(), "float4 from offset 16");
  const auto mis = (emu::checked_ptr<const float4>)(q + 1);
  CHECK(fault_of([&] { (void)*mis; }) ==
            "kernel K: buffer 2 (x): misaligned load of 16 bytes at byte offset 4 (needs alignment 16)",
        "alignment: %s", fault_of([&] { (void)*mis; }).c_str());
  const auto back = (emu::checked_ptr<float>)(v + 1);
  CHECK(back[0] == 2.0f && fault_of([&] { (void)back[6]; }) ==
                                 "kernel K: buffer 2 (x): access of 4 bytes at byte offset 32 outside [0, 32)",
        "cast back keeps the range");

  struct Pair {
    int a, b;
  };
  Pair pairs[2] = {{1, 2}, {3, 4}};
  const emu::checked_ptr<Pair> pp(pairs, sizeof pairs, 0, "K");
  CHECK((pp + 1)->b == 4 && fault_of([&] { (void)(pp + 2)->a; }) ==
                                "kernel K: buffer 0: access of 8 bytes at byte offset 16 outside [0, 16)",
        "operator-> is checked; no name in the message when none was bound");
  const emu::checked_ptr<float> other(buf + 4, 16, 3, "K");
  CHECK(!fault_of([&] { (void)(other - p); }).empty(), "difference across buffers faults");
}

// ----- bindings ----------------------------------------------------------------------------------------------------
emu::KernelCtx make_ctx(void* const* buffers, const size_t* bytes, int n) {
  emu::KernelCtx ctx{};
  ctx.buffers = buffers;
  ctx.buffer_bytes = bytes;
  ctx.num_buffers = n;
  ctx.kernel_name = "K";
  return ctx;
}

void test_bindings() {
  RmsNormArgs args{1, 4, 0.5f, 0, 0};
  float data[4] = {};
  void* buffers[2] = {&args, data};
  size_t bytes[2] = {sizeof args, sizeof data};
  const emu::KernelCtx ctx = make_ctx(buffers, bytes, 2);
  CHECK(emu::bind_constant<RmsNormArgs>(ctx, 0).eps == 0.5f && emu::bind_device<float>(ctx, 1) == data, "bind");
  CHECK(fault_of([&] { emu::bind_device<float>(ctx, 2); }) ==
            "kernel K: buffer 2 is not bound (the dispatch binds 2 buffers)",
        "missing buffer: %s", fault_of([&] { emu::bind_device<float>(ctx, 2); }).c_str());
  bytes[0] = 8;
  CHECK(fault_of([&] { emu::bind_constant<RmsNormArgs>(ctx, 0); }) ==
            "kernel K: argument buffer 0 holds 8 bytes, the argument struct needs " + std::to_string(sizeof args),
        "small argument buffer");

  emu::KernelCtx pos{};
  pos.threadgroup_position_in_grid = emu::dim3{5, 6, 7};
  pos.thread_index_in_simdgroup = 9;
  const uint3 g3 = emu::attr<uint3>(pos.threadgroup_position_in_grid);
  const ushort2 g2 = emu::attr<ushort2>(pos.threadgroup_position_in_grid);
  CHECK(emu::attr<uint>(pos.threadgroup_position_in_grid) == 5 && g3.z == 7 && g2.y == 6 &&
            emu::attr<ushort>(pos.thread_index_in_simdgroup) == 9,
        "attributes");
}

// ----- simd combine functions, called directly with 32 lanes ------------------------------------------------------
// Sum over the present lanes of [lo, hi) by halving: the tree that simd_sum documents, written independently.
template <class T, class Add>
bool tree_reduce(const std::vector<T>& v, uint32_t active, int lo, int hi, Add add, T* out) {
  if (hi - lo == 1) {
    if (!((active >> lo) & 1u)) return false;
    *out = v[static_cast<size_t>(lo)];
    return true;
  }
  T left{}, right{};
  const bool has_left = tree_reduce(v, active, lo, (lo + hi) / 2, add, &left);
  const bool has_right = tree_reduce(v, active, (lo + hi) / 2, hi, add, &right);
  *out = has_left && has_right ? add(left, right) : has_left ? left : right;
  return has_left || has_right;
}

template <class T>
std::vector<T> combine(emu::SimdCombine fn, const std::vector<T>& in, uint32_t active,
                       std::vector<int32_t> params = {}) {
  params.resize(32, 0);
  std::vector<T> out(32, T{});
  fn(reinterpret_cast<const unsigned char*>(in.data()), params.data(), active,
     reinterpret_cast<unsigned char*>(out.data()), sizeof(T));
  return out;
}

void test_simd_combines() {
  using F = metal::detail::simd_ops<float>;
  std::vector<float> v(32);
  // Magnitudes chosen so the order of additions shows in the result.
  for (int i = 0; i < 32; ++i) {
    v[static_cast<size_t>(i)] = std::ldexp(1.0f + 0.1234567f * float(i), (i * 7) % 23) * (i % 2 ? -1.0f : 1.0f);
  }
  for (uint32_t active : {0xffffffffu, 0x000fffffu, 0x1u, 0xfffffff0u, 0x80000001u}) {
    float want = 0.0f;
    tree_reduce(v, active, 0, 32, [](float a, float b) { return a + b; }, &want);
    const auto sum = combine(&F::sum, v, active);
    const auto inc = combine(&F::prefix_inclusive_sum, v, active);
    const auto exc = combine(&F::prefix_exclusive_sum, v, active);
    const auto down = combine(&F::shuffle_down, v, active, std::vector<int32_t>(32, 4));
    const auto up = combine(&F::shuffle_up, v, active, std::vector<int32_t>(32, 3));
    const auto swap = combine(&F::shuffle_xor, v, active, std::vector<int32_t>(32, 1));
    const auto first = combine(&F::broadcast_first, v, active);
    float running = 0.0f;
    bool started = false;
    const int lowest = __builtin_ctz(active);
    for (int i = 0; i < 32; ++i) {
      if (!((active >> i) & 1u)) continue;
      const size_t u = static_cast<size_t>(i);
      auto present = [&](int l) { return l >= 0 && l < 32 && ((active >> l) & 1u); };
      CHECK(bits_of(sum[u]) == bits_of(want), "sum lane %d mask %08x: %a want %a", i, active, double(sum[u]),
            double(want));
      CHECK(exc[u] == (started ? running : 0.0f), "exclusive prefix lane %d mask %08x", i, active);
      running = started ? running + v[u] : v[u];
      started = true;
      CHECK(inc[u] == running, "inclusive prefix lane %d mask %08x", i, active);
      CHECK(down[u] == (present(i + 4) ? v[u + 4] : v[u]), "shuffle_down lane %d mask %08x", i, active);
      CHECK(up[u] == (present(i - 3) ? v[u - 3] : v[u]), "shuffle_up lane %d mask %08x", i, active);
      CHECK(swap[u] == (present(i ^ 1) ? v[u ^ 1] : v[u]), "shuffle_xor lane %d mask %08x", i, active);
      CHECK(first[u] == v[static_cast<size_t>(lowest)], "broadcast_first lane %d mask %08x", i, active);
    }
  }
  // The tree is not the sequential order (else the test above proves little).
  float sequential = 0.0f;
  for (float x : v) sequential += x;
  const float tree = combine(&F::sum, v, 0xffffffffu)[0];
  CHECK(tree != sequential, "pick values where order matters: tree %a, sequential %a", double(tree),
        double(sequential));

  std::vector<int32_t> lanes(32);
  for (int i = 0; i < 32; ++i) lanes[static_cast<size_t>(i)] = (i * 7) % 40;  // some beyond 31
  const auto shuf = combine(&F::shuffle, v, 0xffffffffu, lanes);
  for (size_t i = 0; i < 32; ++i) {
    const size_t src = static_cast<size_t>(lanes[i]);
    CHECK(shuf[i] == (src < 32 ? v[src] : v[i]), "shuffle lane %zu from %zu", i, src);
  }
  const auto down_far = combine(&F::shuffle_down, v, 0xffffffffu, std::vector<int32_t>(32, 40));
  CHECK(down_far == v, "a shuffle_down past the simdgroup returns each lane's own value");

  std::vector<float> with_nan = v;
  const auto imax = std::max_element(v.begin(), v.end()), imin = std::min_element(v.begin(), v.end());
  const float vmax = *imax, vmin = *imin;
  size_t k = 0;
  while (v.begin() + static_cast<std::ptrdiff_t>(k) == imax || v.begin() + static_cast<std::ptrdiff_t>(k) == imin) ++k;
  with_nan[k] = NAN;  // a NaN lane that is neither extreme
  CHECK(combine(&F::max, with_nan, 0xffffffffu)[0] == vmax, "max ignores NaN");
  CHECK(combine(&F::min, with_nan, 0xffffffffu)[3] == vmin, "min ignores NaN");

  using I = metal::detail::simd_ops<int>;
  std::vector<int> ints(32);
  for (int i = 0; i < 32; ++i) ints[static_cast<size_t>(i)] = 1 << (i % 8);
  CHECK(combine(&I::bit_or, ints, 0x0fu)[0] == 0xf && combine(&I::bit_and, ints, 0x3u)[1] == 0 &&
            combine(&I::bit_xor, ints, 0x101u)[0] == 0,
        "simd_and / or / xor");

  using B = metal::detail::simd_ops<bool>;
  std::vector<bool> pattern(32, true);
  pattern[20] = false;
  std::vector<unsigned char> flags(pattern.begin(), pattern.end());
  auto bools = [&](emu::SimdCombine fn, uint32_t active) {
    std::vector<int32_t> params(32, 0);
    std::vector<unsigned char> out(32, 2);
    fn(flags.data(), params.data(), active, out.data(), 1);
    return out;
  };
  CHECK(bools(&B::all, 0xffffffffu)[0] == 0 && bools(&B::all, 0x000fffffu)[3] == 1, "simd_all over present lanes");
  CHECK(bools(&B::any, 0x00100000u)[20] == 0 && bools(&B::any, 0xffffffffu)[0] == 1, "simd_any");
  const auto firsts = bools(&B::is_first, 0xfffffff0u);
  CHECK(firsts[4] == 1 && firsts[5] == 0 && firsts[31] == 0, "simd_is_first");

  // half: every addition of the tree rounds to half.
  using H = metal::detail::simd_ops<half>;
  std::vector<half> hv(32);
  for (int i = 0; i < 32; ++i) hv[static_cast<size_t>(i)] = half(i % 2 ? 1000.0f : 0.3f);
  half hwant{};
  tree_reduce(hv, 0xffffffffu, 0, 32, [](half a, half b) {
    return half::from_bits(binary16_ref().round(double(float(a)) + double(float(b))));
  }, &hwant);
  CHECK(combine(&H::sum, hv, 0xffffffffu)[9].bits == hwant.bits, "half sum");
  using V = metal::detail::simd_ops<float4>;
  std::vector<float4> vv(32, float4(1.0f, 2.0f, 3.0f, 4.0f));
  CHECK(combine(&V::sum, vv, 0x0000ffffu)[0].w == 64.0f, "float4 sum");
}

// ----- kernels through the runtime (or the one-lane stand-in) ------------------------------------------------------
#if defined(SHIM_TEST_WITH_RUNTIME)
constexpr bool kRealRuntime = true;
#else
constexpr bool kRealRuntime = false;
std::vector<emu::Site> sites;  // every barrier and simd call the stand-in saw
struct StubKernel {
  std::string name;
  emu::KernelFn fn;
  bool checked;
};
std::vector<StubKernel>& stub_kernels() {
  static std::vector<StubKernel> k;
  return k;
}
#endif

struct Buffer {
  void* data;
  size_t bytes;
};

// Runs kernel `name` (fast or checked build) over `groups` threadgroups of `threads` threads.
void run(const std::string& name, bool checked, emu::dim3 groups, emu::dim3 threads, std::vector<Buffer> bufs) {
  std::vector<void*> ptrs;
  std::vector<size_t> sizes;
  for (const Buffer& b : bufs) {
    ptrs.push_back(b.data);
    sizes.push_back(b.bytes);
  }
#if defined(SHIM_TEST_WITH_RUNTIME)
  const emu::KernelEntry* entry = emu::find_kernel(name);
  if (!entry) throw emu::Fault("test: kernel " + name + " is not registered");
  emu::Launch l{};
  l.kernel_name = name.c_str();
  l.fn = checked ? entry->checked : entry->fast;
  l.threadgroups = groups;
  l.threads = threads;
  l.buffers = ptrs.data();
  l.buffer_bytes = sizes.data();
  l.num_buffers = static_cast<int>(ptrs.size());
  emu::launch(l);
#else
  // One lane per threadgroup is all the stand-in can run.
  if (threads.x * threads.y * threads.z != 1) throw emu::Fault("test: the stand-in runtime runs one thread");
  emu::KernelFn fn = nullptr;
  for (const StubKernel& k : stub_kernels()) {
    if (k.name == name && k.checked == checked) fn = k.fn;
  }
  if (!fn) throw emu::Fault("test: kernel " + name + " is not registered");
  emu::KernelCtx ctx = make_ctx(ptrs.data(), sizes.data(), static_cast<int>(ptrs.size()));
  ctx.kernel_name = name.c_str();
  ctx.threadgroups_per_grid = groups;
  ctx.threads_per_threadgroup = threads;
  ctx.simdgroups_per_threadgroup = 1;
  ctx.threads_per_simdgroup = emu::kSimdWidth;
  for (uint32_t z = 0; z < groups.z; ++z) {
    for (uint32_t y = 0; y < groups.y; ++y) {
      for (uint32_t x = 0; x < groups.x; ++x) {
        ctx.threadgroup_position_in_grid = emu::dim3{x, y, z};
        ctx.thread_position_in_grid = ctx.threadgroup_position_in_grid;
        fn(ctx);
      }
    }
  }
#endif
}

// What lane 0 holds after simd_ladder_sum (common.h) over the present lanes: shuffle_down returns the lane's own
// value when the source is absent.
float ladder(std::vector<float> v, uint32_t lanes) {
  for (uint32_t delta = 16; delta > 0; delta >>= 1) {
    std::vector<float> next = v;
    for (uint32_t i = 0; i < lanes; ++i) next[i] = v[i] + (i + delta < lanes ? v[i + delta] : v[i]);
    v = next;
  }
  return v[0];
}

// metal/rms_norm.metal's arithmetic, step by step, on the host.
template <class T>
std::vector<T> rms_norm_reference(const std::vector<T>& x, const std::vector<T>& w, uint32_t rows, uint32_t cols,
                                  float eps, uint32_t threads) {
  std::vector<T> y(x.size());
  const uint32_t simds = (threads + 31) / 32;
  for (uint32_t r = 0; r < rows; ++r) {
    std::vector<float> partial(threads, 0.0f);
    for (uint32_t t = 0; t < threads; ++t) {
      for (uint32_t c = t; c < cols; c += threads) {
        const float v = float(x[r * cols + c]);
        partial[t] = std::fma(v, v, partial[t]);
      }
    }
    std::vector<float> per_simd(32, 0.0f);
    for (uint32_t s = 0; s < simds; ++s) {
      const uint32_t lanes = std::min(32u, threads - 32 * s);
      std::vector<float> lane_values(partial.begin() + 32 * s, partial.begin() + 32 * s + lanes);
      lane_values.resize(32, 0.0f);
      per_simd[s] = ladder(lane_values, lanes);
    }
    const float total = ladder(per_simd, std::min(32u, threads));
    const float scale = 1.0f / std::sqrt(total / float(cols) + eps);
    for (uint32_t c = 0; c < cols; ++c) y[r * cols + c] = T(float(x[r * cols + c]) * scale * float(w[c]));
  }
  return y;
}

template <class T>
void check_rms_norm(const char* name, uint32_t threads) {
  const uint32_t rows = 3, cols = 300;
  RmsNormArgs args{rows, cols, 1e-5f, 0, 0};
  std::vector<T> x(rows * cols), w(cols);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (T& e : x) e = T(dist(rng));
  for (T& e : w) e = T(dist(rng));
  const std::vector<T> want = rms_norm_reference(x, w, rows, cols, args.eps, threads);
  for (bool checked : {false, true}) {
    std::vector<T> y(x.size(), T(0.0f));
    run(name, checked, emu::dim3{rows, 1, 1}, emu::dim3{threads, 1, 1},
        {{&args, sizeof args}, {x.data(), x.size() * sizeof(T)}, {w.data(), w.size() * sizeof(T)},
         {y.data(), y.size() * sizeof(T)}});
    CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(T)) == 0, "%s (%s, %u threads) differs from the host",
          name, checked ? "checked" : "fast", threads);
  }
  // A y buffer one element short: the checked build names the kernel (once: the launch's prefix), the buffer and
  // the offset.
  std::vector<T> y(x.size() - 1);
  const std::string f = fault_of([&] {
    run(name, true, emu::dim3{rows, 1, 1}, emu::dim3{threads, 1, 1},
        {{&args, sizeof args}, {x.data(), x.size() * sizeof(T)}, {w.data(), w.size() * sizeof(T)},
         {y.data(), y.size() * sizeof(T)}});
  });
  const std::string last = std::to_string((rows * cols - 1) * sizeof(T));
  CHECK(f.find(std::string("kernel ") + name + ": threadgroup ") == 0 &&
            f.find("buffer 3: access of " + std::to_string(sizeof(T)) + " bytes at byte offset " + last +
                   " outside [0, " + last + ")") != std::string::npos &&
            f.find(std::string("kernel ") + name, 1) == std::string::npos,
        "out-of-range store: '%s'", f.c_str());
}

void test_kernels() {
  const uint32_t rms_threads = kRealRuntime ? 64 : 1;
  check_rms_norm<float>("test_rms_norm_f32", rms_threads);
  check_rms_norm<half>("test_rms_norm_f16", rms_threads);
  check_rms_norm<bfloat>("test_rms_norm_bf16", rms_threads);
  if (kRealRuntime) check_rms_norm<float>("test_rms_norm_f32", 48);

  // Vector loads through a pointer cast; 10 halves are 2 whole half4 and a partial one.
  RmsNormArgs args{1, 10, 0.5f, 0, 0};
  std::vector<half> x(10);
  for (int i = 0; i < 10; ++i) x[static_cast<size_t>(i)] = half(float(i));
  std::vector<float> y(12, -1.0f);
  run("test_scale_h4", true, emu::dim3{2, 1, 1}, emu::dim3{1, 1, 1},
      {{&args, sizeof args}, {x.data(), 10 * sizeof(half)}, {y.data(), y.size() * sizeof(float)}});
  CHECK(y[0] == 0.0f && y[7] == 3.5f, "half4 loads through a cast");
  const std::string f = fault_of([&] {
    run("test_scale_h4", true, emu::dim3{3, 1, 1}, emu::dim3{1, 1, 1},
        {{&args, sizeof args}, {x.data(), 10 * sizeof(half)}, {y.data(), y.size() * sizeof(float)}});
  });
  // The runtime may add where the fault happened (threadgroup, thread) after the kernel's name.
  CHECK(f.rfind("kernel test_scale_h4: ", 0) == 0 &&
            f.find("buffer 1: load of 8 bytes at byte offset 16 outside [0, 20)") != std::string::npos,
        "partial vector: '%s'", f.c_str());

  // The simd kernel: 2 threadgroups; with the real runtime 48 threads each (a full and a half simdgroup).
  const uint32_t threads = kRealRuntime ? 48 : 1, groups = 2, n = threads * groups;
  std::vector<float> in(n), out(n * emu_fast::kSimdOutputs, -7.0f);
  // Within half range (simd_sum of halves), with magnitudes that make the order of additions show.
  for (uint32_t i = 0; i < n; ++i) in[i] = (i % 3 == 0 ? 1000.0f : 0.0625f) * (i % 2 ? -1.0f : 1.0f) + float(i);
  for (bool checked : {false, true}) {
    std::fill(out.begin(), out.end(), -7.0f);
    run("test_simd", checked, emu::dim3{groups, 1, 1}, emu::dim3{threads, 1, 1},
        {{in.data(), in.size() * sizeof(float)}, {out.data(), out.size() * sizeof(float)}});
    for (uint32_t g = 0; g < groups; ++g) {
      for (uint32_t s = 0; s * 32 < threads; ++s) {
        const uint32_t lanes = std::min(32u, threads - 32 * s);
        const uint32_t active = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        std::vector<float> v(32, 0.0f);
        std::vector<half> hv(32);
        for (uint32_t l = 0; l < lanes; ++l) {
          v[l] = in[g * threads + (32 * s + l + 1) % threads];
          hv[l] = half::from_bits(binary16_ref().round(v[l]));
        }
        float sum = 0.0f, sum_y = 0.0f, mx = -INFINITY, mn = INFINITY;
        half hsum{};
        tree_reduce(v, active, 0, 32, [](float a, float b) { return a + b; }, &sum);
        std::vector<float> doubled(v);
        for (float& e : doubled) e *= 2.0f;
        tree_reduce(doubled, active, 0, 32, [](float a, float b) { return a + b; }, &sum_y);
        tree_reduce(hv, active, 0, 32, [](half a, half b) {
          return half::from_bits(binary16_ref().round(double(float(a)) + double(float(b))));
        }, &hsum);
        int lane_xor = 0;
        bool all_above = true;
        for (uint32_t l = 0; l < lanes; ++l) {
          all_above = all_above && v[l] > -990.0f;
          mx = std::max(mx, v[l]);
          mn = std::min(mn, v[l]);
          lane_xor ^= static_cast<int>(l);
        }
        float running = 0.0f;
        for (uint32_t l = 0; l < lanes; ++l) {
          const float* o = &out[(g * threads + 32 * s + l) * emu_fast::kSimdOutputs];
          auto own_or = [&](int64_t src) { return src >= 0 && src < lanes ? v[static_cast<size_t>(src)] : v[l]; };
          const float want[emu_fast::kSimdOutputs] = {
              sum, running + v[l], running, own_or(l + 3), own_or(int64_t{l} - 5), own_or(l ^ 1u), own_or(2), v[0],
              mx, mn, all_above ? 1.0f : 0.0f, lanes > 7 ? 1.0f : 0.0f, l == 0 ? 1.0f : 0.0f, float(hsum), sum_y,
              float(lane_xor), own_or(31 - int64_t{l})};
          running = l == 0 ? v[0] : running + v[l];
          for (uint32_t k = 0; k < emu_fast::kSimdOutputs; ++k) {
            CHECK(bits_of(o[k]) == bits_of(want[k]), "test_simd %s group %u simd %u lane %u output %u: %a want %a",
                  checked ? "checked" : "fast", g, s, l, k, double(o[k]), double(want[k]));
          }
        }
      }
    }
  }
}

// ----- call sites --------------------------------------------------------------------------------------------------
void test_sites() {
#if defined(SHIM_TEST_WITH_RUNTIME)
  std::vector<float> out(32);
  const std::string f = fault_of([&] {
    run("test_diverge", false, emu::dim3{1, 1, 1}, emu::dim3{32, 1, 1}, {{out.data(), out.size() * sizeof(float)}});
  });
  const std::string first = "test_shim.cpp:" + std::to_string(emu_fast::kDivergentSumLine);
  const std::string second = "test_shim.cpp:" + std::to_string(emu_fast::kDivergentSumLine + 2);
  CHECK(f.find(first) != std::string::npos && f.find(second) != std::string::npos,
        "divergent simd_sum must name %s and %s: '%s'", first.c_str(), second.c_str(), f.c_str());
#else
  // A default argument is evaluated at the caller: each site must be this file's line of the call.
  sites.clear();
  const int line = __LINE__ + 1;
  const float s = simd_sum(2.0f);
  threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  simdgroup_barrier(mem_flags::mem_none);
  const float4 v4 = simd_shuffle_down(float4(s), 1);
  CHECK(s == 2.0f && v4.x == 2.0f, "one lane keeps its value");
  CHECK(sites.size() == 4, "%zu sites", sites.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    CHECK(sites[i].line == line + static_cast<int>(i) && std::string(sites[i].file) == __FILE__,
          "site %zu is %s:%d, want %s:%d", i, sites[i].file, sites[i].line, __FILE__, line + static_cast<int>(i));
  }
  // Inside kernels: the shuffle in common.h's ladder and the kernel's own barrier lines.
  sites.clear();
  check_rms_norm<float>("test_rms_norm_f32", 1);
  bool saw_common = false;
  for (const emu::Site& site : sites) saw_common |= std::string(site.file).find("common.h") != std::string::npos;
  CHECK(saw_common, "the ladder's shuffles are sited in common.h");
#endif
}

}  // namespace shim_test

#if !defined(SHIM_TEST_WITH_RUNTIME)
// The one-lane stand-in for src/emu/runtime.cpp: a simdgroup of lane 0 alone, barriers that only record.
namespace emu {
Registrar::Registrar(const char* name, KernelFn fn, bool checked) {
  shim_test::stub_kernels().push_back({name, fn, checked});
}
void barrier(Site site) { shim_test::sites.push_back(site); }
void simd_exchange(const void* in, int32_t param, void* out, size_t bytes, SimdCombine combine, Site site) {
  shim_test::sites.push_back(site);
  unsigned char ins[kSimdWidth * kMaxSimdBytes] = {};
  unsigned char outs[kSimdWidth * kMaxSimdBytes] = {};
  int32_t params[kSimdWidth] = {};
  std::memcpy(ins, in, bytes);
  params[0] = param;
  combine(ins, params, 1u, outs, bytes);
  std::memcpy(out, outs, bytes);
}
}  // namespace emu
#endif

int main(int argc, char** argv) {
  using namespace shim_test;
  const std::string dir = argc > 1 ? argv[1] : ".";
  std::printf("test_shim (%s, %s runtime)\n",
#if defined(__F16C__)
              "F16C conversions",
#else
              "software conversions",
#endif
              kRealRuntime ? "real" : "one-lane stand-in");
  test_half_exhaustive();
  test_half_rounding();
  test_against_file<half>(dir + "/f16_numpy.bin", "half vs numpy");
  test_bfloat_conversions();
  test_against_file<bfloat>(dir + "/bf16_ml_dtypes.bin", "bfloat vs ml_dtypes");
  test_scalar_ops();
  test_vectors();
  test_math();
  test_checked_ptr();
  test_bindings();
  test_simd_combines();
  test_kernels();
#if defined(SHIM_TEST_WITH_RUNTIME)
  // Again with randomised fiber order, each launch run twice and compared: the kernels have no races.
  emu::set_check_mode(true, 12345);
  test_kernels();
  emu::set_check_mode(false);
#endif
  test_sites();
  if (failures) {
    std::printf("FAILED: %d checks\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
#endif  // !EMU_CHECKED
