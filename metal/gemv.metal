// Canonical multi-row GEMV: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) for up to GEMV_ROWS rows per
// threadgroup, reading each weight element once for all of them.
//
// Invariance (design.md §2): every output element is reduced in an order fixed by K (and the dtype) alone.
//   * Lanes own fixed K positions, partial sums are combined by a fixed shuffle ladder, and the `k_splits`
//     simdgroups of a threadgroup (a function of K) are combined in index order.
//   * Each row has its own accumulators and the row loop is innermost: row r runs exactly the same fma sequence
//     whether it is alone or one of GEMV_ROWS, and whatever the other rows hold (NaN, inf).
// Two weight layouts: gemv_nk (W stored [N, K], a linear layer's weight) and gemv_kn (W stored [K, N]).
#include "common.h"
#include "args.h"
#include "load.h"

// Rows of x per threadgroup (R). More rows run as further row tiles with the same per-row order.
constant constexpr uint GEMV_ROWS = 8;
// Outputs per simdgroup in the [N, K] layout: four weight rows read together, one float4 accumulator per row.
constant constexpr uint GEMV_NK_COLS = 4;

// Sum of a float4 over the 32 lanes by the fixed ladder (16, 8, 4, 2, 1); lane 0 holds the result.
inline float4 simd_ladder_sum4(float4 v) {
  for (ushort delta = SIMD_WIDTH / 2; delta > 0; delta >>= 1) {
    v += simd_shuffle_down(v, delta);
  }
  return v;
}

