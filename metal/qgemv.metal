// Quantized matmul on MLX's affine format: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]), with
// W(n, k) = scales[n, g] * q(n, k) + biases[n, g], g = k / group_size, and q the BITS-bit value at bits
// [k * BITS, (k + 1) * BITS) of row n's little-endian stream of uint32 words (wq [N, K * BITS / 32]).
//
// Two kernels share the unpacking and the dequantisation:
//   * qgemv, canonical (M <= limit, and M == 1): the quantized sibling of gemv_nk, with the same structure and
//     invariance argument (design.md §2). Lanes own fixed runs of 8 K positions, each lane's partial sums are
//     combined by a fixed shuffle ladder and the k_splits simdgroups (a function of K and the device) in index
//     order; every row has its own accumulators with the row loop innermost, so row r runs exactly the fma
//     sequence it runs alone, whatever the other rows hold. The weight words, scales and biases of a run are read
//     and dequantised once for all rows of the tile.
//   * qgemm, throughput (M above the limit): dequantises a 32 x 32 weight tile into threadgroup memory and runs a
//     tiled GEMM whose threads accumulate over K in ascending order: a different reduction order from qgemv,
//     which is why the two must never serve the same rows below the limit.
//
// The unit of unpacking is a run of 8 consecutive values of one weight row, starting at a multiple of 8: its
// 8 * BITS bits start on a byte boundary and span at most two words, and it lies inside one group (8 divides every
// group size), so it has one scale and one bias. For 3, 5 and 6 bits single values straddle two words.
#include "common.h"
#include "qgemv_args.h"
#include "load.h"

constant constexpr uint QGEMV_RUN = 8;     // K positions a lane unpacks (and x values it loads) at once
constant constexpr uint QGEMV_ROWS = 8;    // rows of x per canonical threadgroup; more rows run as further tiles
constant constexpr uint QGEMV_COLS = 4;    // weight rows (outputs) per canonical simdgroup (spelled out as a0..a3)
constant constexpr uint QGEMM_TILE = 32;   // throughput outputs per threadgroup along M and along N
constant constexpr uint QGEMM_BK = 32;     // K positions staged per throughput step

// The dequantisation of every kernel here, and of mtlinv.quant.dequantize_float32: scale * q + bias in float32,
// the product rounded before the add. Two roundings rather than an fma because that is the value the Python
// format helpers and the lossless GGUF importers reproduce; the kernels are compiled without contraction
// (design.md §2 rule 4), so no target fuses it.
inline float qgemv_dequantize(float scale, uint q, float bias) {
  return scale * float(q) + bias;
}

// Dequantises the run of QGEMV_RUN values of weight row `row` that starts at K position k (a multiple of 8).
// The run's bits start `shift` bits into word `word` (a multiple of 8 bits) and end at most 64 bits later, so two
// words `lo` and `hi` hold it; each half of 4 values (4 * BITS <= 32 bits) is cut from them as one window.
template <uint BITS>
inline void qgemv_dequantize_run(device const uint* row, uint k, float scale, float bias, thread float* out) {
  const uint bit = k * BITS;
  const uint word = bit / 32;
  const uint shift = bit % 32;
  const uint lo = row[word];
  const uint hi = shift + QGEMV_RUN * BITS > 32 ? row[word + 1] : 0u;
  for (uint h = 0; h < QGEMV_RUN; h += 4) {
    const uint s = shift + h * BITS;  // where value k + h starts in (lo, hi); s + 4 * BITS <= 64
    uint window = s == 0 ? lo : (s >= 32 ? hi >> (s - 32) : (lo >> s) | (hi << (32 - s)));
    for (uint i = 0; i < 4; ++i) {
      out[h + i] = qgemv_dequantize(scale, window & ((1u << BITS) - 1u), bias);
      window >>= BITS;
    }
  }
}

