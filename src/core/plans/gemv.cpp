#include "gemv.h"

#include <algorithm>

#include "../kernel_args.h"
#include "../limit.h"

namespace mtlinv {

namespace {
constexpr uint32_t kRowsPerTile = 8;    // GEMV_ROWS in metal/gemv.metal
constexpr uint32_t kNkCols = 4;         // GEMV_NK_COLS
constexpr uint32_t kKnCols = 32 * 4;    // SIMD_WIDTH * VEC of gemv_kn
constexpr uint32_t kGemmTile = 32;      // GEMM_TILE in metal/gemm.metal
constexpr uint32_t kMaxSplits = 8;      // partials[8] in gemv_nk

}  // namespace

uint32_t gemv_k_splits(int64_t k, DType dtype, bool w_kn, const DeviceCaps& caps) {
  // The emulator pays for every simdgroup in fiber switches (the ladder, the barrier): one simdgroup per output
  // tile keeps its work per switch high. GPUs need the splits to keep enough loads in flight.
  if (caps.few_threads) return 1;
  if (w_kn) {
    // Consecutive K ranges of at least 256 per simdgroup.
    return static_cast<uint32_t>(std::clamp<int64_t>(k / 256, 1, kMaxSplits));
  }
  // Each simdgroup should run at least four 16-byte steps per lane.
  const int64_t vec = 16 / static_cast<int64_t>(dtype_size(dtype));
  const int64_t blocks = (k + 32 * vec - 1) / (32 * vec);
  return static_cast<uint32_t>(std::clamp<int64_t>(blocks / 4, 1, kMaxSplits));
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
  const uint32_t batch = static_cast<uint32_t>(s.batch);
  if (plan.canonical) {
    args.k_splits = gemv_k_splits(s.k, s.dtype, s.w_kn, caps);
    launch.kernel = std::string(s.w_kn ? "gemv_kn_" : "gemv_nk_") + dtype_suffix(s.dtype);
    const uint32_t cols = s.w_kn ? kKnCols : kNkCols;
    launch.threadgroups = {ceil_div(s.n, cols), ceil_div(s.rows, kRowsPerTile), batch};
    launch.threads = {32 * args.k_splits, 1, 1};
  } else {
    args.k_splits = 1;
    launch.kernel = std::string("gemm_tiled_") + dtype_suffix(s.dtype);
    launch.threadgroups = {ceil_div(s.n, kGemmTile), ceil_div(s.rows, kGemmTile), batch};
    launch.threads = {256, 1, 1};
  }
  launch.args = args_bytes(args);
  launch.buffers = {PlanBuffer::op(0), PlanBuffer::op(1), PlanBuffer::op(2), PlanBuffer::op(3)};
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
