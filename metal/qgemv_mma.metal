// Canonical quantized GEMV on the matrix units: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) for 16-bit x (half or
// bfloat) with W in the affine format of metal/quant.h, on targets whose plans say DeviceCaps::matrix_units (CUDA).
// The output tile is gemv_nk_mma's (metal/mma_tile.h): 16 outputs, R = 8 or 16 rows of x, k_splits simdgroups; C = 2
// such tiles per threadgroup share each load of x (4-bit, tile layout, 16 rows: there x's loads cost 17-28% of the
// call; docs/decisions.md, "qgemv: two output tiles at 16 rows").
// Each lane dequantises its share of the weights once, to x's type T, and hands them to simd_mma_16x8x32
// (metal/mma.h), which applies them to all R rows.
//
// The weight a product sees: with scales of x's type (the MLX format), T(scale q + bias) rounded once, as an fma in
// T gives it, two values per packed instruction (metal/quant.h, metal/pair16.h): on NVIDIA GPUs the float32
// dequantisation took about 7 instructions per weight and bounded the kernel. With scales of another type (float32
// and, beside bfloat16 x, float16: GGUF imports; the super-block form's codes times their factors), T(W(n, k)) of
// the float32 weight of the scalar qgemv (QgemvMmaReg). Either way an extra rounding to x's precision
// before the product (MLX's quantized matmuls, too, dequantise into x's type); the tests bound the result against
// a float64 product with the float32 weights.
//
// Layout: a step is 4 runs of 32 values (metal/qgemv_run.h), 128 K positions. Lane 4 g + t loads run 4 s + t of
// weight rows g and g + 8 of each output tile (16 bytes each at 4 bits: a row's four lanes read 64 contiguous bytes)
// and the matching 32 values of row g of each group of 8 rows of x. Builtin call i of a step takes values
// [8 i, 8 i + 8) of each lane's run, in the pair order of qgemv_code_pairs, x rearranged to match
// (qgemv_pair_order): the four lanes of a row bring different runs and the pairs are not in K order, which the
// builtin does not mind, as long as A and B agree on which K position each slot holds. Steps are dealt to the k_splits
// simdgroups in turn (simdgroup sg: steps sg, sg + k_splits, ...).
//
// The tile layout (the _tiled kernels; mtlinv.quant.tile makes it from MLX's): the rows of each tile of 16 weight
// rows interleaved step by step, in the order this kernel reads them. wq [N/16, S, 16, 4 BITS] holds in block
// (tile x, step s) the 4 runs (4 BITS words) of K positions [128 s, 128 s + 128) of each of the tile's 16 rows,
// S = ceil(K / 128) (a last partial step padded with zero words); scales and biases [N/16, K / group_size, 16]
// hold a group's 16 rows side by side. A simdgroup's load of one step then reads 1 KB in one piece at 4 bits,
// where the row layout has it read 64 bytes of each of 16 rows, and the step's scales lie in one or two sectors
// instead of 16 rows' lines. The same values reach the same calls in either layout, so the bits are the same.
//
// Invariance (design.md §2): output (m, n) is acc <- mma(acc, call) over the simdgroup's steps and calls in order,
// then the splits added in index order (mma_tile_store). Steps and splits depend on K and k_splits (from K, N and
// the device), never on M; the builtin sums one (row, output) pair the same way in every position of its 8 rows
// whatever the others hold. Rows past M repeat the last row, weight rows past N the last weight row (in the tile
// layout, a tile past N the last tile; computed, never stored); runs past K enter as zeros in both operands, so no
// branch sits around the builtin.
#include "common.h"
#include "qgemv_args.h"  // QGemvArgs, QGEMV_MMA_STEP (runs per step: one per lane of a weight row)
#include "load.h"
#include "mma.h"
#include "mma_tile.h"
#include "qgemv_run.h"
#include "quant.h"

// quant_dequantize<float> in two instructions per weight instead of four, for the groups quant_fma_exact admits.
// A BITS-bit code at bits [AT, AT + BITS) of a word (AT + BITS <= 23), masked out and given the exponent of
// 2^(23 - AT), is the float 2^E + q, E = 23 - AT (quant_code_float: one LOP3). Then
//   fma(scale, 2^E + q, -scale 2^E) = scale q, rounded once,
// exactly the product quant_dequantize rounds, since scale 2^E is exact and fma rounds the exact sum only once;
// the bias is added after it as there. `offset` is -scale 2^E (quant_fma_offset), computed once per group.
template <uint BITS, uint AT>
inline float quant_code_float(uint word) {
  return as_type<float>(pair16_and_or(word, ((1u << BITS) - 1u) << AT, (150u - AT) << 23));
}

