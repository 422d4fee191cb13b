#pragma once
#include "../../../metal/qgemv_args.h"
#include "../dtype.h"
#include "../plan.h"

namespace mtlinv {

// One qgemv call after validation: `rows` x K activations by quantized weights [N, K] (MLX's affine format).
struct QGemvShape {
  int64_t rows = 1;       // M: rows of x, all leading dimensions flattened
  int64_t k = 0;          // a multiple of group_size and of QGEMV_RUN
  int64_t n = 0;
  int group_size = 64;
  int bits = 4;
  DType dtype = DType::f32;  // of x, bias and y
  // Of scales and biases: dtype; float32 with 4/8-bit 16-bit activations; float16 with 4/5/8-bit bfloat16 ones; or
  // int8, the super-block form's codes.
  DType scale_dtype = DType::f32;
  bool has_bias = false;
  bool aligned = false;   // x 16-byte aligned: full-vector loads allowed
  bool w_aligned = false; // wq 16-byte aligned: the canonical kernel may load 4- and 8-bit weights 16 bytes at once
  bool tiled = false;     // wq, scales and biases in qgemv_mma's tile layout (mtlinv.quant.tile), N a multiple of 16
  // No kernel that may still be running when this call's kernel starts writes the weights (the op's promise, taken
  // from its caller): in the tile layout at up to 8 rows the plan picks qgemv_mma's EARLY instance, which loads its
  // first weights before it waits for that kernel (metal/qgemv_mma.metal).
  bool constant_weights = false;
};

// qgemv_mma's output tile (16 weight rows) and step (128 K positions): also the blocks of the tile layout.
constexpr int64_t kQgemvMmaRows = MMA_TILE_COLS;
constexpr int64_t kQgemvMmaStepK = QGEMV_MMA_STEP * QGEMV_RUN;

// The bit widths and group sizes the kernels are built for: MLX's affine widths and groups (32, 64, 128), and group
// 16 at kQgemvGroup16Bits only (GGUF's Q6_K, imported exactly: mtlinv.gguf_kquants), whose runs of 32 values span
// two groups and have kernels of their own (RUN_GROUPS 2, metal/qgemv_run.h).
constexpr int kQgemvGroup16Bits = 8;
bool qgemv_supported_bits(int bits);
bool qgemv_supported_group_size(int group_size);
bool qgemv_supported_format(int bits, int group_size);  // both, and the pair built
// The super-block form (int8 scale and bias codes, float32 factors per kQgemvSuperK values; metal/quant.h,
// QuantGroups<char>): GGUF's K-quants at their own bytes, built for Q4_K (bits 4) and Q5_K (bits 5) at group size 32
// and Q6_K (bits 6) at group size 16, in both layouts.
constexpr int64_t kQgemvSuperK = QGEMV_SUPER;
// float16 scales beside bfloat16 x (GGUF's Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 at their blocks' float16 fields): built
// at bits 4, 5 and 8 and group sizes 32 and up, the tile layout at 4 and 8.
bool qgemv_half_scale_bits(int bits);
bool qgemv_super_format(int bits, int group_size);
void check_qgemv_super_format(int bits, int group_size);
// Refuses (naming op) a K that is not a multiple of QGEMV_RUN: every kernel reads whole runs, so at group size 16
// a K of 48 would leave the last 16 values out. After the check that K is a multiple of group_size.
void require_whole_runs(const char* op, int64_t k);

// Operands: 0 x, 1 wq, 2 scales, 3 biases, 4 bias (or any valid buffer when absent), 5 y, 6 supers (the super-block
// form's factors, or any valid buffer).
// M <= limit (and M == 1 always) -> the canonical kernel: for 16-bit x on a device with matrix units,
// qgemv_mma_b{bits}_r{8,16}_{dtype}[_sf32|_sf16|_si8][_g16] (tiles of 8 rows, 16 above M = 8); otherwise
// qgemv_b{bits}_r{R}_{dtype}[_sf32|_sf16|_si8][_g16] with the tile height R from M (row_tiled.h). Above the limit,
// up to 32 rows run the same kernels with another K split count where that changes the order, and other rows the
// tiled qgemm_b{bits}_{dtype}[_sf32|_sf16|_si8]. Weights in the tile layout take
// qgemv_mma_b{bits}_r{8,16}[_c2]_{dtype}[_sf32|_sf16|_si8][_g16]_tiled at every M (the split count of the canonical or
// the throughput path; _c2: two output tiles a threadgroup, qgemv.cpp): the row layout's bits, read in whole blocks;
// they need 16-bit x, matrix units, bits 4 or 8 (or a super-block format, int8 codes) and N a multiple of 16.
// Expects a shape check_qgemv_operands accepted (the op validates once, at the boundary; K a multiple of the group
// size).
Plan plan_qgemv(const QGemvShape& s, int limit, const DeviceCaps& caps);
// The op's check of what no kernel serves: InvalidArgument for an unsupported bits or group size (check_qgemv_format)
// or tiled weights where no tiled kernel runs, DTypeError for a scale dtype without a kernel. Also for a call with
// nothing to compute, so that whether a call is refused does not depend on M or N.
void check_qgemv_operands(const QGemvShape& s, const DeviceCaps& caps);
void check_qgemv_format(int bits, int group_size);

// The number of simdgroups that split one output tile's K range, from K, N and the device (never M).
uint32_t qgemv_k_splits(int64_t k, int64_t n, const DeviceCaps& caps);
uint32_t qgemv_mma_k_splits(int64_t k, int64_t n, const DeviceCaps& caps);  // the same for qgemv_mma

}  // namespace mtlinv