// Canonical. Threadgroup: k_splits simdgroups, all on the same QGEMV_COLS outputs. Lane `lane` of simdgroup `sg`
// owns the K positions [8 j, 8 j + 8) for j = sg * 32 + lane + i * (k_splits * 32), as in gemv_nk: a simdgroup's
// step covers 256 consecutive positions, so its loads of x and of the packed words are contiguous across lanes.
// Per run it reads each column's (at most two) words, scale and bias once, dequantises them and applies them to
// every row of the tile. Grid: (ceil(N / 4), ceil(rows / QGEMV_ROWS), 1).
template <typename T, uint BITS, typename S>
[[kernel]] void qgemv(
    constant QGemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const uint* wq [[buffer(2)]],
    device const S* scales [[buffer(3)]],
    device const S* biases [[buffer(4)]],
    device const T* bias [[buffer(5)]],
    device T* y [[buffer(6)]],
    uint2 tile [[threadgroup_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float4 partials[8][QGEMV_ROWS];  // [k split][row]: each simdgroup's ladder result

  const uint n0 = tile.x * QGEMV_COLS;
  const uint r0 = tile.y * QGEMV_ROWS;
  const uint rows = min(QGEMV_ROWS, args.rows - r0);
  const uint K = args.k;
  const uint groups = K / args.group_size;
  const bool vector_loads = args.vector_loads != 0;
  x += ulong(r0) * K;

  // Weight rows past N are clamped to the last row: loaded, never stored.
  device const uint* wrow[QGEMV_COLS];
  device const S* srow[QGEMV_COLS];
  device const S* brow[QGEMV_COLS];
  for (uint c = 0; c < QGEMV_COLS; ++c) {
    const uint n = min(n0 + c, args.n - 1);
    wrow[c] = wq + ulong(n) * (K / 32 * BITS);
    srow[c] = scales + ulong(n) * groups;
    brow[c] = biases + ulong(n) * groups;
  }

  float acc[QGEMV_ROWS][QGEMV_COLS];
  for (uint r = 0; r < QGEMV_ROWS; ++r) {
    for (uint c = 0; c < QGEMV_COLS; ++c) {
      acc[r][c] = 0.0f;
    }
  }
  const uint step = args.k_splits * SIMD_WIDTH * QGEMV_RUN;
  for (uint k = (sg * SIMD_WIDTH + lane) * QGEMV_RUN; k < K; k += step) {
    const uint g = k / args.group_size;
    float wv[QGEMV_COLS][QGEMV_RUN];  // column c's weight at K position k + i
    for (uint c = 0; c < QGEMV_COLS; ++c) {
      qgemv_dequantize_run<BITS>(wrow[c], k, float(srow[c][g]), float(brow[c][g]), wv[c]);
    }
    // A constant trip count and a break rather than `r < rows`: GPU compilers unroll it and keep acc in registers.
    for (uint r = 0; r < QGEMV_ROWS; ++r) {
      if (r >= rows) {
        break;
      }
      float xv[QGEMV_RUN];
      load_floats<T, QGEMV_RUN>(x + r * K + k, QGEMV_RUN, vector_loads, xv);
      // The four columns spelled out: named accumulators stay in registers on every target (the emulator's
      // compiler does not unroll loops at -O2).
      float a0 = acc[r][0];
      float a1 = acc[r][1];
      float a2 = acc[r][2];
      float a3 = acc[r][3];
      for (uint i = 0; i < QGEMV_RUN; ++i) {
        a0 = fma(xv[i], wv[0][i], a0);
        a1 = fma(xv[i], wv[1][i], a1);
        a2 = fma(xv[i], wv[2][i], a2);
        a3 = fma(xv[i], wv[3][i], a3);
      }
      acc[r][0] = a0;
      acc[r][1] = a1;
      acc[r][2] = a2;
      acc[r][3] = a3;
    }
  }

  // `rows` is uniform over the threadgroup, so every lane takes part in every ladder: the fixed ladder
  // (16, 8, 4, 2, 1) over a row's four outputs at once; lane 0 holds the simdgroup's sums.
  for (uint r = 0; r < QGEMV_ROWS; ++r) {
    if (r >= rows) {
      break;
    }
    float4 total = float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
    for (ushort delta = SIMD_WIDTH / 2; delta > 0; delta >>= 1) {
      total += simd_shuffle_down(total, delta);
    }
    if (lane == 0) {
      partials[sg][r] = total;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Epilogue: lane (r, c) of simdgroup 0 adds the splits in index order, then the bias.
  const uint r = lane / QGEMV_COLS;
  const uint c = lane % QGEMV_COLS;
  if (sg == 0 && r < rows && n0 + c < args.n) {
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

// Throughput. 128 threads per 32 x 32 output tile; K advances QGEMM_BK positions per step (K is a multiple of 32).
// Staging: thread t fills the run [k0 + 8 (t % 4), k0 + 8 (t % 4) + 8) of tile row and weight row t / 4,
// dequantising its weights into threadgroup memory. Compute: thread t owns rows m0 + 2 (t / 8) + {0, 1} and
// columns n0 + t % 8 + 8 j, j = 0..3, each accumulated over all of K in ascending order.
// Grid: (ceil(N / 32), ceil(rows / 32), 1).
template <typename T, uint BITS, typename S>
[[kernel]] void qgemm(
    constant QGemvArgs& args [[buffer(0)]],
    device const T* x [[buffer(1)]],
    device const uint* wq [[buffer(2)]],
    device const S* scales [[buffer(3)]],
    device const S* biases [[buffer(4)]],
    device const T* bias [[buffer(5)]],
    device T* y [[buffer(6)]],
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
  const uint line = tid / (QGEMM_BK / QGEMV_RUN);
  const uint s = (tid % (QGEMM_BK / QGEMV_RUN)) * QGEMV_RUN;
  const uint x_valid = m0 + line < args.rows ? QGEMV_RUN : 0;
  device const T* xrow = x + ulong(min(m0 + line, args.rows - 1)) * K;
  const uint n_line = min(n0 + line, N - 1);
  device const uint* wrow = wq + ulong(n_line) * (K / 32 * BITS);
  device const S* srow = scales + ulong(n_line) * groups;
  device const S* brow = biases + ulong(n_line) * groups;

  // Named accumulators (row i, column j) stay in registers on every target; the emulator's compiler does not
  // unroll loops at -O2.
  const uint tm = tid / 8;
  const uint tn = tid % 8;
  float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
  float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
  for (uint k0 = 0; k0 < K; k0 += QGEMM_BK) {
    float xv[QGEMV_RUN];
    load_floats<T, QGEMV_RUN>(xrow + k0 + s, x_valid, vector_loads, xv);
    const uint g = (k0 + s) / args.group_size;
    float wv[QGEMV_RUN];
    qgemv_dequantize_run<BITS>(wrow, k0 + s, float(srow[g]), float(brow[g]), wv);
    for (uint i = 0; i < QGEMV_RUN; ++i) {
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

MTLINV_KERNEL(qgemv_b2_f32, qgemv, float, 2, float)
MTLINV_KERNEL(qgemv_b2_f16, qgemv, half, 2, half)
MTLINV_KERNEL(qgemv_b2_bf16, qgemv, bfloat, 2, bfloat)
MTLINV_KERNEL(qgemv_b3_f32, qgemv, float, 3, float)
MTLINV_KERNEL(qgemv_b3_f16, qgemv, half, 3, half)
MTLINV_KERNEL(qgemv_b3_bf16, qgemv, bfloat, 3, bfloat)
MTLINV_KERNEL(qgemv_b4_f32, qgemv, float, 4, float)
MTLINV_KERNEL(qgemv_b4_f16, qgemv, half, 4, half)
MTLINV_KERNEL(qgemv_b4_bf16, qgemv, bfloat, 4, bfloat)
MTLINV_KERNEL(qgemv_b5_f32, qgemv, float, 5, float)
MTLINV_KERNEL(qgemv_b5_f16, qgemv, half, 5, half)
MTLINV_KERNEL(qgemv_b5_bf16, qgemv, bfloat, 5, bfloat)
MTLINV_KERNEL(qgemv_b6_f32, qgemv, float, 6, float)
MTLINV_KERNEL(qgemv_b6_f16, qgemv, half, 6, half)
MTLINV_KERNEL(qgemv_b6_bf16, qgemv, bfloat, 6, bfloat)
MTLINV_KERNEL(qgemv_b8_f32, qgemv, float, 8, float)
MTLINV_KERNEL(qgemv_b8_f16, qgemv, half, 8, half)
MTLINV_KERNEL(qgemv_b8_bf16, qgemv, bfloat, 8, bfloat)
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

// float32 scales and biases with 16-bit activations: GGUF's float16 block scales do not fit bfloat16, so
// imported GGUF weights keep their scales in float32 (mtlinv.gguf_blocks).
MTLINV_KERNEL(qgemv_b4_f16_sf32, qgemv, half, 4, float)
MTLINV_KERNEL(qgemv_b4_bf16_sf32, qgemv, bfloat, 4, float)
MTLINV_KERNEL(qgemv_b8_f16_sf32, qgemv, half, 8, float)
MTLINV_KERNEL(qgemv_b8_bf16_sf32, qgemv, bfloat, 8, float)
MTLINV_KERNEL(qgemm_b4_f16_sf32, qgemm, half, 4, float)
MTLINV_KERNEL(qgemm_b4_bf16_sf32, qgemm, bfloat, 4, float)
MTLINV_KERNEL(qgemm_b8_f16_sf32, qgemm, half, 8, float)
MTLINV_KERNEL(qgemm_b8_bf16_sf32, qgemm, bfloat, 8, float)