template <uint AT>
inline float quant_fma_offset(float scale) {
  return scale * -float(1u << (23 - AT));
}

template <uint BITS, uint AT>
inline float quant_dequantize_fma(float scale, float offset, uint word, float bias) {
  return fma(scale, quant_code_float<BITS, AT>(word), offset) + bias;
}

// Whether quant_dequantize_fma gives quant_dequantize<float>'s bits for this group, where a GPU flushes float32
// subnormals or not: the scale is 0 or normal below 2^100 (so scale 2^23 is finite and exact, scale q is never a
// subnormal, and NaN or infinite scales are left out), and not (a negative scale, -0 included, with the bias -0):
// there scale * 0 + bias is -0, where the fma's exact 0 is +0. Checked once per group, on the bits.
inline bool quant_fma_exact(float scale, float bias) {
  const uint s = as_type<uint>(scale);
  const uint magnitude = s & 0x7FFFFFFFu;
  const bool in_range = magnitude == 0u || magnitude - 0x00800000u < 0x71800000u - 0x00800000u;  // [2^-126, 2^100)
  return in_range && !(s >= 0x80000000u && as_type<uint>(bias) == 0x80000000u);
}

// Values [8 I, 8 I + 8) of a run (its BITS words loaded, its group's scale and bias) as the builtin's operand, in
// the pair order of qgemv_code_pairs: each value dequantised and rounded to T. Scales of x's type T dequantise two
// values per packed instruction (quant_dequantize_pair); FMA concerns float32 scales only.
template <typename T, uint BITS, uint I, bool FMA>
inline uint4 qgemv_mma_operand(thread const uint* words, T scale, T bias) {
  const uint4 codes = qgemv_code_pairs<BITS>(words, I);
  const uint scale2 = pair16_splat<T>(scale);
  const uint bias2 = pair16_splat<T>(bias);
  uint4 w;
  for (uint i = 0; i < 4; ++i) {
    w[i] = quant_dequantize_pair<T, BITS>(codes[i], scale2, bias2);
  }
  return w;
}
// float32 scales (GGUF imports): the float32 weight of every quantized kernel (quant_dequantize), rounded to T.
// FMA: by quant_dequantize_fma, the same bits in fewer instructions, for groups quant_fma_exact admits
// (QgemvMmaFma); else by quant_dequantize, which every group admits.
template <typename T, uint BITS, uint I>
struct QgemvMmaFma;

template <typename T, uint BITS, uint I, bool FMA>
inline uint4 qgemv_mma_operand(thread const uint* words, float scale, float bias) {
  if (FMA) {
    return QgemvMmaFma<T, BITS, I>::operand(words, scale, bias);
  }
  const uint4 codes = qgemv_code_pairs<BITS>(words, I) & quant_code_mask(BITS);
  uint4 w;
  for (uint i = 0; i < 4; ++i) {
    w[i] = pair16_pack<T>(quant_dequantize<float>(scale, codes[i] & 0xFFFFu, bias),
                          quant_dequantize<float>(scale, codes[i] >> 16, bias));
  }
  return w;
}

// The pairs of qgemv_code_pairs, each code read where it lies in a word: widths up to 7 bits hold pair i's codes at
// bits 0 and 16 of word i (at 4 bits word I shifted by 4 i), the upper one's exponent bits above bit 22.
template <typename T, uint BITS, uint I>
struct QgemvMmaFma {
  static uint4 operand(thread const uint* words, float scale, float bias) {
    static_assert(BITS <= 7, "a code at bit 16 must end below the exponent's bit 23");
    const uint4 codes = qgemv_code_pairs<BITS>(words, I);
    const float at0 = quant_fma_offset<0>(scale);
    const float at16 = quant_fma_offset<16>(scale);
    uint4 w;
    for (uint i = 0; i < 4; ++i) {
      w[i] = pair16_pack<T>(quant_dequantize_fma<BITS, 0>(scale, at0, codes[i], bias),
                            quant_dequantize_fma<BITS, 16>(scale, at16, codes[i], bias));
    }
    return w;
  }
};
// 8 bits: bytes 0 and 2, then 1 and 3, of words 2 I and 2 I + 1: bits 0 and 8 of the word and of its upper half (a
// code at bit 16 would reach the exponent's bit 23).
template <typename T, uint I>
struct QgemvMmaFma<T, 8, I> {
  static uint4 operand(thread const uint* words, float scale, float bias) {
    const float at0 = quant_fma_offset<0>(scale);
    const float at8 = quant_fma_offset<8>(scale);
    uint4 w;
    for (uint h = 0; h < 2; ++h) {
      const uint word = words[2 * I + h];
      const uint upper = word >> 16;
      w[2 * h] = pair16_pack<T>(quant_dequantize_fma<8, 0>(scale, at0, word, bias),
                                quant_dequantize_fma<8, 0>(scale, at0, upper, bias));
      w[2 * h + 1] = pair16_pack<T>(quant_dequantize_fma<8, 8>(scale, at8, word, bias),
                                    quant_dequantize_fma<8, 8>(scale, at8, upper, bias));
    }
    return w;
  }
};

