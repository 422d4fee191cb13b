#pragma once
#include <memory>

#include "../core/backend.h"

namespace mtlinv {

// The CPU emulator backend: host memory, kernels from the emulator's registry, synchronous dispatch.
std::unique_ptr<Backend> make_emu_backend();

// Tests: plan for the emulator as for a GPU (DeviceCaps::few_threads = false) or as usual (true). Throws
// DeviceError when the active backend is not the emulator.
void set_emu_gpu_plans(bool on);

}  // namespace mtlinv
