// The CUDA shim's documented semantics, checked on a GPU (tests/runtime/test_cuda_specific.py builds and runs this):
// the simd_* reduction tree and its lane-independence, shuffles that leave the warp, prefix sums in lane order,
// the 16-bit float conversions, simd_mma_16x8x32's zero products, and sdpa_weight and sdpa_max against their portable
// forms (metal/sdpa_keys.h; src/cuda/shim/sdpa.cuh). Whole warps only, as the backend launches them
// (src/cuda/shim/simd.cuh).
// Prints one line per failure and exits non-zero on any.
//
//   nvcc -std=c++17 -arch=sm_90 --fmad=false -I src/cuda src/cuda/tests/shim_test.cu -o shim_test && ./shim_test
// (In a folder of its own: tools/build_cuda.py links every src/cuda/*.cu into the extension.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "cuda_shim.cuh"

namespace MTLINV_VARIANT_NS {

constexpr int kOps = 8;  // results per thread, see ops()

// Each thread: simd_sum, simd_max, shuffle_down by 3, shuffle_xor 5, shuffle_up 1, prefix sums, broadcast 2.
__global__ void ops(const float* in, float* out) {
  const uint t = threadIdx.x;
  const float v = in[t];
  float* o = out + t * kOps;
  o[0] = simd_sum(v);
  o[1] = simd_max(v);
  o[2] = simd_shuffle_down(v, 3);
  o[3] = simd_shuffle_xor(v, 5);
  o[4] = simd_shuffle_up(v, 1);
  o[5] = simd_prefix_inclusive_sum(v);
  o[6] = simd_prefix_exclusive_sum(v);
  o[7] = simd_broadcast(v, 2);
}

__global__ void convert(const uint32_t* bits, uint16_t* h, uint16_t* b, float* fma_out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float f;
    memcpy(&f, bits + i, 4);
    h[i] = half(f).bits;
    b[i] = bfloat(f).bits;
    fma_out[i] = fma(f, 1.0f + 0x1p-23f, -f);  // the exact product's tail survives only a fused operation
  }
}

constexpr int kMmaCalls = 34;  // per trial: B with K positions c.. zeroed, c = 0..32, then B whole (c = 33)

// Warp (trial, c): D = simd_mma_16x8x32(C, A, B with K positions >= c zeroed), bfloat, in the builtin's layout
// (metal/mma.h): A 16 x 32 and B 8 x 32 row-major bits, C and D 16 x 8.
__global__ void mma_masked(const float* c_in, const uint16_t* a, const uint16_t* b, float* d) {
  const int trial = blockIdx.x, c = blockIdx.y, lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const uint16_t* at = a + trial * 16 * 32;
  const uint16_t* bt = b + trial * 8 * 32;
  uint4 a_lo, a_hi, b_row;
  uint16_t masked[8];
  for (int k = 0; k < 8; ++k) masked[k] = 8 * t + k < c ? bt[g * 32 + 8 * t + k] : uint16_t(0);
  memcpy(&a_lo, at + g * 32 + 8 * t, 16);
  memcpy(&a_hi, at + (g + 8) * 32 + 8 * t, 16);
  memcpy(&b_row, masked, 16);
  const float* ct = c_in + trial * 128;
  float4 acc = float4(ct[g * 8 + 2 * t], ct[g * 8 + 2 * t + 1], ct[(g + 8) * 8 + 2 * t], ct[(g + 8) * 8 + 2 * t + 1]);
  acc = simd_mma_16x8x32<bfloat>(acc, a_lo, a_hi, b_row, ushort(lane));
  float* dt = d + (trial * kMmaCalls + c) * 128;
  dt[g * 8 + 2 * t] = acc.x;
  dt[g * 8 + 2 * t + 1] = acc.y;
  dt[(g + 8) * 8 + 2 * t] = acc.z;
  dt[(g + 8) * 8 + 2 * t + 1] = acc.w;
}