// Call I of a step: values [8 I, 8 I + 8) of the lane's runs of both weight rows of each of the C output tiles (words
// [C][2][BITS], scale and bias [C][2][RUN_GROUPS]) against the same K positions of x (from element `k` of each row,
// `valid`: whether the lane's run lies inside K; put in the operand's pair order), for every group of 8 rows: one load
// of x serves the C tiles. FMA: as qgemv_mma_operand.
template <typename T, uint BITS, typename S, uint B, uint C, uint RUN_GROUPS, uint I, bool FMA>
inline void qgemv_mma_call(thread float4* acc, thread const uint* words, thread const S* scale,
                           thread const S* bias, device const T* x, thread const uint* x_row, uint k, bool valid,
                           bool x_vector, ushort lane) {
  constexpr uint W = 2 * BITS;        // a tile's words
  constexpr uint G = 2 * RUN_GROUPS;  // a tile's scales and biases
  const uint lo = qgemv_sub_group<RUN_GROUPS>(I);  // the group of these values in the low row
  const uint hi = RUN_GROUPS + lo;                  // and in the high row
  uint4 a_lo[C];
  uint4 a_hi[C];
  for (uint c = 0; c < C; ++c) {
    a_lo[c] = qgemv_mma_operand<T, BITS, I, FMA>(words + c * W, scale[c * G + lo], bias[c * G + lo]);
    a_hi[c] = qgemv_mma_operand<T, BITS, I, FMA>(words + c * W + BITS, scale[c * G + hi], bias[c * G + hi]);
  }
  for (uint j = 0; j < B; ++j) {
    device const T* p = x + x_row[j] + k + QGEMV_SUB * I;
    const uint4 b = qgemv_pair_order<BITS>(valid && x_vector ? load16(p) : load16_upto(p, valid ? 8u : 0u));
    for (uint c = 0; c < C; ++c) {
      acc[c * B + j] = simd_mma_16x8x32<T>(acc[c * B + j], a_lo[c], a_hi[c], b, lane);
    }
  }
}

// One step's four calls, in order.
template <typename T, uint BITS, typename S, uint B, uint C, uint RUN_GROUPS, bool FMA>
inline void qgemv_mma_calls(thread float4* acc, thread const uint* words, thread const S* scale,
                            thread const S* bias, device const T* x, thread const uint* x_row, uint k, bool valid,
                            bool x_vector, ushort lane) {
  qgemv_mma_call<T, BITS, S, B, C, RUN_GROUPS, 0, FMA>(acc, words, scale, bias, x, x_row, k, valid, x_vector, lane);
  qgemv_mma_call<T, BITS, S, B, C, RUN_GROUPS, 1, FMA>(acc, words, scale, bias, x, x_row, k, valid, x_vector, lane);
  qgemv_mma_call<T, BITS, S, B, C, RUN_GROUPS, 2, FMA>(acc, words, scale, bias, x, x_row, k, valid, x_vector, lane);
  qgemv_mma_call<T, BITS, S, B, C, RUN_GROUPS, 3, FMA>(acc, words, scale, bias, x, x_row, k, valid, x_vector, lane);
}

// A step with scales of x's type: the packed dequantisation.
template <typename T, uint BITS, uint B, uint C, uint RUN_GROUPS>
inline void qgemv_mma_step(thread float4* acc, thread const uint* words, thread const T* scale, thread const T* bias,
                           device const T* x, thread const uint* x_row, uint k, bool valid, bool x_vector,
                           ushort lane) {
  qgemv_mma_calls<T, BITS, T, B, C, RUN_GROUPS, false>(acc, words, scale, bias, x, x_row, k, valid, x_vector, lane);
}
// A step with float32 scales: quant_dequantize_fma where every lane's groups (two, or four at group size 16) allow
// it, which all but extreme or special scales do, else quant_dequantize (about 7 instructions a weight where the fma
// path takes 4; docs/decisions.md, "qgemv: float32 scales"). The branch is uniform (simd_all), so the builtin runs
// converged either way, and the weights are the same bits either way.
template <typename T, uint BITS, uint B, uint C, uint RUN_GROUPS>
inline void qgemv_mma_step(thread float4* acc, thread const uint* words, thread const float* scale,
                           thread const float* bias, device const T* x, thread const uint* x_row, uint k, bool valid,
                           bool x_vector, ushort lane) {
  bool fma_exact = true;
  for (uint i = 0; i < C * 2 * RUN_GROUPS; ++i) {
    fma_exact = fma_exact && quant_fma_exact(scale[i], bias[i]);
  }
  if (simd_all(fma_exact)) {
    qgemv_mma_calls<T, BITS, float, B, C, RUN_GROUPS, true>(acc, words, scale, bias, x, x_row, k, valid, x_vector,
                                                            lane);
  } else {
    qgemv_mma_calls<T, BITS, float, B, C, RUN_GROUPS, false>(acc, words, scale, bias, x, x_row, k, valid,
                                                             x_vector, lane);
  }
}

