// Canonical quantized GEMV on the matrix units for 4- and 8-bit weights and 16-bit x (half or bfloat), on targets
// whose plans say DeviceCaps::matrix_units (CUDA). The codes, not the dequantised weights, go to the matrix units:
// with W(n, k) = s[n, g] q(n, k) + b[n, g] (metal/quant.h), each group g of the sum is
//
//   sum_{k in g} x[m, k] W(n, k) = s[n, g] * sum_{k in g} x[m, k] q(n, k) + b[n, g] * sum_{k in g} x[m, k],
//
// and both inner sums are simd_mma_16x8x32 products (metal/mma.h): the first of the codes (small integers, exact
// in 16 bits), the second of a matrix of ones. A lane turns 8 codes into the builtin's operand with a few integer
// instructions, where dequantising them (metal/qgemv_mma.metal, the other widths) costs several float
// instructions each, the work that bounded that kernel on an H200 (benchmarks/results/h200.md).
//
// So this kernel computes the same mathematical sum as qgemv in another form: the float32 weight W(n, k) never
// exists, the scales and biases are applied once per group, and an infinite x gives NaN where a sum of products
// would give an infinity (inf * s - inf * 16 s). The tests bound it against a float64 product with the weights.
//
// Codes as 16-bit floats: OR-ing a code into the mantissa of a power of two gives OFFSET + STEP * q exactly, so the
// builtin sums (OFFSET + STEP q) x, and the group's term is (s / STEP) * D + (b - (OFFSET / STEP) s) * X with D
// the codes' sum and X the ones' sum. STEP puts q in the mantissa's top bits, so D stays within a few times the
// size of the codes' part and the subtraction loses few bits. bfloat cannot hold an 8-bit code that way (7
// mantissa bits): there the codes go through float32, exactly, with OFFSET 0.
//
// Layout: the output tile of gemv_nk_mma (metal/mma_tile.h): 16 outputs, R = 8 or 16 rows, k_splits simdgroups.
// One builtin call per run of 32 values (metal/qgemv_run.h): lane 4 g + t brings values [8 t, 8 t + 8) of the run
// for weight rows n0 + g and n0 + g + 8 (one word at 4 bits, two at 8) and of row g of each group of 8 rows of x.
// A run lies inside one group, so a group's calls accumulate in D and X, which are added to the output after its
// last run. Steps of 4 runs are dealt to the simdgroups in turn (simdgroup sg: steps sg, sg + k_splits, ...).
//
// Invariance (design.md §2): every operation above is fixed by K, the group size and k_splits (from K, N and the
// device), never by M; the builtin sums one (row, output) pair the same way in every position of its 8 rows
// whatever the others hold. Rows past M repeat the last row, weight rows past N the last weight row (computed,
// never stored); runs past K enter as zero x with scale and bias 0, so no branch sits around the builtin.
#include "common.h"
#include "qgemv_args.h"
#include "load.h"
#include "mma.h"
#include "mma_tile.h"
#include "qgemv_run.h"
#include "quant.h"

constant constexpr uint QGEMV_CODES_STEP = 4;  // runs (builtin calls) per step

// The builtin's A operand for the 8 codes of a lane's chunk (`w`: its BITS / 4 words), OFFSET + STEP * q packed in
// pairs, in the slot order that qgemv_codes_x gives x's values. Pair m of 4-bit codes is (value m, value m + 4):
// nibbles m and m + 4 of the word, one shift and one mask away from the top mantissa bits of both halves.
template <typename T, uint BITS>
inline uint4 qgemv_codes_a(thread const uint* w);

template <>
inline uint4 qgemv_codes_a<half, 4>(thread const uint* w) {  // 1024 + 64 q: q in mantissa bits 6..9
  const uint mask = 0x03C003C0u;
  const uint offset = 0x64006400u;
  return uint4(((w[0] << 6) & mask) | offset, ((w[0] << 2) & mask) | offset, ((w[0] >> 2) & mask) | offset,
               ((w[0] >> 6) & mask) | offset);
}