// sdpa_weight's single instruction against the portable form on this target, x < -125 ? 0 : exp2(x), for every float
// from -0 down to -126 (the weights a softmax takes: x = s - max <= 0) and the specials; and sdpa_max against MSL's
// fmax rule on pairs of those and of NaN, +-0 and +-infinity (of two zeros of opposite signs either may come back).
// Counts the disagreements in `bad` (weights, maxima). A NaN result matches a NaN expected one, whatever its payload.
__device__ bool sdpa_weight_ok(float x) {
  const float got = sdpa_weight(x), want = x < -125.0f ? 0.0f : exp2(x);
  return __float_as_uint(got) == __float_as_uint(want) || (got != got && want != want);
}
__device__ bool sdpa_max_ok(float x, float y) {
  const float got = sdpa_max(x, y), larger = x != x ? y : y != y ? x : x < y ? y : x;
  return __float_as_uint(got) == __float_as_uint(larger) || (got == 0.0f && larger == 0.0f) ||
         (got != got && larger != larger);
}

__global__ void sdpa_softmax(unsigned* bad) {
  const unsigned first = 0x80000000u, last = 0xC2FC0000u;  // -0 .. -126, bit patterns ascending with magnitude
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -125.0f, 1.0f, -1.0f};
  unsigned weights = 0, maxima = 0;
  for (unsigned u = first + blockIdx.x * blockDim.x + threadIdx.x; u <= last; u += gridDim.x * blockDim.x) {
    weights += !sdpa_weight_ok(__uint_as_float(u));
    maxima += !sdpa_max_ok(__uint_as_float(u), specials[u % 8]);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // each special, and each against each, once
    for (float x : specials) {
      weights += !sdpa_weight_ok(x);
      for (float y : specials) maxima += !sdpa_max_ok(x, y);
    }
  }
  atomicAdd(bad, weights);
  atomicAdd(bad + 1, maxima);
}

}  // namespace MTLINV_VARIANT_NS

namespace {

int failures = 0;

void expect(bool ok, const char* what, int lane, double got, double want) {
  if (!ok && failures++ < 20) std::printf("FAIL %s lane %d: got %.9g, want %.9g\n", what, lane, got, want);
}

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// The emulator's tree: level 1 adds lanes (0,1) (2,3) ..., level 2 those pairs, ... up to 32.
float tree_sum(const float* v) {
  float val[32];
  std::copy(v, v + 32, val);
  for (int width = 1; width < 32; width *= 2) {
    for (int i = 0; i < 32; i += 2 * width) val[i] = val[i] + val[i + width];
  }
  return val[0];
}

void check_warp_ops(int threads) {
  std::mt19937 gen(threads);
  std::vector<float> in(threads);
  for (int i = 0; i < threads; ++i) {
    // Magnitudes from 2^-20 to 2^20: any other association order changes the sum's bits.
    in[i] = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(gen), static_cast<int>(gen() % 41) - 20);
  }
  float *d_in, *d_out;
  cudaMalloc(&d_in, threads * 4);
  cudaMalloc(&d_out, threads * cu_kernels::kOps * 4);
  cudaMemcpy(d_in, in.data(), threads * 4, cudaMemcpyHostToDevice);
  cu_kernels::ops<<<1, threads>>>(d_in, d_out);
  std::vector<float> out(threads * cu_kernels::kOps);
  if (cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("FAIL launch with %d threads: %s\n", threads, cudaGetErrorString(cudaGetLastError()));
    ++failures;
    return;
  }
  for (int t = 0; t < threads; ++t) {
    const int base = t / 32 * 32, lane = t % 32;
    const float* v = in.data() + base;
    const float* o = out.data() + t * cu_kernels::kOps;
    float mx = v[0], inclusive = 0, exclusive = 0;
    for (int i = 0; i < 32; ++i) {
      mx = std::max(mx, v[i]);
      if (i < lane) exclusive = i == 0 ? v[0] : exclusive + v[i];
      if (i <= lane) inclusive = i == 0 ? v[0] : inclusive + v[i];
    }
    auto from = [&](int src) { return src >= 0 && src < 32 ? v[src] : v[lane]; };
    expect(same(o[0], tree_sum(v)), "simd_sum", t, o[0], tree_sum(v));
    expect(same(o[1], mx), "simd_max", t, o[1], mx);
    expect(same(o[2], from(lane + 3)), "simd_shuffle_down", t, o[2], from(lane + 3));
    expect(same(o[3], from(lane ^ 5)), "simd_shuffle_xor", t, o[3], from(lane ^ 5));
    expect(same(o[4], from(lane - 1)), "simd_shuffle_up", t, o[4], from(lane - 1));
    expect(same(o[5], inclusive), "simd_prefix_inclusive_sum", t, o[5], inclusive);
    expect(same(o[6], exclusive), "simd_prefix_exclusive_sum", t, o[6], exclusive);
    expect(same(o[7], from(2)), "simd_broadcast", t, o[7], from(2));
  }
  cudaFree(d_in);
  cudaFree(d_out);
}

