// Hooks for tests and `mtlinv check`: run a kernel by name with raw arguments.
#pragma once
#include <string>
#include <vector>

#include "backend.h"
#include "tensor.h"

namespace mtlinv {

// Dispatches `kernel` once on the active backend: [[buffer(0)]] = args, [[buffer(i + 1)]] = buffers[i]; returns as
// an op does (Backend::op_dispatched).
void launch_raw(const std::string& kernel, Dim3 threadgroups, Dim3 threads, const std::string& args,
                const std::vector<Tensor>& buffers);

}  // namespace mtlinv
