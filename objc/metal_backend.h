// The Metal backend behind a plain C++ header: no Objective-C type crosses it, so the portable core
// (src/core/backend_select.cpp) includes it as ordinary C++. Built on macOS only, with MTLINV_WITH_METAL.
#pragma once
#include <memory>

#include "../src/core/backend.h"

namespace mtlinv {

// The system's default Metal device as a Backend. Throws DeviceError when there is no device, or when it cannot
// run mtlinv's kernels: they need MSL 3.1 with bfloat (macOS 14+ on an Apple7 (M1) or newer / Metal 3 GPU).
std::unique_ptr<Backend> make_metal_backend();

// True when make_metal_backend() would find a device that meets those requirements.
bool metal_device_available();

}  // namespace mtlinv
