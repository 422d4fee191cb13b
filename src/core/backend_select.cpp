// Chooses the process-wide backend from MTLINV_DEVICE on first use.
#include "backend_select.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "../emu/backend_emu.h"
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

// What MTLINV_DEVICE=auto tries before the emulator, best first.
std::vector<BackendCandidate> auto_candidates() {
  std::vector<BackendCandidate> candidates;
#ifdef MTLINV_WITH_METAL
  candidates.push_back({"metal", make_metal_backend});
#endif
#ifdef MTLINV_WITH_CUDA
  candidates.push_back({"cuda", [] {
                          if (!cuda_device_available()) {
                            throw DeviceError("CUDA: no device (the driver is missing, or sees none)");
                          }
                          return make_cuda_backend();
                        }});
#endif
  return candidates;
}

std::unique_ptr<Backend> make_backend(const std::string& requested, std::string& fallback) {
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
  if (requested == "auto") return choose_auto_backend(auto_candidates(), fallback);
  throw DeviceError("MTLINV_DEVICE='", requested, "' is not one of auto, emu, metal, cuda");
}

// MTLINV_EMU_DEFER=1: the emulator queues its kernels until the host waits, as a GPU does (deferred_backend.h).
bool defer_emulator() {
  const char* env = std::getenv("MTLINV_EMU_DEFER");
  if (!env || !*env || std::strcmp(env, "0") == 0) return false;
  if (std::strcmp(env, "1") == 0) return true;
  throw DeviceError("MTLINV_EMU_DEFER='", env, "' is not 0 or 1");
}

struct Active {
  std::unique_ptr<Backend> backend;
  std::string fallback;  // backend_fallback()
};

Active& active() {
  static std::once_flag once;
  static Active active;
  std::call_once(once, [] {
    const char* env = std::getenv("MTLINV_DEVICE");
    std::string fallback;
    std::unique_ptr<Backend> backend = make_backend(env && *env ? env : "auto", fallback);
    if (backend->caps().backend == "emu" && defer_emulator()) backend = defer_dispatches(std::move(backend));
    active.backend = std::move(backend);
    active.fallback = std::move(fallback);
  });
  return active;
}

}  // namespace

std::unique_ptr<Backend> choose_auto_backend(const std::vector<BackendCandidate>& preferred, std::string& fallback) {
  fallback.clear();
  std::unique_ptr<Backend> chosen;
  for (const BackendCandidate& candidate : preferred) {
    try {
      chosen = candidate.make();
      break;
    } catch (const DeviceError& refusal) {
      fallback += (fallback.empty() ? "" : "; ") + std::string(refusal.what());
    }
  }
  if (!chosen) chosen = make_emu_backend();
  if (!fallback.empty()) {
    std::fprintf(stderr, "mtlinv: warning: MTLINV_DEVICE=auto: %s; running on the %s backend (%s) instead; set "
                 "MTLINV_DEVICE to choose a backend without this warning\n", fallback.c_str(),
                 chosen->caps().backend.c_str(), chosen->caps().name.c_str());
  }
  return chosen;
}

Backend& active_backend() { return *active().backend; }

const std::string& backend_fallback() { return active().fallback; }

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
