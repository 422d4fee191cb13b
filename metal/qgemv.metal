// Quantized matmul on MLX's affine format: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]), with
// W(n, k) = scales[n, g] * q(n, k) + biases[n, g], g = k / group_size, and q the BITS-bit value at bits
// [k * BITS, (k + 1) * BITS) of row n's little-endian stream of uint32 words (wq [N, K * BITS / 32]).
//
// Two kernels share the dequantisation:
//   * qgemv, canonical (M <= limit, and M == 1): the quantized sibling of gemv_nk, with the same structure and
//     invariance argument (design.md §2). Lanes own fixed runs of 32 K positions, each lane's partial sums are
//     combined by a fixed shuffle ladder and the k_splits simdgroups (a function of K, N, the bit width and the
//     device) in index order. The tile height R is a template parameter (1, 2, 4 or 8, picked by the plan from
//     M); every row has its own accumulators with the row loop innermost and constant trip counts, and tile rows
//     past M repeat the last row (computed, never stored), so row r runs exactly the fma sequence it runs alone,
//     whatever the other rows hold. The weight words, scales and biases of a run are read and dequantised once
//     for all rows of the tile.
//   * qgemm, throughput (M above the limit): dequantises a 32 x 32 weight tile into threadgroup memory and runs a
//     tiled GEMM whose threads accumulate over K in ascending order: a different reduction order from qgemv,
//     which is why the two must never serve the same rows below the limit.
//
// qgemv's unit is a run of 32 consecutive values of one weight row, starting at a multiple of 32: exactly BITS
// whole words (32 * BITS bits) for every width, and inside one group (32 divides every group size), so it has one
// scale and one bias. At 4 and 8 bits a run is one or two 16-byte groups, loaded as such where the plan proved wq
// 16-byte aligned; the other widths, and unaligned weights, load the same words one by one. Either way the same
// words reach the same arithmetic: the load path never changes a result. qgemm stages runs of 8 values (8 * BITS
// bits from a byte boundary, at most two words; for 3, 5 and 6 bits single values straddle two words).
#include "common.h"
#include "qgemv_args.h"
#include "load.h"

constant constexpr uint QGEMV_RUN = 32;        // K positions (and BITS packed words) a lane owns per step
constant constexpr uint QGEMV_SUB = 8;         // of them dequantised and applied to the rows at once
constant constexpr uint QGEMV_COLS = 4;        // weight rows (outputs) per canonical simdgroup
constant constexpr uint QGEMV_MAX_SPLITS = 8;  // most simdgroups sharing one output tile (k_splits)
constant constexpr uint QGEMM_RUN = 8;         // K positions a qgemm thread stages at once
constant constexpr uint QGEMM_TILE = 32;       // throughput outputs per threadgroup along M and along N
constant constexpr uint QGEMM_BK = 32;         // K positions staged per throughput step

// float(q), exactly, for q < 2^23, without an integer-to-float conversion (a quarter-rate instruction on NVIDIA
// GPUs, where it bounded this kernel): q placed in the mantissa of 2^23 is the float 2^23 + q, and subtracting
// 2^23 is exact.
inline float qgemv_float(uint q) {
  return as_type<float>(q | 0x4B000000u) - 8388608.0f;
}

// The dequantisation of every kernel here, and of mtlinv.quant.dequantize_float32: scale * q + bias in float32,
// the product rounded before the add. Two roundings rather than an fma because that is the value the Python
// format helpers and the lossless GGUF importers reproduce; the kernels are compiled without contraction
// (design.md §2 rule 4), so no target fuses it.
inline float qgemv_dequantize(float scale, uint q, float bias) {
  return scale * qgemv_float(q) + bias;
}

