#include "backend_emu.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "../core/backend_select.h"
#include "../core/env.h"
#include "../core/errors.h"
#include "../core/grid_pieces.h"
#include "../core/testing.h"
#include "runtime.h"

namespace mtlinv {

namespace {

// 64-byte aligned so 16-byte vector loads and cache lines line up as they would on a GPU.
struct HostStorage : Storage {
  bool owned = false;
  ~HostStorage() override {
    if (owned) std::free(host);
  }
};

// The emulator's modes from the environment (docs/devices.md): checking and its fiber order's seed, flush to zero, the
// worker count (0: one a CPU thread, the default). Once a process, before the first backend or switch use, so that a
// mode set later through the switches (tests, _native._set_emu_ftz) is not reset when a backend is made (the core
// makes throwaway ones to test MTLINV_DEVICE=auto). A bad value throws at every use until fixed: std::call_once runs
// again after a throw.
void apply_environment_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const uint64_t seed = env_count("MTLINV_EMU_SEED", UINT64_MAX, "the largest seed, 2^64 - 1").value_or(0);
    const bool check = env_switch("MTLINV_EMU_CHECK", false);
    const bool flush = env_switch("MTLINV_EMU_FTZ", false);
    const uint64_t workers = env_count("MTLINV_EMU_THREADS", 1024, "the largest worker count, 1024").value_or(0);
    emu::set_check_mode(check, seed);
    emu::set_flush_subnormals(flush);
    emu::set_num_workers(static_cast<int>(workers));
  });
}

class EmuBackend final : public Backend {
  static constexpr uint32_t kGpuPlanCores = 128;

 public:
  EmuBackend() {
    apply_environment_once();
    caps_.backend = "emu";
    caps_.compute_units = static_cast<uint32_t>(emu::num_workers());
    caps_.name = concat("CPU emulator (", caps_.compute_units, " worker threads)");
    caps_.simd_width = emu::kSimdWidth;
    caps_.max_threads_per_threadgroup = emu::kMaxThreadsPerThreadgroup;
    caps_.threadgroup_memory_bytes = 32768;  // what Apple GPUs offer; plans stay within it on every target
    caps_.few_threads = true;
    kernels_ = kernels_by_id<const emu::KernelEntry*>(emu::kernel_names(), emu::find_kernel);
  }

  // GPU plans: as for a GPU of kGpuPlanCores cores, whatever this machine's thread count, so the plans take the
  // code paths (K splits, block counts) that they take on a GPU; with matrix units (CUDA) or without (Metal).
  void set_gpu_plans(bool on, bool matrix_units) {
    caps_.few_threads = !on;
    caps_.matrix_units = on && matrix_units;
    caps_.compute_units = on ? kGpuPlanCores : static_cast<uint32_t>(emu::num_workers());
  }

  const DeviceCaps& caps() const override { return caps_; }

  StoragePtr allocate(size_t bytes) override {
    auto s = std::make_shared<HostStorage>();
    // posix_memalign, not std::aligned_alloc: macOS's libc declares the latter only from macOS 10.15 on, and a
    // universal2 Python builds its x86-64 half for older releases.
    const size_t rounded = (bytes + 63) / 64 * 64;
    if (posix_memalign(&s->host, 64, rounded ? rounded : 64) != 0) {
      s->host = nullptr;
      throw OutOfMemory("emulator: cannot allocate ", bytes, " bytes");
    }
    s->owned = true;
    s->device = s->host;
    s->bytes = bytes;
    return s;
  }

  StoragePtr wrap_host(void* host, size_t bytes) override {
    auto s = std::make_shared<HostStorage>();
    s->host = s->device = host;
    s->bytes = bytes;
    return s;
  }

  void upload(Storage& dst, size_t offset, const void* src, size_t bytes) override {
    std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
  }
  void download(const Storage& src, size_t offset, void* dst, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
  }