// The type a lane holds a group's scale and bias in: x's type T where the scales have it (the packed dequantisation),
// else float (float32 scales, float16 ones beside bfloat16 x, the super-block form's codes times their factors),
// which the float32 dequantisation takes.
template <typename T, typename S>
struct QgemvMmaReg {
  using type = float;
};
template <typename T>
struct QgemvMmaReg<T, T> {
  using type = T;
};

// The words, scales and biases (as Reg, QgemvMmaReg; [C][2][RUN_GROUPS]) of run j of both weight rows of the lane in
// each of the C output tiles, from the rows' first words w_off[C][2] and first groups g_off[C][2] (in the tile layout,
// those of the lane's rows in their tile's first block). Run j starts in group qgemv_run_group(j) (metal/qgemv_run.h);
// in the tile layout at run j % 4 of step j / 4, whose blocks lie 16 rows apart, and a row's groups 16 scales apart
// (the tile layout, above). Four 2-byte loads per step, each touching 8 rows' lines in the row layout: one 16-byte
// table per lane for 4 steps, handed round the quad by shuffles, made 8 rows 8% faster in a kernel with only that
// path, but nvcc gave the complete kernel 78-84 registers and it was slower (docs/kernel_guide.md); the tile layout
// puts a step's scales in two sectors instead.
template <uint BITS, typename S, uint C, bool TILED, uint RUN_GROUPS, typename Reg>
inline void qgemv_mma_load(device const uint* wq, device const S* scales, device const S* biases,
                           device const float* supers, thread const uint* w_off, thread const uint* g_off, uint j,
                           uint group_shift, bool w_vector, thread uint* words, thread Reg* scale, thread Reg* bias) {
  constexpr uint block_words = MMA_TILE_COLS * QGEMV_MMA_STEP * BITS;  // one step of a tile's 16 rows
  constexpr uint group_stride = TILED ? MMA_TILE_COLS : 1;             // between a row's consecutive groups
  const uint group = qgemv_run_group<RUN_GROUPS>(j, group_shift) * group_stride;
  const uint super_shift = qgemv_super_shift<RUN_GROUPS>(group_shift);
  for (uint h = 0; h < 2 * C; ++h) {
    if (TILED) {
      const uint word = (j / QGEMV_MMA_STEP) * block_words + (j % QGEMV_MMA_STEP) * BITS;
      qgemv_load_words<BITS>(wq, w_off[h] + word, 0, w_vector, words + h * BITS);
    } else {
      qgemv_load_words<BITS>(wq, w_off[h], j, w_vector, words + h * BITS);
    }
    for (uint e = 0; e < RUN_GROUPS; ++e) {
      const uint i = g_off[h] + group + e * group_stride;
      // Group i's super-block: i >> super_shift of a row's groups; in the tile layout, where a group's 16 rows lie
      // side by side and so do a super-block's ([N/16, K/256, 16, 2]), the same of i's (tile, group) part.
      const uint sb = TILED ? ((i / MMA_TILE_COLS) >> super_shift) * MMA_TILE_COLS + i % MMA_TILE_COLS
                            : i >> super_shift;
      scale[h * RUN_GROUPS + e] = Reg(QuantGroups<S>::scale(scales, supers, i, sb));
      bias[h * RUN_GROUPS + e] = Reg(QuantGroups<S>::bias(biases, supers, i, sb));
    }
  }
}