// bfloat16 round to nearest even, as the emulator does it (src/emu/shim/scalar.h); NaNs are checked for NaN only.
uint16_t bf16_reference(uint32_t x) { return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }

void check_conversions() {
  std::mt19937 gen(1);
  std::vector<uint32_t> bits(1 << 20);
  for (auto& b : bits) b = gen();
  const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x477fefffu, 0x477ff000u,
                            0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 0x3f808000u, 0x3f818000u,
                            0x7f7fffffu, 0x00000001u};
  std::copy(std::begin(edges), std::end(edges), bits.begin());
  const int n = static_cast<int>(bits.size());
  uint32_t* d_bits;
  uint16_t *d_h, *d_b;
  float* d_fma;
  cudaMalloc(&d_bits, n * 4);
  cudaMalloc(&d_h, n * 2);
  cudaMalloc(&d_b, n * 2);
  cudaMalloc(&d_fma, n * 4);
  cudaMemcpy(d_bits, bits.data(), n * 4, cudaMemcpyHostToDevice);
  cu_kernels::convert<<<(n + 255) / 256, 256>>>(d_bits, d_h, d_b, d_fma, n);
  std::vector<uint16_t> h(n), b(n);
  std::vector<float> f(n);
  cudaMemcpy(h.data(), d_h, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), d_b, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(f.data(), d_fma, n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, &bits[i], 4);
    if (std::isnan(x)) {
      expect((b[i] & 0x7f80u) == 0x7f80u && (b[i] & 0x7fu), "bfloat(NaN) is NaN", i, b[i], 0);
      expect((h[i] & 0x7c00u) == 0x7c00u && (h[i] & 0x3ffu), "half(NaN) is NaN", i, h[i], 0);
      continue;
    }
    expect(b[i] == bf16_reference(bits[i]), "bfloat rounding", i, b[i], bf16_reference(bits[i]));
    // The host half of cuda_fp16 is a software implementation of the same IEEE rounding.
    const uint16_t want = __half_as_ushort(__float2half_rn(x));
    expect(h[i] == want, "half rounding", i, h[i], want);
    const float fused = std::fmaf(x, 1.0f + 0x1p-23f, -x);  // glibc's fmaf rounds once, like the GPU's
    expect(same(f[i], fused) || !std::isfinite(x), "fma is fused", i, f[i], fused);
  }
  cudaFree(d_bits);
  cudaFree(d_h);
  cudaFree(d_b);
  cudaFree(d_fma);
}

