#include "qgemv.h"

#include <algorithm>
#include <string>

#include "../errors.h"
#include "../kernel_args.h"
#include "../kernels.h"
#include "../limit.h"
#include "row_tiled.h"

namespace mtlinv {

static_assert(sizeof(QGemvArgs) == 32, "QGemvArgs layout must match metal/qgemv_args.h on every target");

// The kernels' geometry (QGEMV_*, QGEMM_*, MMA_TILE_*) is metal/qgemv_args.h's; these are the plan's own choices.
namespace {
constexpr int64_t kWarpsPerCore = 32;   // simdgroups per compute unit the canonical kernel aims for
constexpr int64_t kTiledQgemvMaxRows = 32;  // above the limit, up to this many rows take the row-tiled qgemv
constexpr int64_t kMmaWarpsPerCore = 32;  // simdgroups per compute unit qgemv_mma aims for

}  // namespace

bool qgemv_supported_bits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}

bool qgemv_supported_group_size(int group_size) {
  return group_size == 16 || group_size == 32 || group_size == 64 || group_size == 128;
}

bool qgemv_supported_format(int bits, int group_size) {
  return qgemv_supported_bits(bits) && qgemv_supported_group_size(group_size) &&
         (group_size != 16 || bits == kQgemvGroup16Bits);
}

bool qgemv_half_scale_bits(int bits) { return bits == 4 || bits == 5 || bits == 8; }

bool qgemv_super_format(int bits, int group_size) {
  return (group_size == 32 && (bits == 4 || bits == 5)) || (group_size == 16 && bits == 6);
}

void check_qgemv_super_format(int bits, int group_size) {
  if (!qgemv_super_format(bits, group_size)) {
    throw InvalidArgument("qgemv: bits=", bits, " and group_size=", group_size, " are not built for int8 scale codes "
                          "(the super-block form of GGUF's K-quants); use bits 4 or 5 at group_size 32, or bits 6 at "
                          "group_size 16");
  }
}

uint32_t qgemv_k_splits(int64_t k, int64_t n, const DeviceCaps& caps) {
  const int64_t runs = k / QGEMV_RUN;
  if (caps.few_threads) {
    // The emulator pays a fiber switch per lane and ladder step, so it wants few simdgroups, each with at least
    // 4 steps (128 runs: 4096 K positions) of work.
    return static_cast<uint32_t>(std::clamp<int64_t>(runs / (4 * 32), 1, QGEMV_MAX_SPLITS));
  }
  // GPUs: about kWarpsPerCore simdgroups per compute unit over the ceil(N / 4) output tiles, in powers of two (as
  // gemv_k_splits), while each lane keeps at least two runs (one pair of runs in flight). On an H200 (132 SMs)
  // that is 2 splits at K = 4096 and at 8192 x 8192, 4 at K = 14336, N = 4096.
  const int64_t most = std::clamp<int64_t>(runs / (2 * 32), 1, QGEMV_MAX_SPLITS);
  const int64_t wanted = ceil_div(kWarpsPerCore * caps.compute_units, ceil_div(n, QGEMV_COLS));
  return power_of_two_splits(wanted, most);
}

uint32_t qgemv_mma_k_splits(int64_t k, int64_t n, const DeviceCaps& caps) {
  // As gemv_mma_form's one-tile count: about kMmaWarpsPerCore simdgroups per compute unit over the ceil(N / 16)
  // output tiles, in powers of two, as many as K has steps (rounded up to a power of two) and at most 16. On an
  // H200 that is 16 splits at N = 4096 and K = 4096, 8 at N = 8192, 4 at N = 14336. A small grid takes one step per
  // split, so that the kernel waits on memory once: at SmolLM2-135M's K = 576 (5 steps) 8 splits call in 6.2 us
  // where 2 (a pair of steps, then one) took 7.9, at K = 1536 (12 steps) 16 take 6.1 us where 4 took 6.9
  // (docs/decisions.md, "qgemv: split counts"). Where K has 32 steps or more (K >= 4096) this is the count of a
  // split keeping two steps in flight.
  const int64_t steps = ceil_div(k, kQgemvMmaStepK);
  int64_t most = 1;
  while (most < steps && most < MMA_TILE_MAX_SPLITS) most *= 2;
  const int64_t wanted = ceil_div(kMmaWarpsPerCore * caps.compute_units, ceil_div(n, MMA_TILE_COLS));
  return power_of_two_splits(wanted, most);
}