// R: rows of x per tile, 8 or 16 (the plan's pick from M). C: output tiles per threadgroup (1 or 2), whose calls share
// each load of x; a split's calls for each tile are the same either way. TILED: wq, scales and biases in the tile
// layout (above), the same values in the same calls. RUN_GROUPS: 2 at group size 16, else 1 (metal/qgemv_run.h).
// EARLY: the first weights loaded before the wait for the kernel ahead (below), the same values in the same calls.
// Grid: (ceil(N / 16 C), ceil(rows / R), 1); threadgroup: k_splits simdgroups.
template <typename T, uint BITS, typename S, uint R, uint C, bool TILED, uint RUN_GROUPS, bool EARLY>
[[kernel]] void qgemv_mma(
    constant QGemvArgs& args [[buffer(QGEMV_SLOT_ARGS)]],
    device const T* x [[buffer(QGEMV_SLOT_X)]],
    device const uint* wq [[buffer(QGEMV_SLOT_WQ)]],
    device const S* scales [[buffer(QGEMV_SLOT_SCALES)]],
    device const S* biases [[buffer(QGEMV_SLOT_BIASES)]],
    device const T* bias [[buffer(QGEMV_SLOT_BIAS)]],
    device T* y [[buffer(QGEMV_SLOT_Y)]],
    device const float* supers [[buffer(QGEMV_SLOT_SUPERS)]],
    uint2 tile [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]]) {
  if (!EARLY) {
    // First, as a plain kernel's entry waits: placed anywhere later, it changed nvcc's registers for every instance
    // and made plain calls up to a third slower (docs/decisions.md, "qgemv: weights before the wait").
    wait_for_previous_kernels();
  }
  constexpr uint B = R / 8;  // groups of 8 rows of x per tile
  using Reg = typename QgemvMmaReg<T, S>::type;  // a group's scale and bias in registers
  threadgroup float4 partials[MMA_TILE_MAX_SPLITS][C * B][SIMD_WIDTH];  // mma_tile_keep's and mma_tile_store's

  const uint g = lane / 4;
  const uint t = lane % 4;
  const uint n0 = tile.x * C * MMA_TILE_COLS;
  const uint r0 = tile.y * R;
  const uint K = args.k;
  const uint runs = K / QGEMV_RUN;
  const uint group_shift = qgemv_group_shift(args.group_size);
  const bool x_vector = args.vector_loads != 0;
  const bool w_vector = args.w_vector_loads != 0;

  // Weight rows g and g + 8 of each output tile, clamped to N in the row layout (the tile layout holds whole tiles: a
  // tile past N repeats the last one, computed, never stored): their first word and first group (offsets fit 32 bits:
  // the op checks it).
  uint w_off[2 * C];
  uint g_off[2 * C];
  for (uint h = 0; h < 2 * C; ++h) {
    const uint row = g + 8 * (h % 2);  // in its tile
    if (TILED) {
      const uint steps_k = (runs + QGEMV_MMA_STEP - 1) / QGEMV_MMA_STEP;
      const uint tile_c = min(tile.x * C + h / 2, args.n / MMA_TILE_COLS - 1);
      w_off[h] = (tile_c * steps_k * MMA_TILE_COLS + row) * QGEMV_MMA_STEP * BITS;
      g_off[h] = tile_c * qgemv_run_group<RUN_GROUPS>(runs, group_shift) * MMA_TILE_COLS + row;
    } else {
      const uint n = min(n0 + MMA_TILE_COLS * (h / 2) + row, args.n - 1);
      w_off[h] = n * runs * BITS;
      g_off[h] = n * qgemv_run_group<RUN_GROUPS>(runs, group_shift);
    }
  }
  // The kernel ahead of this one may still be running (CUDA's programmatic dependent launch): x may not be read
  // before wait_for_previous_kernels() (metal/common.h). The EARLY kernels run where the caller promises that no
  // such kernel writes the weights (the op's constant_weights), so their first vector step loads its weights,
  // scales and biases and only then waits: they arrive while the kernel ahead finishes (an 8B llama's step 2-4%
  // faster with 16-bit or float32 scales; docs/decisions.md, "qgemv: weights before the wait"; ptxas moves some
  // loads after the wait, "qgemv: where ptxas puts the loads"). The others waited first. Every path waits once,
  // before its first load of x.
  bool waiting = EARLY && x_vector && w_vector;
  if (EARLY && !waiting) {
    wait_for_previous_kernels();
  }
  uint x_row[B];  // where row g of each group of 8 starts in x, clamped to the last row
  for (uint j = 0; j < B; ++j) {
    x_row[j] = min(r0 + 8 * j + g, args.rows - 1) * K;
  }
  float4 acc[C * B];  // [output tile c][group j]
  for (uint i = 0; i < C * B; ++i) {
    acc[i] = float4(0.0f);
  }

  // Where x and wq are 16-byte aligned, the steps whose four runs all lie inside K take 16-byte loads and no
  // branch: two at a time (all their weight loads issued first) in a tile of 8 rows, one at a time in a tile of 16,
  // whose second group of x operands would take two steps past 64 registers on CUDA and cost a quarter of its
  // threadgroups per core (8192 x 8192 at 16 rows: 47.5 us against 33). Then the rest (all of them otherwise), a
  // lane whose run lies past K bringing zeros. The same values reach the same calls either way. The two steps'
  // registers are named rather than indexed by a loop over them, which nvcc left rolled and put on the stack.
  const uint full_steps = runs / QGEMV_MMA_STEP;
  const uint steps = (runs + QGEMV_MMA_STEP - 1) / QGEMV_MMA_STEP;
  uint s = sg;
  if (x_vector && w_vector) {
    for (; B == 1 && C == 1 && s + args.k_splits < full_steps; s += 2 * args.k_splits) {
      const uint j0 = QGEMV_MMA_STEP * s + t;
      const uint j1 = j0 + QGEMV_MMA_STEP * args.k_splits;
      uint words0[2 * C * BITS];  // C is 1 here
      uint words1[2 * C * BITS];
      Reg scale0[2 * C * RUN_GROUPS];
      Reg scale1[2 * C * RUN_GROUPS];
      Reg bias0[2 * C * RUN_GROUPS];
      Reg bias1[2 * C * RUN_GROUPS];
      qgemv_mma_load<BITS, S, C, TILED, RUN_GROUPS, Reg>(wq, scales, biases, supers, w_off, g_off, j0, group_shift,
                                                         true, words0, scale0, bias0);
      qgemv_mma_load<BITS, S, C, TILED, RUN_GROUPS, Reg>(wq, scales, biases, supers, w_off, g_off, j1, group_shift,
                                                         true, words1, scale1, bias1);
      if (waiting) {  // EARLY: the first iteration waits after its loads
        wait_for_previous_kernels();
        waiting = false;
      }
      qgemv_mma_step<T, BITS, B, C, RUN_GROUPS>(acc, words0, scale0, bias0, x, x_row, j0 * QGEMV_RUN, true, true,
                                                lane);
      qgemv_mma_step<T, BITS, B, C, RUN_GROUPS>(acc, words1, scale1, bias1, x, x_row, j1 * QGEMV_RUN, true, true,
                                                lane);
    }
    for (; s < full_steps; s += args.k_splits) {
      const uint j = QGEMV_MMA_STEP * s + t;
      uint words[2 * C * BITS];
      Reg scale[2 * C * RUN_GROUPS];
      Reg bias_g[2 * C * RUN_GROUPS];
      qgemv_mma_load<BITS, S, C, TILED, RUN_GROUPS, Reg>(wq, scales, biases, supers, w_off, g_off, j, group_shift,
                                                         true, words, scale, bias_g);
      if (waiting) {  // likewise where this loop runs first
        wait_for_previous_kernels();
        waiting = false;
      }
      qgemv_mma_step<T, BITS, B, C, RUN_GROUPS>(acc, words, scale, bias_g, x, x_row, j * QGEMV_RUN, true, true,
                                                lane);
    }
  }
  if (waiting) {  // no whole step in this simdgroup: the partial-step loop alone
    wait_for_previous_kernels();
  }
  for (; s < steps; s += args.k_splits) {
    const uint j = QGEMV_MMA_STEP * s + t;
    const bool valid = j < runs;
    uint words[2 * C * BITS];
    Reg scale[2 * C * RUN_GROUPS];
    Reg bias_g[2 * C * RUN_GROUPS];
    // A run past K loads the last run's words (in bounds) and dequantises them with scale and bias 0: zeros.
    qgemv_mma_load<BITS, S, C, TILED, RUN_GROUPS, Reg>(wq, scales, biases, supers, w_off, g_off, min(j, runs - 1),
                                                       group_shift, w_vector, words, scale, bias_g);
    if (!valid) {
      for (uint h = 0; h < 2 * C * RUN_GROUPS; ++h) {
        scale[h] = Reg(0.0f);
        bias_g[h] = Reg(0.0f);
      }
    }
    qgemv_mma_step<T, BITS, B, C, RUN_GROUPS>(acc, words, scale, bias_g, x, x_row, min(j, runs - 1) * QGEMV_RUN,
                                              valid, x_vector, lane);
  }

  mma_tile_keep<C * B>(partials, acc, sg, lane);
  mma_tile_store<T, C, B>(partials, args.k_splits, args.has_bias != 0, bias, y, n0, args.n, r0, args.rows, lane, sg);
}

