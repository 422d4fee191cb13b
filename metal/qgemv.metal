// Quantized matrix-vector product, canonical (M <= limit, and M == 1): y[m, n] = sum_k x[m, k] * W(n, k)
// (+ bias[n]) with W in the affine format of metal/quant.h. The quantized sibling of gemv_nk, with the same
// structure and invariance argument (design.md §2). Lanes own fixed runs of 32 K positions, each lane's partial
// sums are combined by a fixed shuffle ladder and the k_splits simdgroups (a function of K, N, the bit width and
// the device) in index order. The tile height R is a template parameter (1, 2, 4 or 8, picked by the plan from M);
// every row has its own accumulators with the row loop innermost and constant trip counts, and tile rows past M
// repeat the last row (computed, never stored), so row r runs exactly the fma sequence it runs alone, whatever the
// other rows hold. The weight words, scales and biases of a run are read and dequantised once for all rows of the
// tile. Above the limit, qgemm (metal/qgemm.metal) takes the rows, in another reduction order.
// The unit is a run of 32 consecutive values of one weight row (metal/qgemv_run.h). On targets with matrix units,
// qgemv_mma (metal/qgemv_mma.metal) serves 16-bit x instead.
#include "common.h"
#include "qgemv_args.h"  // QGemvArgs, QGEMV_COLS, QGEMV_MAX_SPLITS
#include "load.h"
#include "qgemv_run.h"
#include "quant.h"

// Values [8 SUB, 8 SUB + 8) of one run (K positions [k, k + 32)) of the four weight rows, whose words (`words`,
// [column][BITS]), scales and biases ([column][RUN_GROUPS]) are already loaded, against every row of the tile:
// each value dequantised once and applied to the R rows, row r's four outputs accumulating in acc[r] in K order. SUB
// is a template parameter so that the words (and the group) it picks are known at compile time: a loop over it that
// a compiler left rolled would index the words by a variable and put them on the stack (nvcc does at R >= 4).
template <typename T, uint BITS, typename S, uint R, uint RUN_GROUPS, uint SUB>
inline void qgemv_sub(thread float4* acc, thread const uint* words, thread const float* scale,
                      thread const float* bias, device const T* x, thread const uint* x_row, uint k, bool x_vector) {
  float wv[QGEMV_COLS * QGEMV_SUB];  // column c's weight at K position k + 8 SUB + i: wv[c * 8 + i]
  for (uint c = 0; c < QGEMV_COLS; ++c) {
    uint q[QGEMV_SUB];
    qgemv_unpack<BITS>(words + c * BITS, SUB, q);
    const uint g = c * RUN_GROUPS + qgemv_sub_group<RUN_GROUPS>(SUB);
    for (uint i = 0; i < QGEMV_SUB; ++i) {
      wv[c * QGEMV_SUB + i] = quant_dequantize<S>(scale[g], q[i], bias[g]);
    }
  }
  for (uint r = 0; r < R; ++r) {
    float xv[QGEMV_SUB];
    load_floats<T, QGEMV_SUB>(x + x_row[r] + k + SUB * QGEMV_SUB, QGEMV_SUB, x_vector, xv);
    float4 a = acc[r];
    for (uint i = 0; i < QGEMV_SUB; ++i) {
      a = fma(float4(xv[i]), float4(wv[i], wv[QGEMV_SUB + i], wv[2 * QGEMV_SUB + i], wv[3 * QGEMV_SUB + i]), a);
    }
    acc[r] = a;
  }
}

// One whole run: its four groups of 8 values in K order. The one fma sequence of every qgemv output, whichever
// load path supplied the words.
template <typename T, uint BITS, typename S, uint R, uint RUN_GROUPS>
inline void qgemv_run(thread float4* acc, thread const uint* words, thread const float* scale,
                      thread const float* bias, device const T* x, thread const uint* x_row, uint k, bool x_vector) {
  static_assert(QGEMV_RUN == 4 * QGEMV_SUB, "a run is four groups of 8 values");
  qgemv_sub<T, BITS, S, R, RUN_GROUPS, 0>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, S, R, RUN_GROUPS, 1>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, S, R, RUN_GROUPS, 2>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, S, R, RUN_GROUPS, 3>(acc, words, scale, bias, x, x_row, k, x_vector);
}