template <>
inline uint4 qgemv_codes_a<bfloat, 4>(thread const uint* w) {  // 128 + 8 q: q in mantissa bits 3..6
  const uint mask = 0x00780078u;
  const uint offset = 0x43004300u;
  return uint4(((w[0] << 3) & mask) | offset, ((w[0] >> 1) & mask) | offset, ((w[0] >> 5) & mask) | offset,
               ((w[0] >> 9) & mask) | offset);
}

// 8-bit codes in half: pairs (0, 2) and (1, 3) from bytes 0 and 2, 1 and 3 of the first word, (4, 6) and (5, 7) of
// the second.
template <>
inline uint4 qgemv_codes_a<half, 8>(thread const uint* w) {  // 1024 + 4 q: q in mantissa bits 2..9
  const uint mask = 0x03FC03FCu;
  const uint offset = 0x64006400u;
  return uint4(((w[0] << 2) & mask) | offset, ((w[0] >> 6) & mask) | offset, ((w[1] << 2) & mask) | offset,
               ((w[1] >> 6) & mask) | offset);
}

// 8-bit codes in bfloat: each through float32 (quant_float), exact in bfloat (8 significant bits), in K order.
template <>
inline uint4 qgemv_codes_a<bfloat, 8>(thread const uint* w) {
  float q[QGEMV_SUB];
  for (uint i = 0; i < QGEMV_SUB; ++i) {
    q[i] = quant_float((w[i / 4] >> (8 * (i % 4))) & 0xFFu);
  }
  return narrow16<bfloat>(q);
}

// (1 / STEP, OFFSET / STEP) of the codes above: powers of two, so scaling by them is exact.
template <typename T, uint BITS>
inline float2 qgemv_codes_scaling();
template <>
inline float2 qgemv_codes_scaling<half, 4>() { return float2(1.0f / 64.0f, 16.0f); }
template <>
inline float2 qgemv_codes_scaling<bfloat, 4>() { return float2(1.0f / 8.0f, 16.0f); }
template <>
inline float2 qgemv_codes_scaling<half, 8>() { return float2(1.0f / 4.0f, 256.0f); }
template <>
inline float2 qgemv_codes_scaling<bfloat, 8>() { return float2(1.0f, 0.0f); }

// A pair of ones in T: the A operand whose products with x sum x.
template <typename T>
inline uint qgemv_codes_ones();
template <>
inline uint qgemv_codes_ones<half>() { return 0x3C003C00u; }
template <>
inline uint qgemv_codes_ones<bfloat>() { return 0x3F803F80u; }

// x's 8 values of a chunk (16 bytes as loaded: pairs (0, 1), (2, 3), (4, 5), (6, 7)) in the codes' slot order: as
// loaded for 8-bit codes in bfloat; (0, 4), (1, 5), (2, 6), (3, 7) for 4 bits; (0, 2), (1, 3), (4, 6), (5, 7) for
// 8 bits in half.
template <typename T, uint BITS>
inline uint4 qgemv_codes_x(uint4 r) {
  return r;
}
inline uint4 qgemv_pairs_0_4(uint4 r) {
  return uint4((r.x & 0xFFFFu) | (r.z << 16), (r.x >> 16) | (r.z & 0xFFFF0000u), (r.y & 0xFFFFu) | (r.w << 16),
               (r.y >> 16) | (r.w & 0xFFFF0000u));
}
template <>
inline uint4 qgemv_codes_x<half, 4>(uint4 r) { return qgemv_pairs_0_4(r); }
template <>
inline uint4 qgemv_codes_x<bfloat, 4>(uint4 r) { return qgemv_pairs_0_4(r); }
template <>
inline uint4 qgemv_codes_x<half, 8>(uint4 r) {
  return uint4((r.x & 0xFFFFu) | (r.y << 16), (r.x >> 16) | (r.y & 0xFFFF0000u), (r.z & 0xFFFFu) | (r.w << 16),
               (r.z >> 16) | (r.w & 0xFFFF0000u));
}

