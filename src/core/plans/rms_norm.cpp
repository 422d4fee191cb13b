#include "rms_norm.h"

#include <algorithm>

#include "../kernel_args.h"
#include "../kernels.h"

namespace mtlinv {

namespace {

// Threads per row: a function of cols and the device only, which keeps every row's reduction order independent
// of `rows`. GPUs get whole simdgroups. For add_rms_norm (twice a decoder layer) fewer threads are faster as long
// as they hold the whole row, RMS_NORM_HELD columns each (metal/args.h), down to 128: on an H100 a launch at 4096
// columns takes 3.05 us with 512 threads, 3.83 with 1024, and 5.56 with 256, which must loop over the rest; at 576
// columns 2.45 us with 128, 2.52 with 256 (`benchmarks/tuning/tune_rms_norm_cuda.py`, docs/decisions.md, "rms_norm
// and add_rms_norm"). Rows of up to 512 columns keep their count: 4 columns a thread, at least one simdgroup (a
// head of qk_rms_norm: 32 threads at D = 128). On the emulator every thread is a fiber, so one simdgroup per row
// does the same work with far fewer switches.
uint32_t threads_per_row(int64_t cols, const DeviceCaps& caps) {
  if (caps.few_threads) return caps.simd_width;
  const uint32_t limit = std::min<uint32_t>(1024, caps.max_threads_per_threadgroup);
  const int64_t held = (cols + RMS_NORM_HELD - 1) / RMS_NORM_HELD;
  const int64_t wanted = std::clamp<int64_t>(std::max<int64_t>(held, std::min<int64_t>((cols + 3) / 4, 128)),
                                             caps.simd_width, limit);
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
