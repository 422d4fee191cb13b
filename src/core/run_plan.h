// Executes a Plan on the active backend: binds operands and scratch buffers, dispatches, waits.
#pragma once
#include <vector>

#include "plan.h"
#include "tensor.h"

namespace mtlinv {

void run_plan(const Plan& plan, const std::vector<const Tensor*>& operands);

}  // namespace mtlinv
