// Hooks for tests and `mtlinv check`: run a kernel by name with raw arguments.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "tensor.h"

namespace mtlinv {

// Dispatches `kernel` once on the active backend: [[buffer(0)]] = args, [[buffer(i + 1)]] = buffers[i]; returns as
// an op does (Backend::op_dispatched).
void launch_raw(const std::string& kernel, Dim3 threadgroups, Dim3 threads, const std::string& args,
                const std::vector<Tensor>& buffers);

// MTLINV_DEVICE=auto's choice (backend_select.h) among preferred backends that each refuse with one of `refusals`
// (a DeviceError's message), as a Mac's GPU or a machine without CUDA devices refuses: {the backend it takes, its
// fallback reason}. The backend it makes is dropped; the active one is not touched.
std::pair<std::string, std::string> choose_auto_backend_refused_by(const std::vector<std::string>& refusals);

}  // namespace mtlinv
