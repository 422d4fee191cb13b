// Throughput matmul for M above the limit: a tiled GEMM through threadgroup memory. Each thread accumulates a
// 2x2 block of outputs over all of K in ascending order, so its reduction order differs from the canonical GEMV
// (which is why rows must not switch between the two below the limit).
// Grid: (ceil(N / 32), ceil(rows / 32), batch); 256 threads as a 16x16 layout.
#include "common.h"
#include "gemv_args.h"  // GemvArgs, GEMM_TILE, GEMM_THREADS

constant constexpr uint GEMM_BK = 16;  // K slice staged in threadgroup memory per step

template <typename T>
[[kernel]] void gemm_tiled(
    constant GemvArgs& args [[buffer(GEMV_SLOT_ARGS)]],
    device const T* x [[buffer(GEMV_SLOT_X)]],
    device const T* w [[buffer(GEMV_SLOT_W)]],
    device const T* bias [[buffer(GEMV_SLOT_BIAS)]],
    device T* y [[buffer(GEMV_SLOT_Y)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float xs[GEMM_TILE][GEMM_BK + 1];  // +1: no bank conflicts on the column reads
  threadgroup float ws[GEMM_TILE][GEMM_BK + 1];

  const bool w_kn = args.w_kn != 0;
  const uint K = args.k;
  const uint N = args.n;
  const uint m0 = tile.y * GEMM_TILE;
  const uint n0 = tile.x * GEMM_TILE;
  x += ulong(tile.z) * args.x_batch_stride;
  w += ulong(tile.z) * args.w_batch_stride;
  const uint tm = tid / 16;  // this thread's outputs: rows m0 + 2 tm + {0, 1}, columns n0 + 2 tn + {0, 1}
  const uint tn = tid % 16;

  float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
  for (uint k0 = 0; k0 < K; k0 += GEMM_BK) {
    // 256 threads stage 32 x 16 elements of each operand: two each.
    for (uint i = tid; i < GEMM_TILE * GEMM_BK; i += GEMM_THREADS) {
      const uint row = i / GEMM_BK;
      const uint kk = i % GEMM_BK;
      const uint k = k0 + kk;
      const uint m = m0 + row;
      const uint n = n0 + row;
      xs[row][kk] = (m < args.rows && k < K) ? float(x[ulong(m) * K + k]) : 0.0f;
      float wv = 0.0f;
      if (n < N && k < K) {
        wv = w_kn ? float(w[ulong(k) * N + n]) : float(w[ulong(n) * K + k]);
      }
      ws[row][kk] = wv;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint kmax = min(GEMM_BK, K - k0);
    for (uint kk = 0; kk < kmax; ++kk) {
      for (uint i = 0; i < 2; ++i) {
        for (uint j = 0; j < 2; ++j) {
          acc[i][j] = fma(xs[2 * tm + i][kk], ws[2 * tn + j][kk], acc[i][j]);
        }
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  for (uint i = 0; i < 2; ++i) {
    for (uint j = 0; j < 2; ++j) {
      const uint m = m0 + 2 * tm + i;
      const uint n = n0 + 2 * tn + j;
      if (m < args.rows && n < N) {
        float sum = acc[i][j];
        if (args.has_bias != 0) {
          sum += float(bias[n]);
        }
        y[ulong(tile.z) * args.y_batch_stride + ulong(m) * N + n] = T(sum);
      }
    }
  }
}

MTLINV_KERNEL(gemm_tiled_f32, gemm_tiled, float)
MTLINV_KERNEL(gemm_tiled_f16, gemm_tiled, half)
MTLINV_KERNEL(gemm_tiled_bf16, gemm_tiled, bfloat)