MTLINV_KERNEL_WAITS(qgemv_mma_b2_r8_f16, qgemv_mma, half, 2, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b2_r16_f16, qgemv_mma, half, 2, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b2_r8_bf16, qgemv_mma, bfloat, 2, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b2_r16_bf16, qgemv_mma, bfloat, 2, bfloat, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b3_r8_f16, qgemv_mma, half, 3, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b3_r16_f16, qgemv_mma, half, 3, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b3_r8_bf16, qgemv_mma, bfloat, 3, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b3_r16_bf16, qgemv_mma, bfloat, 3, bfloat, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16, qgemv_mma, half, 4, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16, qgemv_mma, half, 4, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16, qgemv_mma, bfloat, 4, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16, qgemv_mma, bfloat, 4, bfloat, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_f16, qgemv_mma, half, 5, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_f16, qgemv_mma, half, 5, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_bf16, qgemv_mma, bfloat, 5, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_bf16, qgemv_mma, bfloat, 5, bfloat, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_f16, qgemv_mma, half, 6, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_f16, qgemv_mma, half, 6, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_bf16, qgemv_mma, bfloat, 6, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_bf16, qgemv_mma, bfloat, 6, bfloat, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16, qgemv_mma, half, 8, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16, qgemv_mma, half, 8, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16, qgemv_mma, bfloat, 8, bfloat, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16, qgemv_mma, bfloat, 8, bfloat, 16, 1, false, 1, false)