// W stored [N, K]. Threadgroup: k_splits simdgroups, all on the same GEMV_NK_COLS outputs. Lane `lane` of
// simdgroup `sg` owns the K positions [j * VEC, (j + 1) * VEC) for j = sg * 32 + lane + i * (k_splits * 32).
// Grid: (ceil(N / 4), ceil(rows / GEMV_ROWS), batch).
template <typename T>
[[kernel]] void gemv_nk(
    constant GemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const T* w [[buffer(2)]],
    device const T* bias [[buffer(3)]],
    device T* y [[buffer(4)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint VEC = 16 / sizeof(T);  // one 16-byte load per weight row and step
  threadgroup float4 partials[8][GEMV_ROWS];  // [k split][row]: each simdgroup's ladder result

  const uint n0 = tile.x * GEMV_NK_COLS;
  const uint r0 = tile.y * GEMV_ROWS;
  const uint rows = min(GEMV_ROWS, args.rows - r0);
  const uint K = args.k;
  x += ulong(tile.z) * args.x_batch_stride + ulong(r0) * K;
  w += ulong(tile.z) * args.w_batch_stride;

  // Weight rows past N are clamped to the last row: loaded, never stored.
  device const T* wrow[GEMV_NK_COLS];
  for (uint c = 0; c < GEMV_NK_COLS; ++c) {
    wrow[c] = w + ulong(min(n0 + c, args.n - 1)) * K;
  }

  float4 acc[GEMV_ROWS];
  for (uint r = 0; r < GEMV_ROWS; ++r) {
    acc[r] = float4(0.0f);
  }
  const uint step = args.k_splits * SIMD_WIDTH * VEC;
  for (uint k = (sg * SIMD_WIDTH + lane) * VEC; k < K; k += step) {
    const uint valid = min(VEC, K - k);
    float wv[GEMV_NK_COLS][VEC];
    for (uint c = 0; c < GEMV_NK_COLS; ++c) {
      load_floats<T, VEC>(wrow[c] + k, valid, args.vector_loads != 0, wv[c]);
    }
    for (uint r = 0; r < rows; ++r) {
      float xv[VEC];
      load_floats<T, VEC>(x + r * K + k, valid, args.vector_loads != 0, xv);
      for (uint i = 0; i < valid; ++i) {
        acc[r] = fma(float4(xv[i]), float4(wv[0][i], wv[1][i], wv[2][i], wv[3][i]), acc[r]);
      }
    }
  }

  // `rows` is uniform over the threadgroup, so every lane takes part in every ladder.
  for (uint r = 0; r < rows; ++r) {
    float4 total = simd_ladder_sum4(acc[r]);
    if (lane == 0) {
      partials[sg][r] = total;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Epilogue: lane (r, c) of simdgroup 0 adds the splits in index order, then the bias.
  const uint r = lane / GEMV_NK_COLS;
  const uint c = lane % GEMV_NK_COLS;
  if (sg == 0 && r < rows && n0 + c < args.n) {
    float sum = partials[0][r][c];
    for (uint s = 1; s < args.k_splits; ++s) {
      sum += partials[s][r][c];
    }
    if (args.has_bias != 0) {
      sum += float(bias[n0 + c]);
    }
    y[ulong(tile.z) * args.y_batch_stride + ulong(r0 + r) * args.n + n0 + c] = T(sum);
  }
}

// W stored [K, N]. Lane `lane` owns the VEC adjacent outputs [n0 + lane * VEC, n0 + (lane + 1) * VEC); the
// k_splits simdgroups take consecutive K ranges of ceil(K / k_splits) and are combined in index order through
// threadgroup memory, one split per round. Grid: (ceil(N / (32 * VEC)), ceil(rows / GEMV_ROWS), batch).
template <typename T>
[[kernel]] void gemv_kn(
    constant GemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const T* w [[buffer(2)]],
    device const T* bias [[buffer(3)]],
    device T* y [[buffer(4)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint VEC = 4;
  threadgroup float running[GEMV_ROWS][SIMD_WIDTH * VEC];  // the ordered sum of splits 0..s

  const uint n = tile.x * SIMD_WIDTH * VEC + lane * VEC;
  const uint r0 = tile.y * GEMV_ROWS;
  const uint rows = min(GEMV_ROWS, args.rows - r0);
  const uint K = args.k;
  const uint N = args.n;
  const uint valid = n < N ? min(VEC, N - n) : 0;
  const uint chunk = (K + args.k_splits - 1) / args.k_splits;
  const uint k_begin = min(K, sg * chunk);
  const uint k_end = min(K, k_begin + chunk);
  x += ulong(tile.z) * args.x_batch_stride + ulong(r0) * K;
  w += ulong(tile.z) * args.w_batch_stride;

  float acc[GEMV_ROWS][VEC];
  for (uint r = 0; r < GEMV_ROWS; ++r) {
    for (uint i = 0; i < VEC; ++i) {
      acc[r][i] = 0.0f;
    }
  }
  if (valid > 0) {
    for (uint k = k_begin; k < k_end; ++k) {
      float wv[VEC];
      load_floats<T, VEC>(w + ulong(k) * N + n, valid, args.vector_loads != 0, wv);
      for (uint r = 0; r < rows; ++r) {
        const float xk = float(x[r * K + k]);
        for (uint i = 0; i < VEC; ++i) {
          acc[r][i] = fma(xk, wv[i], acc[r][i]);
        }
      }
    }
  }

  // Ordered combine: after round s, running = ((split 0 + split 1) + ...) + split s.
  for (uint s = 0; s < args.k_splits; ++s) {
    if (sg == s) {
      for (uint r = 0; r < rows; ++r) {
        for (uint i = 0; i < VEC; ++i) {
          running[r][lane * VEC + i] = s == 0 ? acc[r][i] : running[r][lane * VEC + i] + acc[r][i];
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  if (sg == 0) {
    for (uint r = 0; r < rows; ++r) {
      for (uint i = 0; i < valid; ++i) {
        float sum = running[r][lane * VEC + i];
        if (args.has_bias != 0) {
          sum += float(bias[n + i]);
        }
        y[ulong(tile.z) * args.y_batch_stride + ulong(r0 + r) * N + n + i] = T(sum);
      }
    }
  }
}

MTLINV_KERNEL(gemv_nk_f32, gemv_nk, float)
MTLINV_KERNEL(gemv_nk_f16, gemv_nk, half)
MTLINV_KERNEL(gemv_nk_bf16, gemv_nk, bfloat)
MTLINV_KERNEL(gemv_kn_f32, gemv_kn, float)
MTLINV_KERNEL(gemv_kn_f16, gemv_kn, half)
MTLINV_KERNEL(gemv_kn_bf16, gemv_kn, bfloat)
