#include "gemv.h"

#include <algorithm>

#include "../errors.h"
#include "../kernel_args.h"
#include "../kernels.h"
#include "../limit.h"
#include "row_tiled.h"

namespace mtlinv {

// The kernels' geometry (GEMV_*, GEMM_*, MMA_TILE_*) is metal/gemv_args.h's; these are the plan's own choices.
namespace {
constexpr int64_t kNkWarpsPerCore = 32; // simdgroups per compute unit gemv_nk aims for (its loads in flight)
constexpr int64_t kTiledGemvMaxRows = 32;  // above the limit, up to this many rows take the row-tiled GEMV
constexpr int64_t kMmaWarpsPerCore = 32;  // simdgroups per compute unit gemv_nk_mma aims for

// gemv_nk_mma serves 16-bit W stored [N, K] where the device has matrix units.
bool use_mma(const GemvShape& s, const DeviceCaps& caps) {
  return caps.matrix_units && !s.w_kn && s.dtype != DType::f32;
}

}  // namespace

GemvMmaForm gemv_mma_form(int64_t k, int64_t n, const DeviceCaps& caps) {
  // About kMmaWarpsPerCore simdgroups per compute unit over the output tiles, in powers of two, while each split
  // keeps a whole group of blocks in flight. With tiles of 16 outputs per threadgroup that is 16 splits at N = 4096,
  // 4 at N = 14336 and 8 at N = 8192 on an H200. Where two output tiles per threadgroup reach the same simdgroups
  // per compute unit with twice the splits (N = 14336 and 8192 there, not 4096, whose 16 splits are the most), the
  // tile of 8 rows takes them: one row 4-6% faster (docs/decisions.md, "gemv: split counts and forms"). The tile of 16
  // rows ran slower with more simdgroups, so it keeps the one-tile count and sums two splits per simdgroup.
  const int64_t most = std::clamp<int64_t>(ceil_div(k, GEMV_MMA_BLOCK) / GEMV_MMA_IN_FLIGHT, 1, MMA_TILE_MAX_SPLITS);
  const auto splits_for = [&](int64_t outputs_per_threadgroup) {
    const int64_t wanted = ceil_div(kMmaWarpsPerCore * caps.compute_units, ceil_div(n, outputs_per_threadgroup));
    return power_of_two_splits(wanted, most);
  };
  const uint32_t one_tile = splits_for(MMA_TILE_COLS);
  const uint32_t two_tiles = splits_for(2 * MMA_TILE_COLS);
  if (two_tiles == 2 * one_tile) return {two_tiles, true};
  return {one_tile, false};
}

uint32_t gemv_k_splits(int64_t k, int64_t n, DType dtype, bool w_kn, const DeviceCaps& caps) {
  // The emulator pays for every simdgroup in fiber switches (the ladder, the barrier): one simdgroup per output
  // tile keeps its work per switch high. GPUs need enough simdgroups to keep the memory system busy.
  if (caps.few_threads) return 1;
  if (w_kn) {
    // Consecutive K ranges of at least 256 per simdgroup.
    return static_cast<uint32_t>(std::clamp<int64_t>(k / 256, 1, GEMV_MAX_SPLITS));
  }
  // About kNkWarpsPerCore simdgroups per compute unit over the ceil(N / 4) output tiles, in powers of two, while
  // each lane keeps at least two 16-byte steps per weight row (one unrolled group). On an H200 (132 SMs) that is
  // 4 splits at N = 4096 and 2 at N = 8192 and 14336: within 5% of the best count at M = 1 and 8 alike
  // (benchmarks/tuning/tune_gemv_cuda.py; docs/decisions.md, "gemv: scalar kernel").
  const int64_t vec = 16 / static_cast<int64_t>(dtype_size(dtype));
  const int64_t most = std::clamp<int64_t>(ceil_div(k, 32 * vec) / 2, 1, GEMV_MAX_SPLITS);
  const int64_t wanted = ceil_div(kNkWarpsPerCore * caps.compute_units, ceil_div(n, GEMV_NK_COLS));
  return power_of_two_splits(wanted, most);
}

void check_gemv_operands(const GemvShape& s, const DeviceCaps& caps) {
  if (s.tiled && (!use_mma(s, caps) || s.w_batched || s.n % MMA_TILE_COLS != 0)) {
    throw InvalidArgument("gemv: w in the tile layout needs 16-bit x on a device with matrix units, one w for every "
                          "batch entry and N a multiple of 16; got x ", dtype_name(s.dtype), ", N=", s.n,
                          s.w_batched ? ", a batched w" : "",
                          caps.matrix_units ? "" : " on a device without matrix units", " (use w [N, K] there)");
  }
}

Plan plan_gemv(const GemvShape& s, int limit, const DeviceCaps& caps) {
  Plan plan;
  plan.canonical = use_canonical(s.rows, limit);

  GemvArgs args{};
  args.rows = static_cast<uint32_t>(s.rows);
  args.k = static_cast<uint32_t>(s.k);
  args.n = static_cast<uint32_t>(s.n);
  args.x_batch_stride = s.x_batched ? static_cast<uint32_t>(s.rows * s.k) : 0;
  args.w_batch_stride = s.w_batched ? static_cast<uint32_t>(s.k * s.n) : 0;
  args.y_batch_stride = static_cast<uint32_t>(s.rows * s.n);
  args.has_bias = s.has_bias ? 1 : 0;
  args.w_kn = s.w_kn ? 1 : 0;
  const int64_t row_bytes = (s.w_kn ? s.n : s.k) * static_cast<int64_t>(dtype_size(s.dtype));
  args.vector_loads = s.aligned && row_bytes % 16 == 0 && (s.k * static_cast<int64_t>(dtype_size(s.dtype))) % 16 == 0;

  PlanLaunch launch;
  bool planned = false;  // a GEMV took the call; else the tiled GEMM
  const uint32_t batch = static_cast<uint32_t>(s.batch);
  // Above the limit, up to kTiledGemvMaxRows rows run the canonical kernel with another split count (it beats the
  // tiled GEMM by far there) when that gives another reduction order; the tiled GEMM runs the rest.
  if (use_mma(s, caps)) {
    const GemvMmaForm form = gemv_mma_form(s.k, s.n, caps);
    const uint32_t splits = form.k_splits;
    const uint32_t other_splits = throughput_k_splits(splits);
    // Every split of both counts must hold a K block. W in the tile layout takes gemv_nk_mma at every M, since
    // only its _tiled instances read that layout (more than 16 rows: several row tiles, each reading W).
    const int64_t most_splits = std::max(splits, other_splits);
    const bool mma_throughput =
        s.tiled || (s.rows <= kTiledGemvMaxRows && ceil_div(s.k, GEMV_MMA_BLOCK) >= most_splits);
    if (plan.canonical || mma_throughput) {
      args.k_splits = plan.canonical ? splits : other_splits;
      // Tiles of 8 rows, or 16 (one read of W for up to 16 rows) above 8; the canonical call in the form's shape
      // (above the limit, one output tile and one split per simdgroup).
      const uint32_t rows = s.rows <= 8 ? 8 : 16;
      const bool wide = plan.canonical && form.wide;
      const uint32_t tiles_per_threadgroup = wide && rows == 8 ? 2 : 1;
      const uint32_t splits_per_simdgroup = wide && rows == 16 ? 2 : 1;
      launch.kernel = kernel_id(KernelFamily::gemv_nk_mma, s.dtype, rows, tiles_per_threadgroup,
                                splits_per_simdgroup, s.tiled);
      launch.threadgroups = {ceil_div(s.n, MMA_TILE_COLS * tiles_per_threadgroup), ceil_div(s.rows, rows), batch};
      launch.threads_per_threadgroup = {32 * args.k_splits / splits_per_simdgroup, 1, 1};
      planned = true;
    }
  } else {
    const uint32_t splits = gemv_k_splits(s.k, s.n, s.dtype, s.w_kn, caps);
    const uint32_t other_splits = throughput_k_splits(splits);
    // Always another order for gemv_kn, whose splits are K ranges.
    const int64_t groups = ceil_div(s.k, 16 / static_cast<int64_t>(dtype_size(s.dtype)));
    const bool tiled_throughput = s.rows <= kTiledGemvMaxRows &&
                                  (s.w_kn || split_counts_differ_in_order(groups, splits, other_splits));
    if (plan.canonical || tiled_throughput) {
      args.k_splits = plan.canonical ? splits : other_splits;
      const uint32_t rows = row_tile_height(s.rows);
      launch.kernel = kernel_id(s.w_kn ? KernelFamily::gemv_kn : KernelFamily::gemv_nk, s.dtype, rows);
      // gemv_kn: 32 lanes of one 16-byte group of outputs each.
      const uint32_t lane_cols = GEMV_KN_LANE_BYTES / static_cast<uint32_t>(dtype_size(s.dtype));
      const uint32_t cols = s.w_kn ? 32 * lane_cols : GEMV_NK_COLS;
      launch.threadgroups = {ceil_div(s.n, cols), ceil_div(s.rows, rows), batch};
      launch.threads_per_threadgroup = {32 * args.k_splits, 1, 1};
      planned = true;
    }
  }
  if (!planned) {
    args.k_splits = 1;
    launch.kernel = kernel_id(KernelFamily::gemm_tiled, s.dtype);
    launch.threadgroups = {ceil_div(s.n, GEMM_TILE), ceil_div(s.rows, GEMM_TILE), batch};
    launch.threads_per_threadgroup = {GEMM_THREADS, 1, 1};
  }
  launch.set_args(args);
  // The op's operands: x, w, bias (y where there is none: bound, never read) and y.
  launch.bind_operands({GEMV_SLOT_X, GEMV_SLOT_W, GEMV_SLOT_BIAS, GEMV_SLOT_Y});
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
