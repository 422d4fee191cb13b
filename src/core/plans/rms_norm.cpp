#include "rms_norm.h"

#include <algorithm>

#include "../kernel_args.h"

namespace mtlinv {

Plan plan_rms_norm(int64_t rows, int64_t cols, DType dtype, float eps, const DeviceCaps& caps) {
  // Enough threads that each handles a few columns, in whole simdgroups, capped by the device. Depends on cols
  // (and the device) only, which is what keeps every row's reduction order independent of `rows`.
  uint32_t threads = static_cast<uint32_t>(std::min<int64_t>((cols + 3) / 4, caps.max_threads_per_threadgroup));
  threads = std::max<uint32_t>(caps.simd_width, (threads + caps.simd_width - 1) / caps.simd_width * caps.simd_width);
  threads = std::min(threads, std::min<uint32_t>(1024, caps.max_threads_per_threadgroup));

  PlanLaunch launch;
  launch.kernel = std::string("rms_norm_") + dtype_suffix(dtype);
  launch.threadgroups = {static_cast<uint32_t>(rows), 1, 1};
  launch.threads = {threads, 1, 1};
  launch.args = args_bytes(RmsNormArgs{static_cast<uint32_t>(rows), static_cast<uint32_t>(cols), eps});
  launch.buffers = {PlanBuffer::op(0), PlanBuffer::op(1), PlanBuffer::op(2)};
  Plan plan;
  plan.launches.push_back(std::move(launch));
  return plan;
}

}  // namespace mtlinv
