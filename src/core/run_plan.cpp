#include "run_plan.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "checks_only.h"
#include "errors.h"
#include "grid_pieces.h"

namespace mtlinv {

namespace {

std::atomic<uint64_t> plans_run{0}, kernels_launched{0};

void dispatch_all(Backend& backend, const Plan& plan, const std::vector<const Tensor*>& operands,
                  const std::vector<StoragePtr>& scratch) {
  for (const PlanLaunch& launch : plan.launches) {
    Dispatch d = launch;  // the dispatch, with the buffers' roles left behind
    d.bindings.resize(std::max<size_t>(1, launch.buffers.size()));  // a slot the kernel does not take stays empty
    for (size_t i = 1; i < launch.buffers.size(); ++i) {
      const PlanBuffer& b = launch.buffers[i];
      Binding& binding = d.bindings[i];
      if (b.kind == PlanBuffer::none) continue;
      if (b.kind == PlanBuffer::scratch) {
        binding.storage = scratch.at(b.index).get();
        binding.size = plan.scratch_bytes.at(b.index);
      } else {
        const Tensor* t = operands.at(b.index);
        if (t == nullptr) throw InvalidArgument("internal: plan for ", launch.kernel, " binds a missing operand");
        if (!t->storage) throw InvalidArgument(launch.kernel, ": operand ", b.index, " is a tensor with no memory");
        binding.storage = t->storage.get();
        binding.offset = t->offset;
        binding.size = t->nbytes();
      }
    }
    const bool empty = launch.threadgroups.x == 0 || launch.threadgroups.y == 0 || launch.threadgroups.z == 0;
    dispatch_in_pieces(backend, std::move(d));
    if (!empty) kernels_launched.fetch_add(1, std::memory_order_relaxed);  // an empty grid launches nothing
  }
}

}  // namespace

void run_plan(const Plan& plan, const std::vector<const Tensor*>& operands) {
  stop_if_checks_only();
  Backend& backend = active_backend();
  std::vector<StoragePtr> scratch;
  scratch.reserve(plan.scratch_bytes.size());
  for (size_t bytes : plan.scratch_bytes) scratch.push_back(backend.allocate(bytes ? bytes : 1));

  try {
    dispatch_all(backend, plan, operands, scratch);
  } catch (...) {
    // Wait for whatever was already queued before reporting: the caller may free the operands right after.
    try {
      backend.synchronize();
    } catch (...) {
    }
    throw;
  }
  backend.op_dispatched();
  plans_run.fetch_add(1, std::memory_order_relaxed);
}

RunCounts run_counts() {
  return {plans_run.load(std::memory_order_relaxed), kernels_launched.load(std::memory_order_relaxed)};
}

}  // namespace mtlinv
