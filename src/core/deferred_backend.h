// MTLINV_EMU_DEFER=1 (read by src/core/backend_select.cpp): the emulator runs kernels when a GPU would have
// finished them, not as they are dispatched, so that the suite can check host access (backend.h) without a GPU.
// An op's kernels are queued and run only when the host waits: synchronize, upload, download, Tensor::host_data,
// or the release of a Storage that wraps host memory. Host code that reads results without waiting then sees
// memory no kernel has written yet, and an operand array changed or freed after the op returned changes its
// result: bugs that otherwise only an asynchronous GPU (Metal, CUDA) shows. A kernel's error surfaces at the wait,
// as on a GPU. For tests only: the emulator's own hooks (set_emu_gpu_plans) do not reach through it.
#pragma once
#include <memory>

#include "backend.h"

namespace mtlinv {

std::unique_ptr<Backend> defer_dispatches(std::unique_ptr<Backend> inner);

}  // namespace mtlinv
