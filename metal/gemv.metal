// Canonical multi-row GEMV: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) for a tile of R rows per threadgroup,
// reading each weight element once for all of them.
//
// Invariance (design.md §2): every output element is reduced in an order fixed by K, and by N, the dtype, the
// layout and the device through the plan's k_splits; never by M.
//   * Lanes own fixed K positions, partial sums are combined by a fixed shuffle ladder, and the `k_splits`
//     simdgroups of a threadgroup are combined in index order.
//   * Each row has its own accumulators and the row loop is innermost: row r runs exactly the same fma sequence
//     whether its tile holds 1 or 8 rows, and whatever the other rows hold (NaN, inf). The tile height R is a
//     template parameter (1, 2, 4 or 8, picked by the plan from M) so every loop over rows has a constant trip
//     count; tile rows past M repeat the last row, computed and never stored, so no branch sits in the fma loop.
// Two weight layouts: gemv_nk (W stored [N, K], a linear layer's weight) and gemv_kn (W stored [K, N]).
#include "common.h"
#include "gemv_args.h"  // GemvArgs, GEMV_NK_COLS, GEMV_MAX_SPLITS, GEMV_KN_LANE_BYTES
#include "load.h"

// acc += the VEC products of one row's x values xv[i] and the four weight rows wv[c * VEC + i], in K order: the
// one fma sequence of every gemv_nk output, whichever load path supplied the values.
template <uint VEC>
inline float4 gemv_nk_fma(float4 acc, thread const float* xv, thread const float* wv) {
  for (uint i = 0; i < VEC; ++i) {
    acc = fma(float4(xv[i]), float4(wv[i], wv[VEC + i], wv[2 * VEC + i], wv[3 * VEC + i]), acc);
  }
  return acc;
}

// One whole 16-byte step of gemv_nk at K position k: the four weight rows' groups `raw` (already loaded) against
// each row's group of x.
template <typename T, uint R>
inline void gemv_nk_step(thread float4* acc, thread const uint4* raw, device const T* x, thread const ulong* x_row,
                         uint k) {
  constexpr uint VEC = 16 / sizeof(T);
  float wv[GEMV_NK_COLS * VEC];
  for (uint c = 0; c < GEMV_NK_COLS; ++c) {
    widen16<T>(raw[c], wv + c * VEC);
  }
  for (uint r = 0; r < R; ++r) {
    float xv[VEC];
    widen16<T>(load16(x + x_row[r] + k), xv);
    acc[r] = gemv_nk_fma<VEC>(acc[r], xv, wv);
  }
}

