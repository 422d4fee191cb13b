// The Metal backend behind a plain C++ header: no Objective-C type crosses it. Built on macOS only; it registers
// itself with the core as "metal" (src/core/backend_select.h).
#pragma once
#include <memory>

#include "../src/core/backend.h"

namespace mtlinv {

// The system's default Metal device as a Backend. Throws DeviceError, before any kernel is compiled, when there is
// no device or it cannot run mtlinv's kernels: they need macOS 14 (MSL 3.1, for bfloat) and Apple silicon (an
// Apple7-family GPU or newer), whose 32-lane SIMD-groups they assume; the message names the GPU and its family.
std::unique_ptr<Backend> make_metal_backend();

}  // namespace mtlinv