void check_qgemv_format(int bits, int group_size) {
  if (!qgemv_supported_bits(bits)) {
    throw InvalidArgument("qgemv: bits=", bits, " is not supported; use 2, 3, 4, 5, 6 or 8");
  }
  if (!qgemv_supported_group_size(group_size)) {
    throw InvalidArgument("qgemv: group_size=", group_size, " is not supported; use 16 (bits=", kQgemvGroup16Bits,
                          " only), 32, 64 or 128");
  }
  if (!qgemv_supported_format(bits, group_size)) {
    throw InvalidArgument("qgemv: group_size=16 is built for bits=", kQgemvGroup16Bits, " only, got bits=", bits,
                          "; use group_size 32, 64 or 128 at this width");
  }
}

namespace {

// The kernels' RUN_GROUPS (metal/qgemv_run.h): the groups a run of 32 values spans.
int run_groups(int group_size) { return group_size < static_cast<int>(QGEMV_RUN) ? 2 : 1; }

// Output tiles per qgemv_mma threadgroup: two share each load of x in the 16-row tile of 4- and 8-bit weights in the
// tile layout with scales of x's type, where the grid still gives every compute unit a threadgroup. One H100, 4-bit:
// 16 rows 16-20% faster at 4096 x 14336 and 8192 x 8192, up to 4% slower at 4096 x 4096, whose 128 threadgroups
// would leave cores idle (docs/decisions.md, "qgemv: two output tiles at 16 rows"). The bits are the same either way.
uint32_t qgemv_mma_output_tiles(const QGemvShape& s, uint32_t rows, const DeviceCaps& caps) {
  const bool built = s.tiled && rows == 16 && (s.bits == 4 || s.bits == 8) && s.scale_dtype == s.dtype &&
                     run_groups(s.group_size) == 1;
  return built && ceil_div(s.n, 2 * MMA_TILE_COLS) >= static_cast<int64_t>(caps.compute_units) ? 2 : 1;
}

}  // namespace

void require_whole_runs(const char* op, int64_t k) {
  if (k % QGEMV_RUN != 0) {
    throw InvalidArgument(op, ": K=", k, " is not a multiple of ", QGEMV_RUN,
                          ", the values the kernels read at a time");
  }
}

void check_qgemv_operands(const QGemvShape& s, const DeviceCaps& caps) {
  const bool super_form = s.scale_dtype == DType::i8;
  if (super_form) {
    check_qgemv_super_format(s.bits, s.group_size);
  } else {
    check_qgemv_format(s.bits, s.group_size);
  }
  // Besides x's own scales, the kernels are built for what GGUF imports give: float32 scales with 16-bit x at 4 and 8
  // bits, float16 ones (the blocks' own fields) with bfloat16 x at 4, 5 and 8 bits, and the super-block form's codes.
  const bool f32_scales = s.scale_dtype == DType::f32 && (s.bits == 4 || s.bits == 8);
  const bool f16_scales = s.scale_dtype == DType::f16 && s.dtype == DType::bf16 && qgemv_half_scale_bits(s.bits) &&
                          s.group_size != 16;
  if (!super_form && s.scale_dtype != s.dtype && !f32_scales && !f16_scales) {
    throw DTypeError("qgemv: scales are ", dtype_name(s.scale_dtype), " with ", dtype_name(s.dtype), " x and bits=",
                     s.bits, " at group_size=", s.group_size, "; scales must have x's dtype, be float32 with bits 4 "
                     "or 8, be float16 with bfloat16 x and bits 4, 5 or 8 (group_size 32 and up), or be int8 codes "
                     "with supers");
  }
  // Every super-block format has its tiled kernels (checked above); the affine ones at bits 4 and 8.
  const bool tiled_bits = super_form || s.bits == 4 || s.bits == 8;
  if (s.tiled && (!caps.matrix_units || s.dtype == DType::f32 || !tiled_bits || s.n % MMA_TILE_COLS != 0)) {
    throw InvalidArgument("qgemv: weights in the tile layout need 16-bit x on a device with matrix units, bits ",
                          super_form ? "4, 5 or 6 (int8 scale codes)" : "4 or 8", " and N a multiple of 16; got x ",
                          dtype_name(s.dtype), ", bits=", s.bits, ", N=", s.n,
                          caps.matrix_units ? "" : " on a device without matrix units", " (use the row layout there)");
  }
}

