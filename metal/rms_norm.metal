// rms_norm: y = x * rsqrt(mean(x^2) + eps) * w, one threadgroup per row.
//
// Invariance: a row is reduced by one threadgroup whose size depends on `cols` only (the plan picks it), so the
// sum of squares has the same order whether the row is alone or one of many.
#include "common.h"
#include "args.h"

template <typename T>
[[kernel]] void rms_norm(
    constant RmsNormArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const T* w [[buffer(2)]],
    device T* y [[buffer(3)]],
    uint row [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint threads [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint simd_id [[simdgroup_index_in_threadgroup]]) {
  threadgroup float simd_partials[SIMD_WIDTH];
  threadgroup float row_scale[1];

  device const T* xr = x + ulong(row) * args.cols;
  device T* yr = y + ulong(row) * args.cols;

  // Each thread sums a strided slice of the row in column order.
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

MTLINV_KERNEL(rms_norm_f32, rms_norm, float)
MTLINV_KERNEL(rms_norm_f16, rms_norm, half)
MTLINV_KERNEL(rms_norm_bf16, rms_norm, bfloat)