// Call C of a step (run j = 4 s + C of the lane's weight rows, lane chunk t): the codes' and the ones' products for
// every group of 8 rows, then, after a group's last run, its term added to acc. `words`: [C][row h][BITS / 4],
// `scale`, `bias`: [C][row h], the run's group; `valid`: whether the run lies inside K.
template <typename T, uint BITS, uint B, uint C>
inline void qgemv_codes_call(thread float4* acc, thread float4* d, thread float4* ones_sum,
                             thread const uint* words, thread const float* scale, thread const float* bias,
                             device const T* x, thread const uint* x_row, uint k, bool valid, bool x_vector,
                             uint runs_per_group, ushort lane) {
  constexpr uint W = BITS / 4;  // words of a lane's chunk
  const uint4 a_lo = qgemv_codes_a<T, BITS>(words + (2 * C) * W);
  const uint4 a_hi = qgemv_codes_a<T, BITS>(words + (2 * C + 1) * W);
  const uint4 ones = uint4(qgemv_codes_ones<T>());
  for (uint j = 0; j < B; ++j) {
    device const T* p = x + x_row[j] + k;
    const uint4 raw = valid && x_vector ? load16(p) : load16_upto(p, valid ? 8u : 0u);
    const uint4 b = qgemv_codes_x<T, BITS>(raw);
    d[j] = simd_mma_16x8x32<T>(d[j], a_lo, a_hi, b, lane);
    ones_sum[j] = simd_mma_16x8x32<T>(ones_sum[j], ones, ones, b, lane);
  }
  if (((C + 1) & (runs_per_group - 1)) == 0) {  // the group's last run (runs_per_group: 1, 2 or 4)
    // Lane 4 g + t holds outputs n0 + g (components 0, 1) and n0 + g + 8 (2, 3).
    const float2 scaling = qgemv_codes_scaling<T, BITS>();
    const float s_lo = scale[2 * C] * scaling.x;
    const float s_hi = scale[2 * C + 1] * scaling.x;
    const float c_lo = bias[2 * C] - scaling.y * scale[2 * C];
    const float c_hi = bias[2 * C + 1] - scaling.y * scale[2 * C + 1];
    const float4 s4 = float4(s_lo, s_lo, s_hi, s_hi);
    const float4 c4 = float4(c_lo, c_lo, c_hi, c_hi);
    for (uint j = 0; j < B; ++j) {
      acc[j] = fma(s4, d[j], fma(c4, ones_sum[j], acc[j]));
      d[j] = float4(0.0f);
      ones_sum[j] = float4(0.0f);
    }
  }
}

// The loads of one step for the lane: chunk t of runs 4 s .. 4 s + 3 of both weight rows (first words w_off[2]),
// and their groups' scales and biases (first groups g_off[2]). A run past K (only in the last step; `whole`: the
// caller knows there is none) loads the last run's words and gets scale and bias 0.
template <uint BITS, typename S>
inline void qgemv_codes_load(device const uint* wq, device const S* scales, device const S* biases,
                             thread const uint* w_off, thread const uint* g_off, uint s, uint t, uint runs,
                             uint runs_per_group, bool whole, bool w_vector, thread uint* words, thread float* scale,
                             thread float* bias) {
  constexpr uint W = BITS / 4;
  for (uint c = 0; c < QGEMV_CODES_STEP; ++c) {
    const uint j = QGEMV_CODES_STEP * s + c;
    const bool valid = whole || j < runs;
    const uint run = valid ? j : runs - 1;
    for (uint h = 0; h < 2; ++h) {
      device const uint* p = wq + w_off[h] + run * BITS + t * W;
      if (W == 2 && w_vector) {
        const uint2 pair = *((device const uint2*)p);
        words[(2 * c + h) * W] = pair.x;
        words[(2 * c + h) * W + 1] = pair.y;
      } else {
        for (uint i = 0; i < W; ++i) {
          words[(2 * c + h) * W + i] = p[i];
        }
      }
      const uint g = g_off[h] + (run >> (runs_per_group / 2));  // log2 of 1, 2, 4
      scale[2 * c + h] = valid ? float(scales[g]) : 0.0f;
      bias[2 * c + h] = valid ? float(biases[g]) : 0.0f;
    }
  }
}