// A product that is exactly zero changes no sum (metal/mma.h): row i of A is 0 from K position c_i on, and D's row
// i is the same bits whether those positions of B hold their values (negative ones, -0) or zeros. The trials aim
// at the corners where IEEE additions would tell a -0 from a +0: C of -0, rows whose seen products are all zero,
// subnormal values, rows that see nothing.
void check_mma_zero_products() {
  constexpr int trials = 2048;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  auto bf16 = [](float f) { uint32_t u; std::memcpy(&u, &f, 4); return static_cast<uint16_t>(u >> 16); };
  auto pick = [&](int kind) -> float {  // 0: normal, 1: +-0, 2: subnormal-range, 3: negative
    switch (kind) {
      case 1: return gen() % 2 ? 0.0f : -0.0f;
      case 2: return normal(gen) * 1e-38f;
      case 3: return -std::fabs(normal(gen));
      default: return normal(gen);
    }
  };
  std::vector<float> c(trials * 128);
  std::vector<uint16_t> a(trials * 16 * 32), b(trials * 8 * 32);
  std::vector<int> seen(trials * 16);
  for (int tr = 0; tr < trials; ++tr) {
    for (int i = 0; i < 128; ++i) c[tr * 128 + i] = tr % 4 == 0 ? -0.0f : pick(gen() % 3);
    for (int i = 0; i < 16; ++i) {
      const int n = gen() % 33;
      seen[tr * 16 + i] = n;
      const int kind = tr % 8 < 2 ? 1 : static_cast<int>(gen() % 3);  // a quarter of trials: seen products all 0
      for (int k = 0; k < 32; ++k) a[(tr * 16 + i) * 32 + k] = bf16(k < n ? pick(kind) : 0.0f);
    }
    for (int i = 0; i < 8 * 32; ++i) b[tr * 256 + i] = bf16(pick(gen() % 4));
  }
  float *d_c, *d_d;
  uint16_t *d_a, *d_b;
  cudaMalloc(&d_c, c.size() * 4);
  cudaMalloc(&d_a, a.size() * 2);
  cudaMalloc(&d_b, b.size() * 2);
  cudaMalloc(&d_d, size_t(trials) * cu_kernels::kMmaCalls * 128 * 4);
  cudaMemcpy(d_c, c.data(), c.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_a, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(d_b, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  cu_kernels::mma_masked<<<dim3(trials, cu_kernels::kMmaCalls), 32>>>(d_c, d_a, d_b, d_d);
  std::vector<float> d(size_t(trials) * cu_kernels::kMmaCalls * 128);
  if (cudaMemcpy(d.data(), d_d, d.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("FAIL mma_masked launch: %s\n", cudaGetErrorString(cudaGetLastError()));
    ++failures;
  }
  for (int tr = 0; tr < trials; ++tr) {
    const float* whole = d.data() + (tr * cu_kernels::kMmaCalls + 32 + 1) * 128;
    for (int i = 0; i < 16; ++i) {
      const float* alone = d.data() + (tr * cu_kernels::kMmaCalls + seen[tr * 16 + i]) * 128;
      for (int j = 0; j < 8; ++j) {
        expect(same(whole[i * 8 + j], alone[i * 8 + j]), "mma: zero products change no sum", tr * 128 + i * 8 + j,
               whole[i * 8 + j], alone[i * 8 + j]);
      }
    }
  }
  cudaFree(d_c);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_d);
}

void check_sdpa_softmax() {
  unsigned* d_bad;
  cudaMalloc(&d_bad, 8);
  cudaMemset(d_bad, 0, 8);
  cu_kernels::sdpa_softmax<<<1024, 256>>>(d_bad);
  unsigned bad[2] = {1, 1};
  if (cudaMemcpy(bad, d_bad, 8, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("FAIL sdpa_softmax launch: %s\n", cudaGetErrorString(cudaGetLastError()));
    ++failures;
  }
  expect(bad[0] == 0, "sdpa_weight is the portable form's exp2", 0, bad[0], 0);
  expect(bad[1] == 0, "sdpa_max follows the fmax rule", 0, bad[1], 0);
  cudaFree(d_bad);
}

}  // namespace

int main() {
  for (int threads : {32, 64, 96}) check_warp_ops(threads);
  check_conversions();
  check_mma_zero_products();
  check_sdpa_softmax();
  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("shim semantics: all checks passed\n");
  return 0;
}