// float32 scales and biases (GGUF imports, as for qgemv).
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_sf32, qgemv_mma, half, 4, float, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16_sf32, qgemv_mma, half, 4, float, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf32, qgemv_mma, bfloat, 4, float, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_sf32, qgemv_mma, bfloat, 4, float, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32, qgemv_mma, half, 8, float, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_sf32, qgemv_mma, half, 8, float, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32, qgemv_mma, bfloat, 8, float, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf32, qgemv_mma, bfloat, 8, float, 16, 1, false, 1, false)

// The tile layout (mtlinv.quant.tile), for the widths of MLX's and GGUF's common formats.
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_tiled, qgemv_mma, half, 4, half, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16_tiled, qgemv_mma, half, 4, half, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_tiled, qgemv_mma, bfloat, 4, bfloat, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_tiled, qgemv_mma, bfloat, 4, bfloat, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_tiled, qgemv_mma, half, 8, half, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_tiled, qgemv_mma, half, 8, half, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_tiled, qgemv_mma, bfloat, 8, bfloat, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_tiled, qgemv_mma, bfloat, 8, bfloat, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_c2_f16_tiled, qgemv_mma, half, 4, half, 16, 2, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_c2_bf16_tiled, qgemv_mma, bfloat, 4, bfloat, 16, 2, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_c2_f16_tiled, qgemv_mma, half, 8, half, 16, 2, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_c2_bf16_tiled, qgemv_mma, bfloat, 8, bfloat, 16, 2, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_sf32_tiled, qgemv_mma, half, 4, float, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16_sf32_tiled, qgemv_mma, half, 4, float, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf32_tiled, qgemv_mma, bfloat, 4, float, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_sf32_tiled, qgemv_mma, bfloat, 4, float, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32_tiled, qgemv_mma, half, 8, float, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_sf32_tiled, qgemv_mma, half, 8, float, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32_tiled, qgemv_mma, bfloat, 8, float, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf32_tiled, qgemv_mma, bfloat, 8, float, 16, 1, true, 1, false)

// Group size 16, at 8 bits (GGUF's Q6_K, as for qgemv), in both layouts.
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_g16, qgemv_mma, half, 8, half, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_g16, qgemv_mma, half, 8, half, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_g16, qgemv_mma, bfloat, 8, bfloat, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_g16, qgemv_mma, bfloat, 8, bfloat, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32_g16, qgemv_mma, half, 8, float, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_sf32_g16, qgemv_mma, half, 8, float, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32_g16, qgemv_mma, bfloat, 8, float, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf32_g16, qgemv_mma, bfloat, 8, float, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_g16_tiled, qgemv_mma, half, 8, half, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_g16_tiled, qgemv_mma, half, 8, half, 16, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_g16_tiled, qgemv_mma, bfloat, 8, bfloat, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_g16_tiled, qgemv_mma, bfloat, 8, bfloat, 16, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32_g16_tiled, qgemv_mma, half, 8, float, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_f16_sf32_g16_tiled, qgemv_mma, half, 8, float, 16, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32_g16_tiled, qgemv_mma, bfloat, 8, float, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf32_g16_tiled, qgemv_mma, bfloat, 8, float, 16, 1, true, 2, false)

