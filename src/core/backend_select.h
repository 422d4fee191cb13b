// The backends of this build, and how MTLINV_DEVICE=auto chooses one (src/core/backend_select.cpp), declared apart
// from backend.h so that tests can run the choice with backends that refuse, which no Linux machine has.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace mtlinv {

// Each backend registers itself from its own source with a static BackendRegistrar, so that the core names none:
// a build has the backends whose sources it compiles. MTLINV_DEVICE=auto tries those of auto_rank >= 0, lowest
// first, and falls back to the one of rank kFallback (the emulator, in every build).
struct BackendRegistrar {
  static constexpr int kFallback = -1;
  // `make` throws DeviceError when its device is missing or refused.
  BackendRegistrar(const char* name, int auto_rank, std::unique_ptr<Backend> (*make)());
};

struct BackendCandidate {
  std::string name;                                // "metal", "cuda"
  std::function<std::unique_ptr<Backend>()> make;  // throws DeviceError when its device is missing or refused
};

// The first of `preferred` that makes a backend, else the emulator. When a candidate refused, `fallback` says why
// (its DeviceError's message; several joined by "; ") and a warning naming the backend taken instead goes to
// stderr; else `fallback` is cleared. Errors other than DeviceError propagate.
std::unique_ptr<Backend> choose_auto_backend(const std::vector<BackendCandidate>& preferred, std::string& fallback);

}  // namespace mtlinv
