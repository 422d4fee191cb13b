#pragma once
#include <memory>

#include "../core/backend.h"

namespace mtlinv {

// The CPU emulator backend: host memory, kernels from the emulator's registry, synchronous dispatch. Registered
// with the core as "emu", MTLINV_DEVICE=auto's fallback, with its switches for tests (src/core/testing.h).
std::unique_ptr<Backend> make_emu_backend();

}  // namespace mtlinv
