// Quantized matrix product, the throughput path (M above the limit) of qgemv: y[m, n] = sum_k x[m, k] * W(n, k)
// (+ bias[n]) with W in the affine format of metal/quant.h. It dequantises a 32 x 32 weight tile into threadgroup
// memory and runs a tiled GEMM whose threads accumulate over K in ascending order: a different reduction order from
// qgemv, which is why the two must never serve the same rows below the limit. Runs of 8 values are staged at a
// time: 8 * BITS bits from a byte boundary, at most two words (for 3, 5 and 6 bits single values straddle two).
#include "common.h"
#include "qgemv_args.h"  // QGemvArgs, QGEMM_TILE, QGEMM_THREADS
#include "load.h"
#include "quant.h"

constant constexpr uint QGEMM_RUN = 8;  // K positions a qgemm thread stages at once
constant constexpr uint QGEMM_BK = 32;  // K positions staged per throughput step
// Each thread stages one run of one tile row (the plan launches QGEMM_THREADS, metal/qgemv_args.h).
static_assert(QGEMM_THREADS == QGEMM_TILE * (QGEMM_BK / QGEMM_RUN), "qgemm stages one run per thread");

// Dequantises the run of QGEMM_RUN values of weight row `row` that starts at K position k (a multiple of 8).
// The run's bits start `shift` bits into word `word` (a multiple of 8 bits) and end at most 64 bits later, so two
// words `lo` and `hi` hold it; each half of 4 values (4 * BITS <= 32 bits) is cut from them as one window.
template <uint BITS, typename S>
inline void qgemm_dequantize_run(device const uint* row, uint k, float scale, float bias, thread float* out) {
  const uint bit = k * BITS;
  const uint word = bit / 32;
  const uint shift = bit % 32;
  const uint lo = row[word];
  const uint hi = shift + QGEMM_RUN * BITS > 32 ? row[word + 1] : 0u;
  for (uint h = 0; h < QGEMM_RUN; h += 4) {
    const uint s = shift + h * BITS;  // where value k + h starts in (lo, hi); s + 4 * BITS <= 64
    uint window = s == 0 ? lo : (s >= 32 ? hi >> (s - 32) : (lo >> s) | (hi << (32 - s)));
    for (uint i = 0; i < 4; ++i) {
      out[h + i] = quant_dequantize<S>(scale, window & ((1u << BITS) - 1u), bias);
      window >>= BITS;
    }
  }
}

