#include "testing.h"

#include <utility>

#include "backend_select.h"
#include "errors.h"
#include "grid_pieces.h"

namespace mtlinv {

void launch_raw(const std::string& kernel, Dim3 threadgroups, Dim3 threads, const std::string& args,
                const std::vector<Tensor>& buffers) {
  Backend& backend = active_backend();
  const std::optional<KernelId> id = find_kernel_id(kernel);
  if (!id || !backend.has_kernel(*id)) throw InvalidArgument("launch: no kernel named '", kernel, "'");
  Dispatch d;
  d.kernel = *id;
  d.threadgroups = threadgroups;
  d.threads_per_threadgroup = threads;
  d.bindings.resize(1 + buffers.size());
  d.bindings[0].bytes.assign(args.begin(), args.end());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (!buffers[i].storage) continue;
    d.bindings[i + 1].storage = buffers[i].storage.get();
    d.bindings[i + 1].offset = buffers[i].offset;
    d.bindings[i + 1].size = buffers[i].nbytes();
  }
  dispatch_in_pieces(backend, std::move(d));
  backend.op_dispatched();
}

namespace {
const EmulatorSwitches*& registered_switches() {
  static const EmulatorSwitches* switches = nullptr;
  return switches;
}
}  // namespace

void register_emulator_switches(const EmulatorSwitches& switches) { registered_switches() = &switches; }

const EmulatorSwitches& emulator_switches() {
  if (registered_switches() == nullptr) throw DeviceError("this build has no emulator");
  return *registered_switches();
}

std::pair<std::string, std::string> choose_auto_backend_refused_by(const std::vector<std::string>& refusals) {
  std::vector<BackendCandidate> candidates;
  for (size_t i = 0; i < refusals.size(); ++i) {
    const std::string refusal = refusals[i];
    candidates.push_back({concat("refusing", i), [refusal]() -> std::unique_ptr<Backend> {
                            throw DeviceError(refusal);
                          }});
  }
  std::string fallback;
  const std::unique_ptr<Backend> chosen = choose_auto_backend(candidates, fallback);
  return {chosen->caps().backend, fallback};
}

}  // namespace mtlinv
