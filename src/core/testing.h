// Hooks for tests and `mtlinv check`: run a kernel by name with raw arguments, the emulator's switches, and
// MTLINV_DEVICE=auto's choice with refusing backends. Python reaches the emulator through these alone.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "tensor.h"

namespace mtlinv {

// Dispatches `kernel` once on the active backend: [[buffer(0)]] = args, [[buffer(i + 1)]] = buffers[i] (left empty
// where buffers[i] has no storage: a slot of the kernel's family it does not take); returns as an op does
// (Backend::op_dispatched).
void launch_raw(const std::string& kernel, Dim3 threadgroups, Dim3 threads, const std::string& args,
                const std::vector<Tensor>& buffers);

// MTLINV_DEVICE=auto's choice (backend_select.h) among preferred backends that each refuse with one of `refusals`
// (a DeviceError's message), as a Mac's GPU or a machine without CUDA devices refuses: {the backend it takes, its
// fallback reason}. The backend it makes is dropped; the active one is not touched.
std::pair<std::string, std::string> choose_auto_backend_refused_by(const std::vector<std::string>& refusals);

// The emulator's switches (src/emu/backend_emu.cpp registers them, so that the core names no backend's sources).
struct EmulatorSwitches {
  // Plan as for a GPU, with matrix units or without; throws DeviceError unless the emulator is active.
  void (*set_gpu_plans)(bool on, bool matrix_units);
  void (*set_check_mode)(bool on, uint64_t seed);
  bool (*check_mode)();
  void (*set_flush_subnormals)(bool on);
  bool (*flush_subnormals)();
};
void register_emulator_switches(const EmulatorSwitches& switches);
// The registered switches; DeviceError in a build without the emulator.
const EmulatorSwitches& emulator_switches();

}  // namespace mtlinv