// Throughput. 128 threads per 32 x 32 output tile; K advances QGEMM_BK positions per step (K is a multiple of 32).
// Staging: thread t fills the run [k0 + 8 (t % 4), k0 + 8 (t % 4) + 8) of tile row and weight row t / 4,
// dequantising its weights into threadgroup memory. Compute: thread t owns rows m0 + 2 (t / 8) + {0, 1} and
// columns n0 + t % 8 + 8 j, j = 0..3, each accumulated over all of K in ascending order.
// Grid: (ceil(N / 32), ceil(rows / 32), 1).
template <typename T, uint BITS, typename S>
[[kernel]] void qgemm(
    constant QGemvArgs& args [[buffer(QGEMV_SLOT_ARGS)]],
    device const T* x [[buffer(QGEMV_SLOT_X)]],
    device const uint* wq [[buffer(QGEMV_SLOT_WQ)]],
    device const S* scales [[buffer(QGEMV_SLOT_SCALES)]],
    device const S* biases [[buffer(QGEMV_SLOT_BIASES)]],
    device const T* bias [[buffer(QGEMV_SLOT_BIAS)]],
    device T* y [[buffer(QGEMV_SLOT_Y)]],
    device const float* supers [[buffer(QGEMV_SLOT_SUPERS)]],
    uint2 tile [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float xs[QGEMM_TILE][QGEMM_BK + 1];  // +1: no bank conflicts on the column reads
  threadgroup float ws[QGEMM_TILE][QGEMM_BK + 1];

  const uint K = args.k;
  const uint N = args.n;
  const uint groups = K / args.group_size;
  const bool vector_loads = args.vector_loads != 0;
  const uint m0 = tile.y * QGEMM_TILE;
  const uint n0 = tile.x * QGEMM_TILE;

  // This thread's staging line and run: rows past M load zeros, weight rows past N are clamped (staged, never
  // stored).
  const uint line = tid / (QGEMM_BK / QGEMM_RUN);
  const uint s = (tid % (QGEMM_BK / QGEMM_RUN)) * QGEMM_RUN;
  const uint x_valid = m0 + line < args.rows ? QGEMM_RUN : 0;
  device const T* xrow = x + ulong(min(m0 + line, args.rows - 1)) * K;
  const uint n_line = min(n0 + line, N - 1);
  device const uint* wrow = wq + ulong(n_line) * (K / 32 * BITS);
  const uint g_row = n_line * groups;  // the row's first group (scales hold fewer than 2^32 values: the op checks it)
  const uint s_row = n_line * (K / QGEMV_SUPER);  // and its first super-block (the super-block form)

  // Named accumulators (row i, column j) stay in registers on every target; the emulator's compiler does not
  // unroll loops at -O2.
  const uint tm = tid / 8;
  const uint tn = tid % 8;
  float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
  float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
  for (uint k0 = 0; k0 < K; k0 += QGEMM_BK) {
    float xv[QGEMM_RUN];
    load_floats<T, QGEMM_RUN>(xrow + k0 + s, x_valid, vector_loads, xv);
    // A run of 8 lies in one group at every group size, 16 included.
    const uint g = g_row + (k0 + s) / args.group_size;
    const uint sb = s_row + (k0 + s) / QGEMV_SUPER;
    float wv[QGEMM_RUN];
    qgemm_dequantize_run<BITS, S>(wrow, k0 + s, float(QuantGroups<S>::scale(scales, supers, g, sb)),
                                  float(QuantGroups<S>::bias(biases, supers, g, sb)), wv);
    for (uint i = 0; i < QGEMM_RUN; ++i) {
      xs[line][s + i] = xv[i];
      ws[line][s + i] = wv[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0; kk < QGEMM_BK; ++kk) {
      const float x0 = xs[2 * tm][kk];
      const float x1 = xs[2 * tm + 1][kk];
      const float w0 = ws[tn][kk];
      const float w1 = ws[tn + 8][kk];
      const float w2 = ws[tn + 16][kk];
      const float w3 = ws[tn + 24][kk];
      a00 = fma(x0, w0, a00);
      a01 = fma(x0, w1, a01);
      a02 = fma(x0, w2, a02);
      a03 = fma(x0, w3, a03);
      a10 = fma(x1, w0, a10);
      a11 = fma(x1, w1, a11);
      a12 = fma(x1, w2, a12);
      a13 = fma(x1, w3, a13);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  const float4 acc[2] = {float4(a00, a01, a02, a03), float4(a10, a11, a12, a13)};
  for (uint i = 0; i < 2; ++i) {
    for (uint j = 0; j < 4; ++j) {
      const uint m = m0 + 2 * tm + i;
      const uint n = n0 + tn + 8 * j;
      if (m < args.rows && n < N) {
        float sum = acc[i][j];
        if (args.has_bias != 0) {
          sum += float(bias[n]);
        }
        y[ulong(m) * N + n] = T(sum);
      }
    }
  }
}

MTLINV_KERNEL(qgemm_b2_f32, qgemm, float, 2, float)
MTLINV_KERNEL(qgemm_b2_f16, qgemm, half, 2, half)
MTLINV_KERNEL(qgemm_b2_bf16, qgemm, bfloat, 2, bfloat)
MTLINV_KERNEL(qgemm_b3_f32, qgemm, float, 3, float)
MTLINV_KERNEL(qgemm_b3_f16, qgemm, half, 3, half)
MTLINV_KERNEL(qgemm_b3_bf16, qgemm, bfloat, 3, bfloat)
MTLINV_KERNEL(qgemm_b4_f32, qgemm, float, 4, float)
MTLINV_KERNEL(qgemm_b4_f16, qgemm, half, 4, half)
MTLINV_KERNEL(qgemm_b4_bf16, qgemm, bfloat, 4, bfloat)
MTLINV_KERNEL(qgemm_b5_f32, qgemm, float, 5, float)
MTLINV_KERNEL(qgemm_b5_f16, qgemm, half, 5, half)
MTLINV_KERNEL(qgemm_b5_bf16, qgemm, bfloat, 5, bfloat)
MTLINV_KERNEL(qgemm_b6_f32, qgemm, float, 6, float)
MTLINV_KERNEL(qgemm_b6_f16, qgemm, half, 6, half)
MTLINV_KERNEL(qgemm_b6_bf16, qgemm, bfloat, 6, bfloat)
MTLINV_KERNEL(qgemm_b8_f32, qgemm, float, 8, float)
MTLINV_KERNEL(qgemm_b8_f16, qgemm, half, 8, half)
MTLINV_KERNEL(qgemm_b8_bf16, qgemm, bfloat, 8, bfloat)
MTLINV_KERNEL(qgemm_b4_f16_sf32, qgemm, half, 4, float)
MTLINV_KERNEL(qgemm_b4_bf16_sf32, qgemm, bfloat, 4, float)
MTLINV_KERNEL(qgemm_b8_f16_sf32, qgemm, half, 8, float)
MTLINV_KERNEL(qgemm_b8_bf16_sf32, qgemm, bfloat, 8, float)

// The super-block form (as for qgemv).
MTLINV_KERNEL(qgemm_b4_f32_si8, qgemm, float, 4, char)
MTLINV_KERNEL(qgemm_b4_f16_si8, qgemm, half, 4, char)
MTLINV_KERNEL(qgemm_b4_bf16_si8, qgemm, bfloat, 4, char)
MTLINV_KERNEL(qgemm_b5_f32_si8, qgemm, float, 5, char)
MTLINV_KERNEL(qgemm_b5_f16_si8, qgemm, half, 5, char)
MTLINV_KERNEL(qgemm_b5_bf16_si8, qgemm, bfloat, 5, char)
MTLINV_KERNEL(qgemm_b6_f32_si8, qgemm, float, 6, char)
MTLINV_KERNEL(qgemm_b6_f16_si8, qgemm, half, 6, char)
MTLINV_KERNEL(qgemm_b6_bf16_si8, qgemm, bfloat, 6, char)

// float16 scales and biases with bfloat16 x (as for qgemv).
MTLINV_KERNEL(qgemm_b4_bf16_sf16, qgemm, bfloat, 4, half)
MTLINV_KERNEL(qgemm_b5_bf16_sf16, qgemm, bfloat, 5, half)
MTLINV_KERNEL(qgemm_b8_bf16_sf16, qgemm, bfloat, 8, half)