Plan plan_qgemv(const QGemvShape& s, int limit, const DeviceCaps& caps) {
  Plan plan;
  plan.canonical = use_canonical(s.rows, limit);

  QGemvArgs args{};
  args.rows = static_cast<uint32_t>(s.rows);
  args.k = static_cast<uint32_t>(s.k);
  args.n = static_cast<uint32_t>(s.n);
  args.group_size = static_cast<uint32_t>(s.group_size);
  args.has_bias = s.has_bias ? 1 : 0;
  // x's rows (K elements, K a multiple of 32) keep the 16-byte alignment of its base for the vector loads.
  args.vector_loads = s.aligned ? 1 : 0;
  // wq's rows (K * bits / 8 bytes, a multiple of 16 at 4 and 8 bits) keep the alignment of its base. The kernel
  // gives the same bits either way (only the width of its loads changes), so this may depend on the buffer.
  args.w_vector_loads = s.w_aligned ? 1 : 0;

  PlanLaunch launch;
  bool planned = false;  // a GEMV took the call; else qgemm
  const bool mma_kernels = caps.matrix_units && s.dtype != DType::f32;
  if (mma_kernels) {
    // 16-bit x on a device with matrix units: qgemv_mma, for canonical calls and, with the other split count, up
    // to kTiledQgemvMaxRows rows above the limit where the two counts deal the steps differently: they do unless
    // both are at least the step count (each step a split of its own, the splits past it adding zeros). Weights in
    // the tile layout take it at every M, since only its _tiled instances read that layout (more than 16 rows:
    // several row tiles, each reading the weights).
    const uint32_t splits = qgemv_mma_k_splits(s.k, s.n, caps);
    const uint32_t other_splits = throughput_k_splits(splits);
    const bool mma_throughput =
        s.tiled || (s.rows <= kTiledQgemvMaxRows &&
                    static_cast<int64_t>(std::min(splits, other_splits)) < ceil_div(s.k, kQgemvMmaStepK));
    if (plan.canonical || mma_throughput) {
      args.k_splits = plan.canonical ? splits : other_splits;
      const uint32_t rows = s.rows <= 8 ? 8 : 16;  // one read of the weights for up to 16 rows
      // Constant weights in the tile layout, 8-row tile (a decoder's step and verification up to 8 rows): the
      // instance that loads its first weights before it waits for the kernel ahead. Same bits.
      const bool early = s.constant_weights && s.tiled && rows == 8;
      const uint32_t tiles = qgemv_mma_output_tiles(s, rows, caps);
      launch.kernel = kernel_id(KernelFamily::qgemv_mma, s.dtype, s.bits, s.scale_dtype, rows, tiles, s.tiled,
                                run_groups(s.group_size), early);
      launch.threadgroups = {ceil_div(s.n, MMA_TILE_COLS * tiles), ceil_div(s.rows, rows), 1};
      launch.threads_per_threadgroup = {32 * args.k_splits, 1, 1};
      planned = true;
    }
  } else {
    const uint32_t splits = qgemv_k_splits(s.k, s.n, caps);
    const uint32_t throughput_splits = throughput_k_splits(splits);
    // Above the limit, up to kTiledQgemvMaxRows rows run the row-tiled qgemv (several times faster than qgemm
    // there) with throughput_splits, when that gives another reduction order.
    const bool tiled_throughput = s.rows <= kTiledQgemvMaxRows &&
                                  split_counts_differ_in_order(s.k / QGEMV_RUN, splits, throughput_splits);
    if (plan.canonical || tiled_throughput) {
      args.k_splits = plan.canonical ? splits : throughput_splits;
      // The emulator runs one row in the 2-row tile: its build of the 1-row instance is more than twice as slow
      // (28 against 12.5 ms at K = N = 4096; docs/decisions.md, "qgemv: scalar kernel"). A row's bits are the
      // same in any tile.
      const uint32_t rows =
          caps.few_threads ? std::max<uint32_t>(2, row_tile_height(s.rows)) : row_tile_height(s.rows);
      launch.kernel = kernel_id(KernelFamily::qgemv, s.dtype, s.bits, s.scale_dtype, rows, run_groups(s.group_size));
      launch.threadgroups = {ceil_div(s.n, QGEMV_COLS), ceil_div(s.rows, rows), 1};
      launch.threads_per_threadgroup = {32 * args.k_splits, 1, 1};
      planned = true;
    }
  }
  if (!planned) {
    args.k_splits = 1;
    launch.kernel = kernel_id(KernelFamily::qgemm, s.dtype, s.bits, s.scale_dtype);
    launch.threadgroups = {ceil_div(s.n, QGEMM_TILE), ceil_div(s.rows, QGEMM_TILE), 1};
    launch.threads_per_threadgroup = {QGEMM_THREADS, 1, 1};
  }
  launch.set_args(args);
  // The op's operands: x, wq, scales, biases, bias (y where there is none: bound, never read), y and supers
  // (wq where there are none: bound, never read).
  launch.bind_operands({QGEMV_SLOT_X, QGEMV_SLOT_WQ, QGEMV_SLOT_SCALES, QGEMV_SLOT_BIASES, QGEMV_SLOT_BIAS,
                        QGEMV_SLOT_Y, QGEMV_SLOT_SUPERS});
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
