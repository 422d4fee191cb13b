#pragma once
#include <memory>

#include "../core/backend.h"

namespace mtlinv {

// The CPU emulator backend: host memory, kernels from the emulator's registry, synchronous dispatch.
std::unique_ptr<Backend> make_emu_backend();

}  // namespace mtlinv
