#include "qgemv.h"

#include <algorithm>
#include <string>

#include "../errors.h"
#include "../kernel_args.h"
#include "../limit.h"
#include "../../../metal/qgemv_args.h"

namespace mtlinv {

static_assert(sizeof(QGemvArgs) == 28, "QGemvArgs layout must match metal/qgemv_args.h on every target");

namespace {
constexpr uint32_t kStep = 32 * 8;      // K positions a simdgroup covers per step: 32 lanes x QGEMV_RUN
constexpr uint32_t kRowsPerTile = 8;    // QGEMV_ROWS in metal/qgemv.metal
constexpr uint32_t kCols = 4;           // QGEMV_COLS
constexpr uint32_t kGemmTile = 32;      // QGEMM_TILE
constexpr uint32_t kGemmThreads = 128;  // qgemm's staging and compute layout
constexpr uint32_t kMaxSplits = 8;      // partials[8] in qgemv

}  // namespace

bool qgemv_supported_bits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}

bool qgemv_supported_group_size(int group_size) {
  return group_size == 32 || group_size == 64 || group_size == 128;
}

uint32_t qgemv_k_splits(int64_t k, const DeviceCaps& caps) {
  // Steps of 256 K positions (32 lanes x QGEMV_RUN) each simdgroup should run at least. GPUs want many threads
  // in flight: 4, as gemv_nk (on an H200 through the CUDA target, K=4096 with 4 splits runs 1.2x faster at M=1
  // and 1.5x at M=8 than with 1). The emulator pays a fiber switch per lane and ladder step, so it wants few
  // simdgroups: 16 (half the time of 4 splits at K=4096).
  const int64_t min_steps = caps.few_threads ? 16 : 4;
  const int64_t steps = (k + kStep - 1) / kStep;
  return static_cast<uint32_t>(std::clamp<int64_t>(steps / min_steps, 1, kMaxSplits));
}

Plan plan_qgemv(const QGemvShape& s, int limit, const DeviceCaps& caps) {
  if (!qgemv_supported_bits(s.bits)) {
    throw InvalidArgument("qgemv: bits=", s.bits, " is not supported; use 2, 3, 4, 5, 6 or 8");
  }
  if (!qgemv_supported_group_size(s.group_size)) {
    throw InvalidArgument("qgemv: group_size=", s.group_size, " is not supported; use 32, 64 or 128");
  }
  if (s.k % s.group_size != 0) {
    throw InvalidArgument("qgemv: K=", s.k, " is not a multiple of group_size=", s.group_size);
  }
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

  PlanLaunch launch;
  std::string suffix = "_b" + std::to_string(s.bits) + "_" + dtype_suffix(s.dtype);
  if (s.scale_dtype != s.dtype) {
    // Only float32 scales with 16-bit activations at 4 and 8 bits are built (what GGUF imports produce).
    if (s.scale_dtype != DType::f32 || (s.bits != 4 && s.bits != 8)) {
      throw DTypeError("qgemv: scales are ", dtype_name(s.scale_dtype), " with ", dtype_name(s.dtype), " x and bits=",
                       s.bits, "; scales must have x's dtype, or be float32 with bits 4 or 8");
    }
    suffix += "_sf32";
  }
  if (plan.canonical) {
    args.k_splits = qgemv_k_splits(s.k, caps);
    launch.kernel = "qgemv" + suffix;
    launch.threadgroups = {ceil_div(s.n, kCols), ceil_div(s.rows, kRowsPerTile), 1};
    launch.threads = {32 * args.k_splits, 1, 1};
  } else {
    args.k_splits = 1;
    launch.kernel = "qgemm" + suffix;
    launch.threadgroups = {ceil_div(s.n, kGemmTile), ceil_div(s.rows, kGemmTile), 1};
    launch.threads = {kGemmThreads, 1, 1};
  }
  launch.args = args_bytes(args);
  launch.buffers = {PlanBuffer::op(0), PlanBuffer::op(1), PlanBuffer::op(2), PlanBuffer::op(3), PlanBuffer::op(4),
                    PlanBuffer::op(5)};
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
