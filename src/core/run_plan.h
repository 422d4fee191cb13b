// Executes a Plan on the active backend: binds operands and scratch buffers, dispatches, and then lets the backend
// wait or leave the kernels queued (Backend::op_dispatched; inside a launch batch, see launch_batch.h).
#pragma once
#include <cstdint>
#include <vector>

#include "plan.h"
#include "tensor.h"

namespace mtlinv {

void run_plan(const Plan& plan, const std::vector<const Tensor*>& operands);

// Plans run and kernels launched (a grid cut into pieces counts once) since the process started, by every thread:
// what a forward pass issues (tests hold the decoder to its count of ops; benchmarks divide host time by it).
struct RunCounts {
  uint64_t plans = 0;
  uint64_t launches = 0;
};
RunCounts run_counts();

}  // namespace mtlinv