  bool has_kernel(KernelId id) const override { return entry(id) != nullptr; }

  void dispatch(const Dispatch& d) override {
    const emu::KernelEntry* entry = this->entry(d.kernel);
    if (entry == nullptr) throw KernelError("emulator: no kernel named '", d.kernel, "' is registered");
    const bool checked = emu::check_mode() || !entry->fast;
    if (checked && !entry->checked) {  // setup.py's MTLINV_SANITIZE, CMake's MTLINV_CHECKED_KERNELS=OFF
      throw KernelError("emulator: checking mode needs the bounds-checked kernels, which this build leaves out ('",
                        d.kernel, "'); run it with a build that has them (setup.py without MTLINV_SANITIZE, CMake "
                        "with MTLINV_CHECKED_KERNELS=ON)");
    }
    const emu::KernelFn fn = checked ? entry->checked : entry->fast;

    std::vector<void*> buffers(d.bindings.size());
    std::vector<size_t> sizes(d.bindings.size());
    for (size_t i = 0; i < d.bindings.size(); ++i) {
      const Binding& b = d.bindings[i];
      if (b.storage == nullptr) {
        buffers[i] = const_cast<uint8_t*>(b.bytes.data());
        sizes[i] = b.bytes.size();
      } else {
        buffers[i] = static_cast<char*>(b.storage->host) + b.offset;
        sizes[i] = b.size;
      }
    }
    emu::Launch l;
    l.kernel_name = kernel_name(d.kernel);
    l.fn = fn;
    check_piece(d);
    l.threadgroups = {d.threadgroups.x, d.threadgroups.y, d.threadgroups.z};
    l.origin = {d.origin.x, d.origin.y, d.origin.z};
    l.grid = {d.grid.x, d.grid.y, d.grid.z};
    l.threads = {d.threads_per_threadgroup.x, d.threads_per_threadgroup.y, d.threads_per_threadgroup.z};
    l.buffers = buffers.data();
    l.buffer_bytes = sizes.data();
    l.num_buffers = static_cast<int>(buffers.size());
    try {
      emu::launch(l);
    } catch (const emu::Fault& f) {
      throw KernelError(f.what());
    }
  }

  void synchronize() override {}

 private:
  const emu::KernelEntry* entry(KernelId id) const {
    return kernel_index(id) < kernels_.size() ? kernels_[kernel_index(id)] : nullptr;
  }

  DeviceCaps caps_;
  std::vector<const emu::KernelEntry*> kernels_;  // by kernel id; null where none is registered
};

}  // namespace

std::unique_ptr<Backend> make_emu_backend() { return std::make_unique<EmuBackend>(); }

namespace {

void set_gpu_plans(bool on, bool matrix_units) {
  auto* emu = dynamic_cast<EmuBackend*>(&active_backend());
  if (emu == nullptr) throw DeviceError("set_emu_gpu_plans: the active backend is ", active_backend().caps().backend);
  emu->set_gpu_plans(on, matrix_units);
}

// Every build has the emulator: MTLINV_DEVICE=auto's fallback.
const BackendRegistrar kRegistered("emu", BackendRegistrar::kFallback, make_emu_backend);

// F, after the environment is read (apply_environment_once), so that a mode a switch sets is never reset by it.
template <auto F>
struct AfterEnvironment;
template <typename R, typename... A, R (*F)(A...)>
struct AfterEnvironment<F> {
  static R call(A... args) {
    apply_environment_once();
    return F(args...);
  }
};

const EmulatorSwitches kSwitches{set_gpu_plans, AfterEnvironment<emu::set_check_mode>::call,
                                 AfterEnvironment<emu::check_mode>::call,
                                 AfterEnvironment<emu::set_flush_subnormals>::call,
                                 AfterEnvironment<emu::flush_subnormals>::call};
const bool kSwitchesRegistered = (register_emulator_switches(kSwitches), true);

}  // namespace

}  // namespace mtlinv