// W stored [N, K]. Threadgroup: k_splits simdgroups, all on the same GEMV_NK_COLS outputs. Lane `lane` of
// simdgroup `sg` owns the K positions [j * VEC, (j + 1) * VEC) for j = sg * 32 + lane + i * (k_splits * 32), one
// 16-byte group of each weight row.
// Grid: (ceil(N / 4), ceil(rows / R), batch).
template <typename T, uint R>
[[kernel]] void gemv_nk(
    constant GemvArgs& args [[buffer(GEMV_SLOT_ARGS)]],
    device const T* x [[buffer(GEMV_SLOT_X)]],
    device const T* w [[buffer(GEMV_SLOT_W)]],
    device const T* bias [[buffer(GEMV_SLOT_BIAS)]],
    device T* y [[buffer(GEMV_SLOT_Y)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint VEC = 16 / sizeof(T);
  constexpr uint COLS = GEMV_NK_COLS;
  threadgroup float4 partials[GEMV_MAX_SPLITS][R];  // [k split][row]: each simdgroup's ladder result

  const uint n0 = tile.x * COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  x += ulong(tile.z) * args.x_batch_stride;
  w += ulong(tile.z) * args.w_batch_stride;

  ulong x_row[R];  // where each row of the tile starts in x
  for (uint r = 0; r < R; ++r) {
    x_row[r] = ulong(min(r0 + r, args.rows - 1)) * K;
  }
  // Weight rows past N are clamped to the last row: loaded, never stored.
  device const T* wrow[COLS];
  for (uint c = 0; c < COLS; ++c) {
    wrow[c] = w + ulong(min(n0 + c, args.n - 1)) * K;
  }

  float4 acc[R];
  for (uint r = 0; r < R; ++r) {
    acc[r] = float4(0.0f);
  }
  const uint step = args.k_splits * SIMD_WIDTH * VEC;
  uint k = (sg * SIMD_WIDTH + lane) * VEC;
  if (args.vector_loads != 0) {
    // Whole steps, two at a time: all eight weight loads are in flight before the arithmetic that uses them.
    // The weights stream past once; x, read by every simdgroup of the grid, stays in cache.
    for (; k + step + VEC <= K; k += 2 * step) {
      uint4 raw0[COLS];
      uint4 raw1[COLS];
      for (uint c = 0; c < COLS; ++c) {
        raw0[c] = load16_streaming(wrow[c] + k);
        raw1[c] = load16_streaming(wrow[c] + k + step);
      }
      gemv_nk_step<T, R>(acc, raw0, x, x_row, k);
      gemv_nk_step<T, R>(acc, raw1, x, x_row, k + step);
    }
  }
  // The steps left (every step without vector loads): element loads, zeros past K.
  for (; k < K; k += step) {
    const uint valid = min(VEC, K - k);
    float wv[COLS * VEC];
    for (uint c = 0; c < COLS; ++c) {
      load_floats<T, VEC>(wrow[c] + k, valid, args.vector_loads != 0, wv + c * VEC);
    }
    for (uint r = 0; r < R; ++r) {
      float xv[VEC];
      load_floats<T, VEC>(x + x_row[r] + k, valid, args.vector_loads != 0, xv);
      acc[r] = gemv_nk_fma<VEC>(acc[r], xv, wv);
    }
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
    y[ulong(tile.z) * args.y_batch_stride + ulong(r0 + r) * args.n + n0 + c] = T(sum);
  }
}

// W stored [K, N]. Lane `lane` owns the VEC adjacent outputs [n0 + lane * VEC, n0 + (lane + 1) * VEC), one 16-byte
// group of each weight row; the k_splits simdgroups take consecutive K ranges of ceil(K / k_splits) and are
// combined in index order through threadgroup memory, one split per round.
// Grid: (ceil(N / (32 * VEC)), ceil(rows / R), batch).
template <typename T, uint R>
[[kernel]] void gemv_kn(
    constant GemvArgs& args [[buffer(GEMV_SLOT_ARGS)]],
    device const T* x [[buffer(GEMV_SLOT_X)]],
    device const T* w [[buffer(GEMV_SLOT_W)]],
    device const T* bias [[buffer(GEMV_SLOT_BIAS)]],
    device T* y [[buffer(GEMV_SLOT_Y)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint VEC = GEMV_KN_LANE_BYTES / sizeof(T);
  threadgroup float running[R][SIMD_WIDTH * VEC];  // the ordered sum of splits 0..s

  const uint n = tile.x * SIMD_WIDTH * VEC + lane * VEC;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  const uint N = args.n;
  const uint valid = n < N ? min(VEC, N - n) : 0;
  const uint chunk = (K + args.k_splits - 1) / args.k_splits;
  const uint k_begin = min(K, sg * chunk);
  const uint k_end = min(K, k_begin + chunk);
  x += ulong(tile.z) * args.x_batch_stride;
  w += ulong(tile.z) * args.w_batch_stride;

  ulong x_row[R];  // where each row of the tile starts in x
  for (uint r = 0; r < R; ++r) {
    x_row[r] = ulong(min(r0 + r, args.rows - 1)) * K;
  }

  float acc[R][VEC];
  for (uint r = 0; r < R; ++r) {
    for (uint i = 0; i < VEC; ++i) {
      acc[r][i] = 0.0f;
    }
  }
  if (valid > 0) {
    for (uint k = k_begin; k < k_end; ++k) {
      float wv[VEC];
      load_floats<T, VEC>(w + ulong(k) * N + n, valid, args.vector_loads != 0, wv);
      for (uint r = 0; r < R; ++r) {
        const float xk = float(x[x_row[r] + k]);
        for (uint i = 0; i < VEC; ++i) {
          acc[r][i] = fma(xk, wv[i], acc[r][i]);
        }
      }
    }
  }

  // Ordered combine: after round s, running = ((split 0 + split 1) + ...) + split s.
  for (uint s = 0; s < args.k_splits; ++s) {
    if (sg == s) {
      for (uint r = 0; r < R; ++r) {
        for (uint i = 0; i < VEC; ++i) {
          running[r][lane * VEC + i] = s == 0 ? acc[r][i] : running[r][lane * VEC + i] + acc[r][i];
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  if (sg == 0) {
    for (uint r = 0; r < R; ++r) {
      if (r0 + r < args.rows) {
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
}

MTLINV_KERNEL(gemv_nk_r1_f32, gemv_nk, float, 1)
MTLINV_KERNEL(gemv_nk_r2_f32, gemv_nk, float, 2)
MTLINV_KERNEL(gemv_nk_r4_f32, gemv_nk, float, 4)
MTLINV_KERNEL(gemv_nk_r8_f32, gemv_nk, float, 8)
MTLINV_KERNEL(gemv_nk_r1_f16, gemv_nk, half, 1)
MTLINV_KERNEL(gemv_nk_r2_f16, gemv_nk, half, 2)
MTLINV_KERNEL(gemv_nk_r4_f16, gemv_nk, half, 4)
MTLINV_KERNEL(gemv_nk_r8_f16, gemv_nk, half, 8)
MTLINV_KERNEL(gemv_nk_r1_bf16, gemv_nk, bfloat, 1)
MTLINV_KERNEL(gemv_nk_r2_bf16, gemv_nk, bfloat, 2)
MTLINV_KERNEL(gemv_nk_r4_bf16, gemv_nk, bfloat, 4)
MTLINV_KERNEL(gemv_nk_r8_bf16, gemv_nk, bfloat, 8)
MTLINV_KERNEL(gemv_kn_r1_f32, gemv_kn, float, 1)
MTLINV_KERNEL(gemv_kn_r2_f32, gemv_kn, float, 2)
MTLINV_KERNEL(gemv_kn_r4_f32, gemv_kn, float, 4)
MTLINV_KERNEL(gemv_kn_r8_f32, gemv_kn, float, 8)
MTLINV_KERNEL(gemv_kn_r1_f16, gemv_kn, half, 1)
MTLINV_KERNEL(gemv_kn_r2_f16, gemv_kn, half, 2)
MTLINV_KERNEL(gemv_kn_r4_f16, gemv_kn, half, 4)
MTLINV_KERNEL(gemv_kn_r8_f16, gemv_kn, half, 8)
MTLINV_KERNEL(gemv_kn_r1_bf16, gemv_kn, bfloat, 1)
MTLINV_KERNEL(gemv_kn_r2_bf16, gemv_kn, bfloat, 2)
MTLINV_KERNEL(gemv_kn_r4_bf16, gemv_kn, bfloat, 4)
MTLINV_KERNEL(gemv_kn_r8_bf16, gemv_kn, bfloat, 8)
