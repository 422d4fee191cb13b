// The CUDA backend: device memory (cudaMalloc), kernels compiled by nvcc from the same MSL sources (src/cuda/shim,
// tools/msl2cpp.py --target cuda), launched by kernel id on the first visible device (pick another with
// CUDA_VISIBLE_DEVICES). Built when MTLINV_CUDA=1 and nvcc is found (tools/build_cuda.py); it registers itself with
// the core as "cuda" (src/core/backend_select.h).
#pragma once
#include <memory>

#include "../core/backend.h"

namespace mtlinv {

std::unique_ptr<Backend> make_cuda_backend();
// True when the CUDA driver answers and sees at least one device; never throws.
bool cuda_device_available();

}  // namespace mtlinv