// The super-block form (as for qgemv): Q4_K and Q5_K at group size 32, Q6_K at 6 bits and group size 16, in both
// layouts.
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_si8, qgemv_mma, half, 4, char, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16_si8, qgemv_mma, half, 4, char, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_si8, qgemv_mma, bfloat, 4, char, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_si8, qgemv_mma, bfloat, 4, char, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_f16_si8, qgemv_mma, half, 5, char, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_f16_si8, qgemv_mma, half, 5, char, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_bf16_si8, qgemv_mma, bfloat, 5, char, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_bf16_si8, qgemv_mma, bfloat, 5, char, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_f16_si8_g16, qgemv_mma, half, 6, char, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_f16_si8_g16, qgemv_mma, half, 6, char, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_bf16_si8_g16, qgemv_mma, bfloat, 6, char, 8, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_bf16_si8_g16, qgemv_mma, bfloat, 6, char, 16, 1, false, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_si8_tiled, qgemv_mma, half, 4, char, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_f16_si8_tiled, qgemv_mma, half, 4, char, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_si8_tiled, qgemv_mma, bfloat, 4, char, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_si8_tiled, qgemv_mma, bfloat, 4, char, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_f16_si8_tiled, qgemv_mma, half, 5, char, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_f16_si8_tiled, qgemv_mma, half, 5, char, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_bf16_si8_tiled, qgemv_mma, bfloat, 5, char, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_bf16_si8_tiled, qgemv_mma, bfloat, 5, char, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_f16_si8_g16_tiled, qgemv_mma, half, 6, char, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_f16_si8_g16_tiled, qgemv_mma, half, 6, char, 16, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_bf16_si8_g16_tiled, qgemv_mma, bfloat, 6, char, 8, 1, true, 2, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r16_bf16_si8_g16_tiled, qgemv_mma, bfloat, 6, char, 16, 1, true, 2, false)

// float16 scales and biases with bfloat16 x: GGUF's Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 at their blocks' own
// float16 fields (mtlinv.gguf_blocks), in both layouts (tiled at 4 and 8 bits).
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf16, qgemv_mma, bfloat, 4, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_sf16, qgemv_mma, bfloat, 4, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_bf16_sf16, qgemv_mma, bfloat, 5, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r16_bf16_sf16, qgemv_mma, bfloat, 5, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf16, qgemv_mma, bfloat, 8, half, 8, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf16, qgemv_mma, bfloat, 8, half, 16, 1, false, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf16_tiled, qgemv_mma, bfloat, 4, half, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r16_bf16_sf16_tiled, qgemv_mma, bfloat, 4, half, 16, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf16_tiled, qgemv_mma, bfloat, 8, half, 8, 1, true, 1, false)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r16_bf16_sf16_tiled, qgemv_mma, bfloat, 8, half, 16, 1, true, 1, false)

// The 8-row tiled kernels as a decoder's projections run them, their first weights loaded before the wait for the
// kernel ahead (EARLY; the op's constant_weights).
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_tiled_early, qgemv_mma, half, 4, half, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_tiled_early, qgemv_mma, bfloat, 4, bfloat, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_tiled_early, qgemv_mma, half, 8, half, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_tiled_early, qgemv_mma, bfloat, 8, bfloat, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_sf32_tiled_early, qgemv_mma, half, 4, float, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf32_tiled_early, qgemv_mma, bfloat, 4, float, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32_tiled_early, qgemv_mma, half, 8, float, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32_tiled_early, qgemv_mma, bfloat, 8, float, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_g16_tiled_early, qgemv_mma, half, 8, half, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_g16_tiled_early, qgemv_mma, bfloat, 8, bfloat, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_f16_sf32_g16_tiled_early, qgemv_mma, half, 8, float, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf32_g16_tiled_early, qgemv_mma, bfloat, 8, float, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_f16_si8_tiled_early, qgemv_mma, half, 4, char, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_si8_tiled_early, qgemv_mma, bfloat, 4, char, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_f16_si8_tiled_early, qgemv_mma, half, 5, char, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b5_r8_bf16_si8_tiled_early, qgemv_mma, bfloat, 5, char, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_f16_si8_g16_tiled_early, qgemv_mma, half, 6, char, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b6_r8_bf16_si8_g16_tiled_early, qgemv_mma, bfloat, 6, char, 8, 1, true, 2, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b4_r8_bf16_sf16_tiled_early, qgemv_mma, bfloat, 4, half, 8, 1, true, 1, true)
MTLINV_KERNEL_WAITS(qgemv_mma_b8_r8_bf16_sf16_tiled_early, qgemv_mma, bfloat, 8, half, 8, 1, true, 1, true)