// One step's four calls, in order (`whole`: the caller knows all four runs lie inside K).
template <typename T, uint BITS, uint B>
inline void qgemv_codes_step(thread float4* acc, thread float4* d, thread float4* ones_sum,
                             thread const uint* words, thread const float* scale, thread const float* bias,
                             device const T* x, thread const uint* x_row, uint s, uint t, uint runs, bool whole,
                             bool x_vector, uint runs_per_group, ushort lane) {
  const uint k = QGEMV_CODES_STEP * s * QGEMV_RUN + QGEMV_SUB * t;  // the lane's first K position in the step
  const uint inside = runs - QGEMV_CODES_STEP * s;                  // runs of the step inside K (if below 4)
  qgemv_codes_call<T, BITS, B, 0>(acc, d, ones_sum, words, scale, bias, x, x_row, k, whole || inside > 0,
                                  x_vector, runs_per_group, lane);
  qgemv_codes_call<T, BITS, B, 1>(acc, d, ones_sum, words, scale, bias, x, x_row, k + QGEMV_RUN,
                                  whole || inside > 1, x_vector, runs_per_group, lane);
  qgemv_codes_call<T, BITS, B, 2>(acc, d, ones_sum, words, scale, bias, x, x_row, k + 2 * QGEMV_RUN,
                                  whole || inside > 2, x_vector, runs_per_group, lane);
  qgemv_codes_call<T, BITS, B, 3>(acc, d, ones_sum, words, scale, bias, x, x_row, k + 3 * QGEMV_RUN,
                                  whole || inside > 3, x_vector, runs_per_group, lane);
}

