// rms_norm: y = x * rsqrt(mean(x^2) + eps) * w, one threadgroup per row; add_rms_norm: the same of x + r, which it
// also stores (a decoder's residual add and the next norm in one launch).
//
// Invariance: a row is reduced by one threadgroup whose size depends on `cols` only (the plan picks it), so the
// sum of squares has the same order whether the row is alone or one of many.
#include "common.h"
#include "args.h"

// A thread keeps RMS_NORM_HELD values (metal/args.h) in registers between its sum of squares and its outputs, so on
// a GPU a row of up to 8192 columns is read once. The kernel issues those loads, and those of the weights, together
// and waits on memory once: a loop that loads, adds and stores a column at a time waits once per column, since the
// compiler may not move a load of x or r above a store to s (they may alias), reading s back for the output waits
// again, and so do weights loaded after the barriers (5.6 us a row of 576 on an H200 with all of that, 4.7 with
// only the last; docs/decisions.md, "rms_norm and add_rms_norm").

// Row `row` of x (with RESIDUAL: of s = x + r, each element rounded to T as add rounds it, and stored in s)
// normalised into y. The kernels own the threadgroup arrays (MSL declares them at kernel scope only).
template <typename T, bool RESIDUAL>
inline void rms_norm_row(constant RmsNormArgs& args, device const T* x, device const T* r, device T* s,
                         device const T* w, device T* y, uint row, uint tid, uint threads, uint lane, uint simd_id,
                         threadgroup float* simd_partials, threadgroup float* row_scale) {
  const ulong base = ulong(row) * args.cols;
  const uint held_cols = min(args.cols, RMS_NORM_HELD * threads);

  // Each thread sums a strided slice of the row in column order: columns tid + i threads, the first
  // RMS_NORM_HELD of them held, the rest (rows too wide to hold) loaded one at a time.
  float held[RMS_NORM_HELD];
  float addend[RMS_NORM_HELD];
  float weight[RMS_NORM_HELD];
  for (uint i = 0; i < RMS_NORM_HELD; ++i) {
    const uint c = tid + i * threads;
    held[i] = c < held_cols ? float(x[base + c]) : 0.0f;
    addend[i] = RESIDUAL && c < held_cols ? float(r[base + c]) : 0.0f;
    weight[i] = c < held_cols ? float(w[c]) : 0.0f;
  }
  if (RESIDUAL) {
    for (uint i = 0; i < RMS_NORM_HELD; ++i) {
      const uint c = tid + i * threads;
      held[i] = float(T(held[i] + addend[i]));
      if (c < held_cols) {
        s[base + c] = T(held[i]);
      }
    }
  }
  float sumsq = 0.0f;
  for (uint i = 0; i < RMS_NORM_HELD; ++i) {
    if (tid + i * threads < held_cols) {
      sumsq = fma(held[i], held[i], sumsq);
    }
  }
  for (uint c = tid + held_cols; c < args.cols; c += threads) {
    float v = float(x[base + c]);
    if (RESIDUAL) {
      const T sum = T(v + float(r[base + c]));
      s[base + c] = sum;
      v = float(sum);
    }
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

  const float scale = row_scale[0];
  for (uint i = 0; i < RMS_NORM_HELD; ++i) {
    const uint c = tid + i * threads;
    if (c < held_cols) {
      y[base + c] = T(held[i] * scale * weight[i]);
    }
  }
  for (uint c = tid + held_cols; c < args.cols; c += threads) {
    // The thread reads back only the sums it stored itself above.
    const float v = RESIDUAL ? float(s[base + c]) : float(x[base + c]);
    y[base + c] = T(v * scale * float(w[c]));
  }
}

template <typename T>
[[kernel]] void rms_norm(
    constant RmsNormArgs& args [[buffer(RMS_NORM_SLOT_ARGS)]],
    device const T* x [[buffer(RMS_NORM_SLOT_X)]],
    device const T* w [[buffer(RMS_NORM_SLOT_W)]],
    device T* y [[buffer(RMS_NORM_SLOT_Y)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_id [[simdgroup_index_in_threadgroup]]) {
  threadgroup float simd_partials[SIMD_WIDTH];
  threadgroup float row_scale[1];
  rms_norm_row<T, false>(args, x, x, y, w, y, row, tid, threads, lane, simd_id, simd_partials, row_scale);
}

// The residual add before a norm in one launch: s = x + r (add's bits), y = rms_norm(s) (rms_norm's bits).
template <typename T>
[[kernel]] void add_rms_norm(
    constant RmsNormArgs& args [[buffer(RMS_NORM_SLOT_ARGS)]],
    device const T* x [[buffer(RMS_NORM_SLOT_X)]],
    device const T* r [[buffer(RMS_NORM_SLOT_RESIDUAL)]],
    device const T* w [[buffer(RMS_NORM_SLOT_W)]],
    device T* s [[buffer(RMS_NORM_SLOT_SUM)]],
    device T* y [[buffer(RMS_NORM_SLOT_Y)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_id [[simdgroup_index_in_threadgroup]]) {
  threadgroup float simd_partials[SIMD_WIDTH];
  threadgroup float row_scale[1];
  rms_norm_row<T, true>(args, x, r, s, w, y, row, tid, threads, lane, simd_id, simd_partials, row_scale);
}

// The per-head RMS norms of a q|k|v projection's output (Qwen 3's q_norm and k_norm, before RoPE): x
// [rows, q_heads + 2 kv_heads, D] as rows of D (args.cols = D); a query head's row is normed with wq, a key head's
// with wk (rms_norm's bits: the same rms_norm_row, with threads from D alone), a value head's copied as it is.
// Every row of a threadgroup takes one branch, so the barriers of rms_norm_row are met by all of its threads.
template <typename T>
[[kernel]] void qk_rms_norm(
    constant RmsNormArgs& args [[buffer(RMS_NORM_SLOT_ARGS)]],
    device const T* x [[buffer(RMS_NORM_SLOT_X)]],
    device const T* wq [[buffer(RMS_NORM_SLOT_W)]],
    device const T* wk [[buffer(RMS_NORM_SLOT_W_K)]],
    device T* y [[buffer(RMS_NORM_SLOT_Y)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_id [[simdgroup_index_in_threadgroup]]) {
  threadgroup float simd_partials[SIMD_WIDTH];
  threadgroup float row_scale[1];
  const uint head = row % (args.q_heads + 2 * args.kv_heads);
  if (head >= args.q_heads + args.kv_heads) {
    const ulong base = ulong(row) * args.cols;
    for (uint c = tid; c < args.cols; c += threads) {
      y[base + c] = x[base + c];
    }
    return;
  }
  rms_norm_row<T, false>(args, x, x, y, head < args.q_heads ? wq : wk, y, row, tid, threads, lane, simd_id,
                         simd_partials, row_scale);
}

MTLINV_KERNEL(rms_norm_f32, rms_norm, float)
MTLINV_KERNEL(rms_norm_f16, rms_norm, half)
MTLINV_KERNEL(rms_norm_bf16, rms_norm, bfloat)
MTLINV_KERNEL(add_rms_norm_f32, add_rms_norm, float)
MTLINV_KERNEL(add_rms_norm_f16, add_rms_norm, half)
MTLINV_KERNEL(add_rms_norm_bf16, add_rms_norm, bfloat)
MTLINV_KERNEL(qk_rms_norm_f32, qk_rms_norm, float)
MTLINV_KERNEL(qk_rms_norm_f16, qk_rms_norm, half)
MTLINV_KERNEL(qk_rms_norm_bf16, qk_rms_norm, bfloat)
