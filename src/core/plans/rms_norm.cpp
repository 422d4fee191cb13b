#include "rms_norm.h"

#include <algorithm>

#include "../kernel_args.h"
#include "../kernels.h"

namespace mtlinv {

namespace {

// Threads per row: a function of cols and the device only, which keeps every row's reduction order independent
// of `rows`. GPUs get enough whole simdgroups that each thread handles a few columns; on the emulator every
// thread is a fiber, so one simdgroup per row does the same work with far fewer switches.
uint32_t threads_per_row(int64_t cols, const DeviceCaps& caps) {
  if (caps.few_threads) return caps.simd_width;
  const uint32_t limit = std::min<uint32_t>(1024, caps.max_threads_per_threadgroup);
  const int64_t wanted = std::clamp<int64_t>((cols + 3) / 4, caps.simd_width, limit);
  return static_cast<uint32_t>((wanted + caps.simd_width - 1) / caps.simd_width * caps.simd_width);
}

}  // namespace

Plan plan_rms_norm(int64_t rows, int64_t cols, DType dtype, float eps, const DeviceCaps& caps, bool residual) {
  PlanLaunch launch;
  launch.kernel = kernel_id(residual ? KernelFamily::add_rms_norm : KernelFamily::rms_norm, dtype);
  launch.threadgroups = {static_cast<uint32_t>(rows), 1, 1};
  launch.threads_per_threadgroup = {threads_per_row(cols, caps), 1, 1};
  launch.set_args(RmsNormArgs{static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), eps, 0, 0});
  // The op's operands: rms_norm's x, w, y; add_rms_norm's x, r, w, s, y.
  if (residual) {
    launch.bind_operands(
        {RMS_NORM_SLOT_X, RMS_NORM_SLOT_RESIDUAL, RMS_NORM_SLOT_W, RMS_NORM_SLOT_SUM, RMS_NORM_SLOT_Y});
  } else {
    launch.bind_operands({RMS_NORM_SLOT_X, RMS_NORM_SLOT_W, RMS_NORM_SLOT_Y});
  }
  Plan plan;
  plan.launches.push_back(std::move(launch));
  return plan;
}

Plan plan_qk_rms_norm(int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim, DType dtype, float eps,
                      const DeviceCaps& caps) {
  const int64_t head_rows = rows * (q_heads + 2 * kv_heads);
  PlanLaunch launch;
  launch.kernel = kernel_id(KernelFamily::qk_rms_norm, dtype);
  launch.threadgroups = {static_cast<uint32_t>(head_rows), 1, 1};
  launch.threads_per_threadgroup = {threads_per_row(head_dim, caps), 1, 1};
  launch.set_args(RmsNormArgs{static_cast<uint32_t>(head_rows), static_cast<uint32_t>(head_dim), eps,
                              static_cast<uint32_t>(q_heads), static_cast<uint32_t>(kv_heads)});
  launch.bind_operands({RMS_NORM_SLOT_X, RMS_NORM_SLOT_W, RMS_NORM_SLOT_W_K, RMS_NORM_SLOT_Y});
  Plan plan;
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
