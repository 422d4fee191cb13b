// Chooses the process-wide backend from MTLINV_DEVICE on first use.
#include "backend_select.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "deferred_backend.h"
#include "env.h"
#include "errors.h"

namespace mtlinv {

namespace {

struct Registered {
  std::string name;
  int auto_rank;
  std::unique_ptr<Backend> (*make)();
};

// A function-local static: backends register from static initialisers of other translation units.
std::vector<Registered>& registry() {
  static std::vector<Registered> r;
  return r;
}

const Registered& fallback_backend() {
  for (const Registered& r : registry()) {
    if (r.auto_rank == BackendRegistrar::kFallback) return r;
  }
  throw DeviceError("internal: no fallback backend is registered");
}

// What MTLINV_DEVICE=auto tries before the fallback, best first.
std::vector<BackendCandidate> auto_candidates() {
  std::vector<Registered> ranked;
  for (const Registered& r : registry()) {
    if (r.auto_rank >= 0) ranked.push_back(r);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Registered& a, const Registered& b) { return a.auto_rank < b.auto_rank; });
  std::vector<BackendCandidate> candidates;
  for (const Registered& r : ranked) candidates.push_back({r.name, r.make});
  return candidates;
}

std::string built_list() {
  std::string list;
  for (const std::string& name : built_backends()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

std::unique_ptr<Backend> make_backend(const std::string& requested, std::string& fallback) {
  if (requested == "auto") return choose_auto_backend(auto_candidates(), fallback);
  for (const Registered& r : registry()) {
    if (r.name == requested) return r.make();
  }
  throw DeviceError("MTLINV_DEVICE='", requested, "': this build has no such backend (built: ", built_list(),
                    "; Metal is built on macOS, CUDA with MTLINV_CUDA=1 where nvcc exists); use MTLINV_DEVICE=auto ",
                    "or one of those built");
}

// MTLINV_EMU_DEFER=1: the emulator queues its kernels until the host waits, as a GPU does (deferred_backend.h).
bool defer_emulator() { return env_switch("MTLINV_EMU_DEFER", false); }

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
  if (!chosen) chosen = fallback_backend().make();
  if (!fallback.empty()) {
    std::fprintf(stderr, "mtlinv: warning: MTLINV_DEVICE=auto: %s; running on the %s backend (%s) instead; set "
                 "MTLINV_DEVICE to choose a backend without this warning\n", fallback.c_str(),
                 chosen->caps().backend.c_str(), chosen->caps().name.c_str());
  }
  return chosen;
}

// The calling thread's BackendScope, innermost; null outside every scope.
static thread_local Backend* scoped_backend = nullptr;

Backend& active_backend() { return scoped_backend ? *scoped_backend : *active().backend; }

BackendScope::BackendScope(Backend& backend) : saved_(scoped_backend) { scoped_backend = &backend; }

BackendScope::~BackendScope() { scoped_backend = saved_; }

const std::string& backend_fallback() { return active().fallback; }

BackendRegistrar::BackendRegistrar(const char* name, int auto_rank, std::unique_ptr<Backend> (*make)()) {
  registry().push_back({name, auto_rank, make});
}

std::vector<std::string> built_backends() {
  std::vector<Registered> ordered = registry();  // the fallback first, then as auto tries them
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Registered& a, const Registered& b) { return a.auto_rank < b.auto_rank; });
  std::vector<std::string> names;
  for (const Registered& r : ordered) names.push_back(r.name);
  return names;
}

}  // namespace mtlinv
