// Chooses the process-wide backend from MTLINV_DEVICE on first use.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "../emu/backend_emu.h"
#include "backend.h"
#include "deferred_backend.h"
#include "errors.h"
#ifdef MTLINV_WITH_METAL
#include "../../objc/metal_backend.h"
#endif
#ifdef MTLINV_WITH_CUDA
#include "../cuda/backend_cuda.h"
#endif

namespace mtlinv {

namespace {

std::unique_ptr<Backend> make_backend(const std::string& requested) {
  if (requested == "emu") return make_emu_backend();
  if (requested == "metal") {
#ifdef MTLINV_WITH_METAL
    return make_metal_backend();
#else
    throw DeviceError("MTLINV_DEVICE=metal: this build has no Metal backend (it is built on macOS only); built: ",
                      "emu", "; use MTLINV_DEVICE=auto or emu");
#endif
  }
  if (requested == "cuda") {
#ifdef MTLINV_WITH_CUDA
    return make_cuda_backend();
#else
    throw DeviceError("MTLINV_DEVICE=cuda: this build has no CUDA backend (build with MTLINV_CUDA=1 where nvcc ",
                      "exists); use MTLINV_DEVICE=auto or emu");
#endif
  }
  if (requested == "auto") {
#ifdef MTLINV_WITH_METAL
    if (metal_device_available()) return make_metal_backend();
    std::fprintf(stderr, "mtlinv: warning: built with Metal but no usable Metal device (Apple7+ GPU, macOS 14+) "
                         "was found; MTLINV_DEVICE=auto falls back to the CPU emulator\n");
#endif
#ifdef MTLINV_WITH_CUDA
    if (cuda_device_available()) return make_cuda_backend();
#endif
    return make_emu_backend();
  }
  throw DeviceError("MTLINV_DEVICE='", requested, "' is not one of auto, emu, metal, cuda");
}

// MTLINV_EMU_DEFER=1: the emulator queues its kernels until the host waits, as a GPU does (deferred_backend.h).
bool defer_emulator() {
  const char* env = std::getenv("MTLINV_EMU_DEFER");
  if (!env || !*env || std::strcmp(env, "0") == 0) return false;
  if (std::strcmp(env, "1") == 0) return true;
  throw DeviceError("MTLINV_EMU_DEFER='", env, "' is not 0 or 1");
}

}  // namespace

Backend& active_backend() {
  static std::once_flag once;
  static std::unique_ptr<Backend> backend;
  std::call_once(once, [] {
    const char* env = std::getenv("MTLINV_DEVICE");
    std::unique_ptr<Backend> made = make_backend(env && *env ? env : "auto");
    if (made->caps().backend == "emu" && defer_emulator()) made = defer_dispatches(std::move(made));
    backend = std::move(made);
  });
  return *backend;
}

std::vector<std::string> built_backends() {
  std::vector<std::string> names{"emu"};
#ifdef MTLINV_WITH_METAL
  names.push_back("metal");
#endif
#ifdef MTLINV_WITH_CUDA
  names.push_back("cuda");
#endif
  return names;
}

}  // namespace mtlinv
