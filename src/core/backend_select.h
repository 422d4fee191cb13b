// How MTLINV_DEVICE=auto chooses a backend (src/core/backend_select.cpp), declared apart from backend.h so that
// tests can run the choice with backends that refuse, which no Linux machine has.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace mtlinv {

struct BackendCandidate {
  std::string name;                                // "metal", "cuda"
  std::function<std::unique_ptr<Backend>()> make;  // throws DeviceError when its device is missing or refused
};

// The first of `preferred` that makes a backend, else the emulator. When a candidate refused, `fallback` says why
// (its DeviceError's message; several joined by "; ") and a warning naming the backend taken instead goes to
// stderr; else `fallback` is cleared. Errors other than DeviceError propagate.
std::unique_ptr<Backend> choose_auto_backend(const std::vector<BackendCandidate>& preferred, std::string& fallback);

}  // namespace mtlinv