// Canonical. Threadgroup: k_splits simdgroups, all on the same QGEMV_COLS outputs. Lane `lane` of simdgroup `sg`
// owns the runs j = sg * 32 + lane + i * (k_splits * 32), K positions [32 j, 32 j + 32): a simdgroup's step covers
// 1024 consecutive positions, so its loads of the packed words (BITS * 128 bytes per weight row) and of x are
// contiguous across lanes. At up to 4 bits and R <= 2, two runs' words are loaded before the arithmetic that uses
// them; otherwise one run's (at 5, 6 and 8 bits already as many bytes; at R >= 4 the arithmetic per run is long
// and the registers go to the rows). RUN_GROUPS: 2 at group size 16, else 1 (metal/qgemv_run.h). Grid:
// (ceil(N / 4), ceil(rows / R), 1).
template <typename T, uint BITS, typename S, uint R, uint RUN_GROUPS>
[[kernel]] void qgemv(
    constant QGemvArgs& args [[buffer(QGEMV_SLOT_ARGS)]],
    device const T* x [[buffer(QGEMV_SLOT_X)]],
    device const uint* wq [[buffer(QGEMV_SLOT_WQ)]],
    device const S* scales [[buffer(QGEMV_SLOT_SCALES)]],
    device const S* biases [[buffer(QGEMV_SLOT_BIASES)]],
    device const T* bias [[buffer(QGEMV_SLOT_BIAS)]],
    device T* y [[buffer(QGEMV_SLOT_Y)]],
    device const float* supers [[buffer(QGEMV_SLOT_SUPERS)]],
    uint2 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint COLS = QGEMV_COLS;
  // Runs loaded ahead: at least 16 bytes of each weight row; one at R >= 4, whose arithmetic per run is long
  // enough to cover the next loads and whose accumulators and x values need the registers.
  constexpr uint IN_FLIGHT = BITS <= 4 && R <= 2 ? 2 : 1;
  threadgroup float4 partials[QGEMV_MAX_SPLITS][R];  // [k split][row]: each simdgroup's ladder result

  const uint n0 = tile.x * COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  const uint runs = K / QGEMV_RUN;
  const uint group_shift = qgemv_group_shift(args.group_size);
  const uint super_shift = qgemv_super_shift<RUN_GROUPS>(group_shift);
  const bool x_vector = args.vector_loads != 0;
  const bool w_vector = args.w_vector_loads != 0;

  uint x_row[R];  // where each row of the tile starts in x (rows * K fits 32 bits: the op checks it)
  for (uint r = 0; r < R; ++r) {
    x_row[r] = min(r0 + r, args.rows - 1) * K;
  }
  // Weight rows past N are clamped to the last row: loaded, never stored. Offsets rather than pointers: fewer
  // registers (wq holds fewer than 2^32 words, scales fewer than 2^32 values: the op checks it).
  uint w_off[COLS];  // first word of each weight row
  uint g_off[COLS];  // first group of each weight row, in scales and biases
  for (uint c = 0; c < COLS; ++c) {
    const uint n = min(n0 + c, args.n - 1);
    w_off[c] = n * runs * BITS;
    g_off[c] = n * qgemv_run_group<RUN_GROUPS>(runs, group_shift);
  }

  float4 acc[R];
  for (uint r = 0; r < R; ++r) {
    acc[r] = float4(0.0f);
  }
  const uint stride = args.k_splits * SIMD_WIDTH;  // runs per step of the threadgroup
  uint j = sg * SIMD_WIDTH + lane;
  if (IN_FLIGHT == 2) {
    // Two runs at a time, all their loads issued before the arithmetic that uses them. The two runs' registers
    // are named rather than indexed by a loop over them, which nvcc may leave rolled and put on the stack.
    for (; j + stride < runs; j += 2 * stride) {
      uint words0[COLS * BITS];
      uint words1[COLS * BITS];
      float scale0[COLS * RUN_GROUPS];
      float scale1[COLS * RUN_GROUPS];
      float bias0[COLS * RUN_GROUPS];
      float bias1[COLS * RUN_GROUPS];
      const uint g0 = qgemv_run_group<RUN_GROUPS>(j, group_shift);
      const uint g1 = qgemv_run_group<RUN_GROUPS>(j + stride, group_shift);
      for (uint c = 0; c < COLS; ++c) {
        qgemv_load_run<BITS, RUN_GROUPS, S>(wq, scales, biases, supers, super_shift, w_off[c], g_off[c], j, g0,
                                            w_vector, words0 + c * BITS, scale0 + c * RUN_GROUPS,
                                            bias0 + c * RUN_GROUPS);
        qgemv_load_run<BITS, RUN_GROUPS, S>(wq, scales, biases, supers, super_shift, w_off[c], g_off[c], j + stride,
                                            g1, w_vector, words1 + c * BITS, scale1 + c * RUN_GROUPS,
                                            bias1 + c * RUN_GROUPS);
      }
      qgemv_run<T, BITS, S, R, RUN_GROUPS>(acc, words0, scale0, bias0, x, x_row, j * QGEMV_RUN, x_vector);
      qgemv_run<T, BITS, S, R, RUN_GROUPS>(acc, words1, scale1, bias1, x, x_row, (j + stride) * QGEMV_RUN,
                                           x_vector);
    }
  }
  // One run at a time: every run when IN_FLIGHT == 1, else the odd one out.
  for (; j < runs; j += stride) {
    uint words[COLS * BITS];
    float scale[COLS * RUN_GROUPS];
    float bias_g[COLS * RUN_GROUPS];
    const uint g = qgemv_run_group<RUN_GROUPS>(j, group_shift);
    for (uint c = 0; c < COLS; ++c) {
      qgemv_load_run<BITS, RUN_GROUPS, S>(wq, scales, biases, supers, super_shift, w_off[c], g_off[c], j, g,
                                          w_vector, words + c * BITS, scale + c * RUN_GROUPS,
                                          bias_g + c * RUN_GROUPS);
    }
    qgemv_run<T, BITS, S, R, RUN_GROUPS>(acc, words, scale, bias_g, x, x_row, j * QGEMV_RUN, x_vector);
  }

  for (uint r = 0; r < R; ++r) {
    const float4 total = simd_ladder_sum(acc[r]);
    if (lane == 0) {
      partials[sg][r] = total;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Epilogue: lane (r, c) of simdgroup 0 adds the splits in index order, then the bias.
  const uint r = lane / COLS;
  const uint c = lane % COLS;
  if (sg == 0 && r < R && r0 + r < args.rows && n0 + c < args.n) {
    float sum = partials[0][r][c];
    for (uint s = 1; s < args.k_splits; ++s) {
      sum += partials[s][r][c];
    }
    if (args.has_bias != 0) {
      sum += float(bias[n0 + c]);
    }
    y[ulong(r0 + r) * args.n + n0 + c] = T(sum);
  }
}

MTLINV_KERNEL(qgemv_b2_r1_f32, qgemv, float, 2, float, 1, 1)
MTLINV_KERNEL(qgemv_b2_r2_f32, qgemv, float, 2, float, 2, 1)
MTLINV_KERNEL(qgemv_b2_r4_f32, qgemv, float, 2, float, 4, 1)
MTLINV_KERNEL(qgemv_b2_r8_f32, qgemv, float, 2, float, 8, 1)
MTLINV_KERNEL(qgemv_b2_r1_f16, qgemv, half, 2, half, 1, 1)
MTLINV_KERNEL(qgemv_b2_r2_f16, qgemv, half, 2, half, 2, 1)
MTLINV_KERNEL(qgemv_b2_r4_f16, qgemv, half, 2, half, 4, 1)
MTLINV_KERNEL(qgemv_b2_r8_f16, qgemv, half, 2, half, 8, 1)
MTLINV_KERNEL(qgemv_b2_r1_bf16, qgemv, bfloat, 2, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b2_r2_bf16, qgemv, bfloat, 2, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b2_r4_bf16, qgemv, bfloat, 2, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b2_r8_bf16, qgemv, bfloat, 2, bfloat, 8, 1)
MTLINV_KERNEL(qgemv_b3_r1_f32, qgemv, float, 3, float, 1, 1)
MTLINV_KERNEL(qgemv_b3_r2_f32, qgemv, float, 3, float, 2, 1)
MTLINV_KERNEL(qgemv_b3_r4_f32, qgemv, float, 3, float, 4, 1)
MTLINV_KERNEL(qgemv_b3_r8_f32, qgemv, float, 3, float, 8, 1)
MTLINV_KERNEL(qgemv_b3_r1_f16, qgemv, half, 3, half, 1, 1)
MTLINV_KERNEL(qgemv_b3_r2_f16, qgemv, half, 3, half, 2, 1)
MTLINV_KERNEL(qgemv_b3_r4_f16, qgemv, half, 3, half, 4, 1)
MTLINV_KERNEL(qgemv_b3_r8_f16, qgemv, half, 3, half, 8, 1)
MTLINV_KERNEL(qgemv_b3_r1_bf16, qgemv, bfloat, 3, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b3_r2_bf16, qgemv, bfloat, 3, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b3_r4_bf16, qgemv, bfloat, 3, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b3_r8_bf16, qgemv, bfloat, 3, bfloat, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_f32, qgemv, float, 4, float, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_f32, qgemv, float, 4, float, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_f32, qgemv, float, 4, float, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_f32, qgemv, float, 4, float, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_f16, qgemv, half, 4, half, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_f16, qgemv, half, 4, half, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_f16, qgemv, half, 4, half, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_f16, qgemv, half, 4, half, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_bf16, qgemv, bfloat, 4, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16, qgemv, bfloat, 4, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_bf16, qgemv, bfloat, 4, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_bf16, qgemv, bfloat, 4, bfloat, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_f32, qgemv, float, 5, float, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_f32, qgemv, float, 5, float, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_f32, qgemv, float, 5, float, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_f32, qgemv, float, 5, float, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_f16, qgemv, half, 5, half, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_f16, qgemv, half, 5, half, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_f16, qgemv, half, 5, half, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_f16, qgemv, half, 5, half, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_bf16, qgemv, bfloat, 5, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_bf16, qgemv, bfloat, 5, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_bf16, qgemv, bfloat, 5, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_bf16, qgemv, bfloat, 5, bfloat, 8, 1)
MTLINV_KERNEL(qgemv_b6_r1_f32, qgemv, float, 6, float, 1, 1)
MTLINV_KERNEL(qgemv_b6_r2_f32, qgemv, float, 6, float, 2, 1)
MTLINV_KERNEL(qgemv_b6_r4_f32, qgemv, float, 6, float, 4, 1)
MTLINV_KERNEL(qgemv_b6_r8_f32, qgemv, float, 6, float, 8, 1)
MTLINV_KERNEL(qgemv_b6_r1_f16, qgemv, half, 6, half, 1, 1)
MTLINV_KERNEL(qgemv_b6_r2_f16, qgemv, half, 6, half, 2, 1)
MTLINV_KERNEL(qgemv_b6_r4_f16, qgemv, half, 6, half, 4, 1)
MTLINV_KERNEL(qgemv_b6_r8_f16, qgemv, half, 6, half, 8, 1)
MTLINV_KERNEL(qgemv_b6_r1_bf16, qgemv, bfloat, 6, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b6_r2_bf16, qgemv, bfloat, 6, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b6_r4_bf16, qgemv, bfloat, 6, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b6_r8_bf16, qgemv, bfloat, 6, bfloat, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_f32, qgemv, float, 8, float, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_f32, qgemv, float, 8, float, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_f32, qgemv, float, 8, float, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_f32, qgemv, float, 8, float, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_f16, qgemv, half, 8, half, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_f16, qgemv, half, 8, half, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_f16, qgemv, half, 8, half, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_f16, qgemv, half, 8, half, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_bf16, qgemv, bfloat, 8, bfloat, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_bf16, qgemv, bfloat, 8, bfloat, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_bf16, qgemv, bfloat, 8, bfloat, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_bf16, qgemv, bfloat, 8, bfloat, 8, 1)

// float32 scales and biases with 16-bit activations: GGUF's float16 block scales do not fit bfloat16, so
// imported GGUF weights keep their scales in float32 (mtlinv.gguf_blocks).
MTLINV_KERNEL(qgemv_b4_r1_f16_sf32, qgemv, half, 4, float, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_f16_sf32, qgemv, half, 4, float, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_f16_sf32, qgemv, half, 4, float, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_f16_sf32, qgemv, half, 4, float, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_bf16_sf32, qgemv, bfloat, 4, float, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16_sf32, qgemv, bfloat, 4, float, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_bf16_sf32, qgemv, bfloat, 4, float, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_bf16_sf32, qgemv, bfloat, 4, float, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_f16_sf32, qgemv, half, 8, float, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_f16_sf32, qgemv, half, 8, float, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_f16_sf32, qgemv, half, 8, float, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_f16_sf32, qgemv, half, 8, float, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_bf16_sf32, qgemv, bfloat, 8, float, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_bf16_sf32, qgemv, bfloat, 8, float, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_bf16_sf32, qgemv, bfloat, 8, float, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_bf16_sf32, qgemv, bfloat, 8, float, 8, 1)

// Group size 16, at 8 bits: GGUF's Q6_K, whose scales cover 16 values, imported exactly (mtlinv.gguf_kquants).
MTLINV_KERNEL(qgemv_b8_r1_f32_g16, qgemv, float, 8, float, 1, 2)
MTLINV_KERNEL(qgemv_b8_r2_f32_g16, qgemv, float, 8, float, 2, 2)
MTLINV_KERNEL(qgemv_b8_r4_f32_g16, qgemv, float, 8, float, 4, 2)
MTLINV_KERNEL(qgemv_b8_r8_f32_g16, qgemv, float, 8, float, 8, 2)
MTLINV_KERNEL(qgemv_b8_r1_f16_g16, qgemv, half, 8, half, 1, 2)
MTLINV_KERNEL(qgemv_b8_r2_f16_g16, qgemv, half, 8, half, 2, 2)
MTLINV_KERNEL(qgemv_b8_r4_f16_g16, qgemv, half, 8, half, 4, 2)
MTLINV_KERNEL(qgemv_b8_r8_f16_g16, qgemv, half, 8, half, 8, 2)
MTLINV_KERNEL(qgemv_b8_r1_bf16_g16, qgemv, bfloat, 8, bfloat, 1, 2)
MTLINV_KERNEL(qgemv_b8_r2_bf16_g16, qgemv, bfloat, 8, bfloat, 2, 2)
MTLINV_KERNEL(qgemv_b8_r4_bf16_g16, qgemv, bfloat, 8, bfloat, 4, 2)
MTLINV_KERNEL(qgemv_b8_r8_bf16_g16, qgemv, bfloat, 8, bfloat, 8, 2)
MTLINV_KERNEL(qgemv_b8_r1_f16_sf32_g16, qgemv, half, 8, float, 1, 2)
MTLINV_KERNEL(qgemv_b8_r2_f16_sf32_g16, qgemv, half, 8, float, 2, 2)
MTLINV_KERNEL(qgemv_b8_r4_f16_sf32_g16, qgemv, half, 8, float, 4, 2)
MTLINV_KERNEL(qgemv_b8_r8_f16_sf32_g16, qgemv, half, 8, float, 8, 2)
MTLINV_KERNEL(qgemv_b8_r1_bf16_sf32_g16, qgemv, bfloat, 8, float, 1, 2)
MTLINV_KERNEL(qgemv_b8_r2_bf16_sf32_g16, qgemv, bfloat, 8, float, 2, 2)
MTLINV_KERNEL(qgemv_b8_r4_bf16_sf32_g16, qgemv, bfloat, 8, float, 4, 2)
MTLINV_KERNEL(qgemv_b8_r8_bf16_sf32_g16, qgemv, bfloat, 8, float, 8, 2)

// The super-block form (int8 scale and bias codes, float32 factors per 256 values: GGUF's K-quants at their
// own bytes, mtlinv.gguf_kquants): Q4_K at 4 bits and Q5_K at 5, group size 32; Q6_K at 6 bits, group size 16.
MTLINV_KERNEL(qgemv_b4_r1_f32_si8, qgemv, float, 4, char, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_f32_si8, qgemv, float, 4, char, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_f32_si8, qgemv, float, 4, char, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_f32_si8, qgemv, float, 4, char, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_f16_si8, qgemv, half, 4, char, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_f16_si8, qgemv, half, 4, char, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_f16_si8, qgemv, half, 4, char, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_f16_si8, qgemv, half, 4, char, 8, 1)
MTLINV_KERNEL(qgemv_b4_r1_bf16_si8, qgemv, bfloat, 4, char, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16_si8, qgemv, bfloat, 4, char, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_bf16_si8, qgemv, bfloat, 4, char, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_bf16_si8, qgemv, bfloat, 4, char, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_f32_si8, qgemv, float, 5, char, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_f32_si8, qgemv, float, 5, char, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_f32_si8, qgemv, float, 5, char, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_f32_si8, qgemv, float, 5, char, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_f16_si8, qgemv, half, 5, char, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_f16_si8, qgemv, half, 5, char, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_f16_si8, qgemv, half, 5, char, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_f16_si8, qgemv, half, 5, char, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_bf16_si8, qgemv, bfloat, 5, char, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_bf16_si8, qgemv, bfloat, 5, char, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_bf16_si8, qgemv, bfloat, 5, char, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_bf16_si8, qgemv, bfloat, 5, char, 8, 1)
MTLINV_KERNEL(qgemv_b6_r1_f32_si8_g16, qgemv, float, 6, char, 1, 2)
MTLINV_KERNEL(qgemv_b6_r2_f32_si8_g16, qgemv, float, 6, char, 2, 2)
MTLINV_KERNEL(qgemv_b6_r4_f32_si8_g16, qgemv, float, 6, char, 4, 2)
MTLINV_KERNEL(qgemv_b6_r8_f32_si8_g16, qgemv, float, 6, char, 8, 2)
MTLINV_KERNEL(qgemv_b6_r1_f16_si8_g16, qgemv, half, 6, char, 1, 2)
MTLINV_KERNEL(qgemv_b6_r2_f16_si8_g16, qgemv, half, 6, char, 2, 2)
MTLINV_KERNEL(qgemv_b6_r4_f16_si8_g16, qgemv, half, 6, char, 4, 2)
MTLINV_KERNEL(qgemv_b6_r8_f16_si8_g16, qgemv, half, 6, char, 8, 2)
MTLINV_KERNEL(qgemv_b6_r1_bf16_si8_g16, qgemv, bfloat, 6, char, 1, 2)
MTLINV_KERNEL(qgemv_b6_r2_bf16_si8_g16, qgemv, bfloat, 6, char, 2, 2)
MTLINV_KERNEL(qgemv_b6_r4_bf16_si8_g16, qgemv, bfloat, 6, char, 4, 2)
MTLINV_KERNEL(qgemv_b6_r8_bf16_si8_g16, qgemv, bfloat, 6, char, 8, 2)

// float16 scales and biases with bfloat16 x: GGUF's Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 at their blocks' own
// float16 fields (mtlinv.gguf_blocks; bfloat16 cannot hold them), dequantised as with x's own float16 scales.
MTLINV_KERNEL(qgemv_b4_r1_bf16_sf16, qgemv, bfloat, 4, half, 1, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16_sf16, qgemv, bfloat, 4, half, 2, 1)
MTLINV_KERNEL(qgemv_b4_r4_bf16_sf16, qgemv, bfloat, 4, half, 4, 1)
MTLINV_KERNEL(qgemv_b4_r8_bf16_sf16, qgemv, bfloat, 4, half, 8, 1)
MTLINV_KERNEL(qgemv_b5_r1_bf16_sf16, qgemv, bfloat, 5, half, 1, 1)
MTLINV_KERNEL(qgemv_b5_r2_bf16_sf16, qgemv, bfloat, 5, half, 2, 1)
MTLINV_KERNEL(qgemv_b5_r4_bf16_sf16, qgemv, bfloat, 5, half, 4, 1)
MTLINV_KERNEL(qgemv_b5_r8_bf16_sf16, qgemv, bfloat, 5, half, 8, 1)
MTLINV_KERNEL(qgemv_b8_r1_bf16_sf16, qgemv, bfloat, 8, half, 1, 1)
MTLINV_KERNEL(qgemv_b8_r2_bf16_sf16, qgemv, bfloat, 8, half, 2, 1)
MTLINV_KERNEL(qgemv_b8_r4_bf16_sf16, qgemv, bfloat, 8, half, 4, 1)
MTLINV_KERNEL(qgemv_b8_r8_bf16_sf16, qgemv, bfloat, 8, half, 8, 1)