// Dequantises the run of QGEMM_RUN values of weight row `row` that starts at K position k (a multiple of 8).
// The run's bits start `shift` bits into word `word` (a multiple of 8 bits) and end at most 64 bits later, so two
// words `lo` and `hi` hold it; each half of 4 values (4 * BITS <= 32 bits) is cut from them as one window.
template <uint BITS>
inline void qgemv_dequantize_run(device const uint* row, uint k, float scale, float bias, thread float* out) {
  const uint bit = k * BITS;
  const uint word = bit / 32;
  const uint shift = bit % 32;
  const uint lo = row[word];
  const uint hi = shift + QGEMM_RUN * BITS > 32 ? row[word + 1] : 0u;
  for (uint h = 0; h < QGEMM_RUN; h += 4) {
    const uint s = shift + h * BITS;  // where value k + h starts in (lo, hi); s + 4 * BITS <= 64
    uint window = s == 0 ? lo : (s >= 32 ? hi >> (s - 32) : (lo >> s) | (hi << (32 - s)));
    for (uint i = 0; i < 4; ++i) {
      out[h + i] = qgemv_dequantize(scale, window & ((1u << BITS) - 1u), bias);
      window >>= BITS;
    }
  }
}

// The values [8 s, 8 s + 8) of a run held in registers (`words`: the run's BITS words): bits [8 s BITS,
// 8 s BITS + 8 BITS) of them, which start on a byte boundary and span at most two words; each half of 4 values
// (4 * BITS <= 32 bits) is cut from them as one window. s is a constant once the caller's loop is unrolled, so
// the word choice and the shifts fold away.
template <uint BITS>
inline void qgemv_unpack(thread const uint* words, uint s, thread uint* q) {
  const uint bit = s * QGEMV_SUB * BITS;
  const uint word = bit / 32;
  const uint shift = bit % 32;
  const uint lo = words[word];
  const uint hi = shift + QGEMV_SUB * BITS > 32 ? words[word + 1] : 0u;
  for (uint h = 0; h < QGEMV_SUB; h += 4) {
    const uint at = shift + h * BITS;
    uint window = at == 0 ? lo : (at >= 32 ? hi >> (at - 32) : (lo >> at) | (hi << (32 - at)));
    for (uint i = 0; i < 4; ++i) {
      q[h + i] = window & ((1u << BITS) - 1u);
      window >>= BITS;
    }
  }
}

// 4 bits: the 8 values are the nibbles of word s. Even and odd nibbles are masked apart once, then each value is
// one byte of either (a byte extract, which GPUs do in one instruction).
template <>
inline void qgemv_unpack<4>(thread const uint* words, uint s, thread uint* q) {
  const uint w = words[s];
  const uint even = w & 0x0F0F0F0Fu;
  const uint odd = (w >> 4) & 0x0F0F0F0Fu;
  for (uint i = 0; i < 4; ++i) {
    q[2 * i] = (even >> (8 * i)) & 0xFFu;
    q[2 * i + 1] = (odd >> (8 * i)) & 0xFFu;
  }
}

// 8 bits: the bytes of words 2 s and 2 s + 1.
template <>
inline void qgemv_unpack<8>(thread const uint* words, uint s, thread uint* q) {
  for (uint i = 0; i < 4; ++i) {
    q[i] = (words[2 * s] >> (8 * i)) & 0xFFu;
    q[4 + i] = (words[2 * s + 1] >> (8 * i)) & 0xFFu;
  }
}

// The BITS words of run j of the weight row starting at word `row`: 16-byte loads where the plan proved wq 16-byte
// aligned (`vector`; runs of 4 and 8 bits are whole 16-byte groups, and a row's K / 32 * BITS words a multiple of
// 4), else word loads; the same words either way. Weights stream past once (load16_streaming). Also the run's
// scale and bias, group g of the row's groups starting at `groups_at`.
template <uint BITS, typename S>
inline void qgemv_load_run(device const uint* wq, device const S* scales, device const S* biases, uint row,
                           uint groups_at, uint j, uint g, bool vector, thread uint* words, thread float* scale,
                           thread float* bias) {
  device const uint* p = wq + row + j * BITS;
  if (BITS % 4 == 0 && vector) {
    for (uint v = 0; 4 * v < BITS; ++v) {
      const uint4 raw = load16_streaming(p + 4 * v);
      words[4 * v] = raw.x;
      words[4 * v + 1] = raw.y;
      words[4 * v + 2] = raw.z;
      words[4 * v + 3] = raw.w;
    }
  } else {
    for (uint i = 0; i < BITS; ++i) {
      words[i] = p[i];
    }
  }
  *scale = float(scales[groups_at + g]);
  *bias = float(biases[groups_at + g]);
}