// R: rows of x per tile, 8 or 16 (the plan's pick from M). Grid: (ceil(N / 16), ceil(rows / R), 1); threadgroup:
// k_splits simdgroups.
template <typename T, uint BITS, typename S, uint R>
[[kernel]] void qgemv_mma_codes(
    constant QGemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const uint* wq [[buffer(2)]],
    device const S* scales [[buffer(3)]],
    device const S* biases [[buffer(4)]],
    device const T* bias [[buffer(5)]],
    device T* y [[buffer(6)]],
    uint2 tile [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint B = R / 8;  // groups of 8 rows of x per tile
  constexpr uint WORDS = 2 * QGEMV_CODES_STEP * (BITS / 4);  // a step's words per lane: [call][row][chunk words]
  threadgroup float4 partials[MMA_TILE_MAX_SPLITS * B * SIMD_WIDTH];  // mma_tile_store's

  const uint g = lane / 4;
  const uint t = lane % 4;
  const uint n0 = tile.x * MMA_TILE_COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  const uint runs = K / QGEMV_RUN;
  const uint runs_per_group = args.group_size / QGEMV_RUN;
  const bool x_vector = args.vector_loads != 0;
  const bool w_vector = args.w_vector_loads != 0;

  // Weight rows n0 + g and n0 + g + 8, clamped to N: their first word and first group (offsets fit 32 bits: the
  // op checks it).
  uint w_off[2];
  uint g_off[2];
  for (uint h = 0; h < 2; ++h) {
    const uint n = min(n0 + g + 8 * h, args.n - 1);
    w_off[h] = n * runs * BITS;
    g_off[h] = n * (runs / runs_per_group);
  }
  uint x_row[B];  // where row g of each group of 8 starts in x, clamped to the last row
  float4 acc[B];
  float4 d[B];         // the current group's codes' sums
  float4 ones_sum[B];  // the current group's sums of x
  for (uint j = 0; j < B; ++j) {
    x_row[j] = min(r0 + 8 * j + g, args.rows - 1) * K;
    acc[j] = float4(0.0f);
    d[j] = float4(0.0f);
    ones_sum[j] = float4(0.0f);
  }

  // Where the loads may be 16 bytes wide, the steps whose four runs all lie inside K go two at a time (all their
  // loads issued before the first call) with no branch; then the rest one at a time (all of them otherwise). The
  // same values reach the same calls either way. The two steps' registers are named rather than indexed by a loop
  // over them, which nvcc may leave rolled and put on the stack.
  const uint full_steps = runs / QGEMV_CODES_STEP;
  const uint steps = (runs + QGEMV_CODES_STEP - 1) / QGEMV_CODES_STEP;
  uint s = sg;
  if (x_vector && (BITS == 4 || w_vector)) {
    for (; s + args.k_splits < full_steps; s += 2 * args.k_splits) {
      uint words0[WORDS];
      uint words1[WORDS];
      float scale0[2 * QGEMV_CODES_STEP];
      float scale1[2 * QGEMV_CODES_STEP];
      float bias0[2 * QGEMV_CODES_STEP];
      float bias1[2 * QGEMV_CODES_STEP];
      const uint s1 = s + args.k_splits;
      qgemv_codes_load<BITS, S>(wq, scales, biases, w_off, g_off, s, t, runs, runs_per_group, true, true, words0,
                                scale0, bias0);
      qgemv_codes_load<BITS, S>(wq, scales, biases, w_off, g_off, s1, t, runs, runs_per_group, true, true, words1,
                                scale1, bias1);
      qgemv_codes_step<T, BITS, B>(acc, d, ones_sum, words0, scale0, bias0, x, x_row, s, t, runs, true, true,
                                   runs_per_group, lane);
      qgemv_codes_step<T, BITS, B>(acc, d, ones_sum, words1, scale1, bias1, x, x_row, s1, t, runs, true, true,
                                   runs_per_group, lane);
    }
  }
  for (; s < steps; s += args.k_splits) {
    uint words[WORDS];
    float scale[2 * QGEMV_CODES_STEP];
    float bias_g[2 * QGEMV_CODES_STEP];
    qgemv_codes_load<BITS, S>(wq, scales, biases, w_off, g_off, s, t, runs, runs_per_group, false, w_vector, words,
                              scale, bias_g);
    qgemv_codes_step<T, BITS, B>(acc, d, ones_sum, words, scale, bias_g, x, x_row, s, t, runs, false, x_vector,
                                 runs_per_group, lane);
  }

  mma_tile_store<T, B>(partials, acc, args.k_splits, args.has_bias != 0, bias, y, n0, args.n, r0, args.rows, lane,
                       sg);
}

MTLINV_KERNEL(qgemv_mma_b4_r8_f16, qgemv_mma_codes, half, 4, half, 8)
MTLINV_KERNEL(qgemv_mma_b4_r16_f16, qgemv_mma_codes, half, 4, half, 16)
MTLINV_KERNEL(qgemv_mma_b4_r8_bf16, qgemv_mma_codes, bfloat, 4, bfloat, 8)
MTLINV_KERNEL(qgemv_mma_b4_r16_bf16, qgemv_mma_codes, bfloat, 4, bfloat, 16)
MTLINV_KERNEL(qgemv_mma_b8_r8_f16, qgemv_mma_codes, half, 8, half, 8)
MTLINV_KERNEL(qgemv_mma_b8_r16_f16, qgemv_mma_codes, half, 8, half, 16)
MTLINV_KERNEL(qgemv_mma_b8_r8_bf16, qgemv_mma_codes, bfloat, 8, bfloat, 8)
MTLINV_KERNEL(qgemv_mma_b8_r16_bf16, qgemv_mma_codes, bfloat, 8, bfloat, 16)

// float32 scales and biases (GGUF imports, as for qgemv).
MTLINV_KERNEL(qgemv_mma_b4_r8_f16_sf32, qgemv_mma_codes, half, 4, float, 8)
MTLINV_KERNEL(qgemv_mma_b4_r16_f16_sf32, qgemv_mma_codes, half, 4, float, 16)
MTLINV_KERNEL(qgemv_mma_b4_r8_bf16_sf32, qgemv_mma_codes, bfloat, 4, float, 8)
MTLINV_KERNEL(qgemv_mma_b4_r16_bf16_sf32, qgemv_mma_codes, bfloat, 4, float, 16)
MTLINV_KERNEL(qgemv_mma_b8_r8_f16_sf32, qgemv_mma_codes, half, 8, float, 8)
MTLINV_KERNEL(qgemv_mma_b8_r16_f16_sf32, qgemv_mma_codes, half, 8, float, 16)
MTLINV_KERNEL(qgemv_mma_b8_r8_bf16_sf32, qgemv_mma_codes, bfloat, 8, float, 8)
MTLINV_KERNEL(qgemv_mma_b8_r16_bf16_sf32, qgemv_mma_codes, bfloat, 8, float, 16)