// Values [8 SUB, 8 SUB + 8) of one run (K positions [k, k + 32)) of the four weight rows, whose words (`words`,
// [column][BITS]), scales and biases are already loaded, against every row of the tile: each value dequantised
// once and applied to the R rows, row r's four outputs accumulating in acc[r] in K order. SUB is a template
// parameter so that the words it picks are known at compile time: a loop over it that a compiler left rolled
// would index the words by a variable and put them on the stack (nvcc does at R >= 4).
template <typename T, uint BITS, uint R, uint SUB>
inline void qgemv_sub(thread float4* acc, thread const uint* words, thread const float* scale,
                      thread const float* bias, device const T* x, thread const uint* x_row, uint k, bool x_vector) {
  float wv[QGEMV_COLS * QGEMV_SUB];  // column c's weight at K position k + 8 SUB + i: wv[c * 8 + i]
  for (uint c = 0; c < QGEMV_COLS; ++c) {
    uint q[QGEMV_SUB];
    qgemv_unpack<BITS>(words + c * BITS, SUB, q);
    for (uint i = 0; i < QGEMV_SUB; ++i) {
      wv[c * QGEMV_SUB + i] = qgemv_dequantize(scale[c], q[i], bias[c]);
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
template <typename T, uint BITS, uint R>
inline void qgemv_run(thread float4* acc, thread const uint* words, thread const float* scale,
                      thread const float* bias, device const T* x, thread const uint* x_row, uint k, bool x_vector) {
  static_assert(QGEMV_RUN == 4 * QGEMV_SUB, "a run is four groups of 8 values");
  qgemv_sub<T, BITS, R, 0>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, R, 1>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, R, 2>(acc, words, scale, bias, x, x_row, k, x_vector);
  qgemv_sub<T, BITS, R, 3>(acc, words, scale, bias, x, x_row, k, x_vector);
}

// Canonical. Threadgroup: k_splits simdgroups, all on the same QGEMV_COLS outputs. Lane `lane` of simdgroup `sg`
// owns the runs j = sg * 32 + lane + i * (k_splits * 32), K positions [32 j, 32 j + 32): a simdgroup's step covers
// 1024 consecutive positions, so its loads of the packed words (BITS * 128 bytes per weight row) and of x are
// contiguous across lanes. At up to 4 bits and R <= 2, two runs' words are loaded before the arithmetic that uses
// them; otherwise one run's (at 5, 6 and 8 bits already as many bytes; at R >= 4 the arithmetic per run is long
// and the registers go to the rows). Grid: (ceil(N / 4), ceil(rows / R), 1).
template <typename T, uint BITS, typename S, uint R>
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
  constexpr uint COLS = QGEMV_COLS;
  // Runs loaded ahead: at least 16 bytes of each weight row; one at R >= 4, whose arithmetic per run is long
  // enough to cover the next loads and whose accumulators and x values need the registers.
  constexpr uint IN_FLIGHT = BITS <= 4 && R <= 2 ? 2 : 1;
  threadgroup float4 partials[QGEMV_MAX_SPLITS][R];  // [k split][row]: each simdgroup's ladder result

  const uint n0 = tile.x * COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  const uint runs = K / QGEMV_RUN;
  const uint runs_per_group = args.group_size / QGEMV_RUN;
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
    g_off[c] = n * (runs / runs_per_group);
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
      float scale0[COLS];
      float scale1[COLS];
      float bias0[COLS];
      float bias1[COLS];
      const uint g0 = j / runs_per_group;
      const uint g1 = (j + stride) / runs_per_group;
      for (uint c = 0; c < COLS; ++c) {
        qgemv_load_run<BITS, S>(wq, scales, biases, w_off[c], g_off[c], j, g0, w_vector, words0 + c * BITS,
                                scale0 + c, bias0 + c);
        qgemv_load_run<BITS, S>(wq, scales, biases, w_off[c], g_off[c], j + stride, g1, w_vector,
                                words1 + c * BITS, scale1 + c, bias1 + c);
      }
      qgemv_run<T, BITS, R>(acc, words0, scale0, bias0, x, x_row, j * QGEMV_RUN, x_vector);
      qgemv_run<T, BITS, R>(acc, words1, scale1, bias1, x, x_row, (j + stride) * QGEMV_RUN, x_vector);
    }
  }
  // One run at a time: every run when IN_FLIGHT == 1, else the odd one out.
  for (; j < runs; j += stride) {
    uint words[COLS * BITS];
    float scale[COLS];
    float bias_g[COLS];
    const uint g = j / runs_per_group;
    for (uint c = 0; c < COLS; ++c) {
      qgemv_load_run<BITS, S>(wq, scales, biases, w_off[c], g_off[c], j, g, w_vector, words + c * BITS, scale + c,
                              bias_g + c);
    }
    qgemv_run<T, BITS, R>(acc, words, scale, bias_g, x, x_row, j * QGEMV_RUN, x_vector);
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
  const uint line = tid / (QGEMM_BK / QGEMM_RUN);
  const uint s = (tid % (QGEMM_BK / QGEMM_RUN)) * QGEMM_RUN;
  const uint x_valid = m0 + line < args.rows ? QGEMM_RUN : 0;
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
    float xv[QGEMM_RUN];
    load_floats<T, QGEMM_RUN>(xrow + k0 + s, x_valid, vector_loads, xv);
    const uint g = (k0 + s) / args.group_size;
    float wv[QGEMM_RUN];
    qgemv_dequantize_run<BITS>(wrow, k0 + s, float(srow[g]), float(brow[g]), wv);
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

MTLINV_KERNEL(qgemv_b2_r1_f32, qgemv, float, 2, float, 1)
MTLINV_KERNEL(qgemv_b2_r2_f32, qgemv, float, 2, float, 2)
MTLINV_KERNEL(qgemv_b2_r4_f32, qgemv, float, 2, float, 4)
MTLINV_KERNEL(qgemv_b2_r8_f32, qgemv, float, 2, float, 8)
MTLINV_KERNEL(qgemv_b2_r1_f16, qgemv, half, 2, half, 1)
MTLINV_KERNEL(qgemv_b2_r2_f16, qgemv, half, 2, half, 2)
MTLINV_KERNEL(qgemv_b2_r4_f16, qgemv, half, 2, half, 4)
MTLINV_KERNEL(qgemv_b2_r8_f16, qgemv, half, 2, half, 8)
MTLINV_KERNEL(qgemv_b2_r1_bf16, qgemv, bfloat, 2, bfloat, 1)
MTLINV_KERNEL(qgemv_b2_r2_bf16, qgemv, bfloat, 2, bfloat, 2)
MTLINV_KERNEL(qgemv_b2_r4_bf16, qgemv, bfloat, 2, bfloat, 4)
MTLINV_KERNEL(qgemv_b2_r8_bf16, qgemv, bfloat, 2, bfloat, 8)
MTLINV_KERNEL(qgemv_b3_r1_f32, qgemv, float, 3, float, 1)
MTLINV_KERNEL(qgemv_b3_r2_f32, qgemv, float, 3, float, 2)
MTLINV_KERNEL(qgemv_b3_r4_f32, qgemv, float, 3, float, 4)
MTLINV_KERNEL(qgemv_b3_r8_f32, qgemv, float, 3, float, 8)
MTLINV_KERNEL(qgemv_b3_r1_f16, qgemv, half, 3, half, 1)
MTLINV_KERNEL(qgemv_b3_r2_f16, qgemv, half, 3, half, 2)
MTLINV_KERNEL(qgemv_b3_r4_f16, qgemv, half, 3, half, 4)
MTLINV_KERNEL(qgemv_b3_r8_f16, qgemv, half, 3, half, 8)
MTLINV_KERNEL(qgemv_b3_r1_bf16, qgemv, bfloat, 3, bfloat, 1)
MTLINV_KERNEL(qgemv_b3_r2_bf16, qgemv, bfloat, 3, bfloat, 2)
MTLINV_KERNEL(qgemv_b3_r4_bf16, qgemv, bfloat, 3, bfloat, 4)
MTLINV_KERNEL(qgemv_b3_r8_bf16, qgemv, bfloat, 3, bfloat, 8)
MTLINV_KERNEL(qgemv_b4_r1_f32, qgemv, float, 4, float, 1)
MTLINV_KERNEL(qgemv_b4_r2_f32, qgemv, float, 4, float, 2)
MTLINV_KERNEL(qgemv_b4_r4_f32, qgemv, float, 4, float, 4)
MTLINV_KERNEL(qgemv_b4_r8_f32, qgemv, float, 4, float, 8)
MTLINV_KERNEL(qgemv_b4_r1_f16, qgemv, half, 4, half, 1)
MTLINV_KERNEL(qgemv_b4_r2_f16, qgemv, half, 4, half, 2)
MTLINV_KERNEL(qgemv_b4_r4_f16, qgemv, half, 4, half, 4)
MTLINV_KERNEL(qgemv_b4_r8_f16, qgemv, half, 4, half, 8)
MTLINV_KERNEL(qgemv_b4_r1_bf16, qgemv, bfloat, 4, bfloat, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16, qgemv, bfloat, 4, bfloat, 2)
MTLINV_KERNEL(qgemv_b4_r4_bf16, qgemv, bfloat, 4, bfloat, 4)
MTLINV_KERNEL(qgemv_b4_r8_bf16, qgemv, bfloat, 4, bfloat, 8)
MTLINV_KERNEL(qgemv_b5_r1_f32, qgemv, float, 5, float, 1)
MTLINV_KERNEL(qgemv_b5_r2_f32, qgemv, float, 5, float, 2)
MTLINV_KERNEL(qgemv_b5_r4_f32, qgemv, float, 5, float, 4)
MTLINV_KERNEL(qgemv_b5_r8_f32, qgemv, float, 5, float, 8)
MTLINV_KERNEL(qgemv_b5_r1_f16, qgemv, half, 5, half, 1)
MTLINV_KERNEL(qgemv_b5_r2_f16, qgemv, half, 5, half, 2)
MTLINV_KERNEL(qgemv_b5_r4_f16, qgemv, half, 5, half, 4)
MTLINV_KERNEL(qgemv_b5_r8_f16, qgemv, half, 5, half, 8)
MTLINV_KERNEL(qgemv_b5_r1_bf16, qgemv, bfloat, 5, bfloat, 1)
MTLINV_KERNEL(qgemv_b5_r2_bf16, qgemv, bfloat, 5, bfloat, 2)
MTLINV_KERNEL(qgemv_b5_r4_bf16, qgemv, bfloat, 5, bfloat, 4)
MTLINV_KERNEL(qgemv_b5_r8_bf16, qgemv, bfloat, 5, bfloat, 8)
MTLINV_KERNEL(qgemv_b6_r1_f32, qgemv, float, 6, float, 1)
MTLINV_KERNEL(qgemv_b6_r2_f32, qgemv, float, 6, float, 2)
MTLINV_KERNEL(qgemv_b6_r4_f32, qgemv, float, 6, float, 4)
MTLINV_KERNEL(qgemv_b6_r8_f32, qgemv, float, 6, float, 8)
MTLINV_KERNEL(qgemv_b6_r1_f16, qgemv, half, 6, half, 1)
MTLINV_KERNEL(qgemv_b6_r2_f16, qgemv, half, 6, half, 2)
MTLINV_KERNEL(qgemv_b6_r4_f16, qgemv, half, 6, half, 4)
MTLINV_KERNEL(qgemv_b6_r8_f16, qgemv, half, 6, half, 8)
MTLINV_KERNEL(qgemv_b6_r1_bf16, qgemv, bfloat, 6, bfloat, 1)
MTLINV_KERNEL(qgemv_b6_r2_bf16, qgemv, bfloat, 6, bfloat, 2)
MTLINV_KERNEL(qgemv_b6_r4_bf16, qgemv, bfloat, 6, bfloat, 4)
MTLINV_KERNEL(qgemv_b6_r8_bf16, qgemv, bfloat, 6, bfloat, 8)
MTLINV_KERNEL(qgemv_b8_r1_f32, qgemv, float, 8, float, 1)
MTLINV_KERNEL(qgemv_b8_r2_f32, qgemv, float, 8, float, 2)
MTLINV_KERNEL(qgemv_b8_r4_f32, qgemv, float, 8, float, 4)
MTLINV_KERNEL(qgemv_b8_r8_f32, qgemv, float, 8, float, 8)
MTLINV_KERNEL(qgemv_b8_r1_f16, qgemv, half, 8, half, 1)
MTLINV_KERNEL(qgemv_b8_r2_f16, qgemv, half, 8, half, 2)
MTLINV_KERNEL(qgemv_b8_r4_f16, qgemv, half, 8, half, 4)
MTLINV_KERNEL(qgemv_b8_r8_f16, qgemv, half, 8, half, 8)
MTLINV_KERNEL(qgemv_b8_r1_bf16, qgemv, bfloat, 8, bfloat, 1)
MTLINV_KERNEL(qgemv_b8_r2_bf16, qgemv, bfloat, 8, bfloat, 2)
MTLINV_KERNEL(qgemv_b8_r4_bf16, qgemv, bfloat, 8, bfloat, 4)
MTLINV_KERNEL(qgemv_b8_r8_bf16, qgemv, bfloat, 8, bfloat, 8)
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
MTLINV_KERNEL(qgemv_b4_r1_f16_sf32, qgemv, half, 4, float, 1)
MTLINV_KERNEL(qgemv_b4_r2_f16_sf32, qgemv, half, 4, float, 2)
MTLINV_KERNEL(qgemv_b4_r4_f16_sf32, qgemv, half, 4, float, 4)
MTLINV_KERNEL(qgemv_b4_r8_f16_sf32, qgemv, half, 4, float, 8)
MTLINV_KERNEL(qgemv_b4_r1_bf16_sf32, qgemv, bfloat, 4, float, 1)
MTLINV_KERNEL(qgemv_b4_r2_bf16_sf32, qgemv, bfloat, 4, float, 2)
MTLINV_KERNEL(qgemv_b4_r4_bf16_sf32, qgemv, bfloat, 4, float, 4)
MTLINV_KERNEL(qgemv_b4_r8_bf16_sf32, qgemv, bfloat, 4, float, 8)
MTLINV_KERNEL(qgemv_b8_r1_f16_sf32, qgemv, half, 8, float, 1)
MTLINV_KERNEL(qgemv_b8_r2_f16_sf32, qgemv, half, 8, float, 2)
MTLINV_KERNEL(qgemv_b8_r4_f16_sf32, qgemv, half, 8, float, 4)
MTLINV_KERNEL(qgemv_b8_r8_f16_sf32, qgemv, half, 8, float, 8)
MTLINV_KERNEL(qgemv_b8_r1_bf16_sf32, qgemv, bfloat, 8, float, 1)
MTLINV_KERNEL(qgemv_b8_r2_bf16_sf32, qgemv, bfloat, 8, float, 2)
MTLINV_KERNEL(qgemv_b8_r4_bf16_sf32, qgemv, bfloat, 8, float, 4)
MTLINV_KERNEL(qgemv_b8_r8_bf16_sf32, qgemv, bfloat, 8, float, 8)
MTLINV_KERNEL(qgemm_b4_f16_sf32, qgemm, half, 4, float)
MTLINV_KERNEL(qgemm_b4_bf16_sf32, qgemm, bfloat, 4, float)
MTLINV_KERNEL(qgemm_b8_f16_sf32, qgemm, half, 8, float)
MTLINV_KERNEL(qgemm_b8_bf16_sf32, qgemm, bfloat, 8, float)
