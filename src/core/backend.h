// The backend seam: the only interface between the portable core (tensors, checks, plans) and a device.
// A backend owns memory, runs a named kernel over a grid, and waits. It knows nothing of ops or shapes:
// routing lives in the plans (src/core/plan.h), so every backend makes the same decisions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernel_id.h"

namespace mtlinv {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// Device memory. `host` is non-null when the CPU can read and write it directly (emulator, Metal's shared
// storage); CUDA memory has host == nullptr and is reached through Backend::upload / download. Code that reads or
// writes through `host` goes through Tensor::host_data(), which first waits for the device (Backend, "Host access").
struct Storage {
  void* host = nullptr;
  void* device = nullptr;   // backend handle: CUDA pointer, id<MTLBuffer> as void*, == host on the emulator
  size_t bytes = 0;
  virtual ~Storage() = default;
};
using StoragePtr = std::shared_ptr<Storage>;

// What a device can do; plans may depend on it (never on M).
struct DeviceCaps {
  std::string backend;          // "emu", "metal", "cuda"
  std::string name;             // human-readable device name
  uint32_t simd_width = 32;
  uint32_t max_threads_per_threadgroup = 1024;
  uint32_t threadgroup_memory_bytes = 32768;
  uint32_t compute_units = 1;   // worker threads (emu), GPU cores (metal), SMs (cuda)
  bool bfloat = true;           // bfloat arithmetic available
  // Every thread is costly (the emulator: a fiber, switched at each barrier and simd call): plans prefer fewer,
  // longer-running threads. A plan may differ by device, never by M; tests turn this off on the emulator to run
  // the GPU plans' code paths (several K splits, wide rms_norm threadgroups) in CI.
  bool few_threads = false;
  // Matrix units that metal/mma.h's simd_mma_16x8x32 runs on (CUDA sm_80+): plans may pick the kernels that use it.
  // A plan may differ by device, so canonical results too; tests turn it on for the emulator's fallback.
  bool matrix_units = false;
  // A kernel may be launched before the one ahead of it has finished and wait for it on the device (CUDA sm_90+,
  // programmatic dependent launch): results are the same, only the gaps between launches shrink. Not for plans.
  bool overlapped_launches = false;
  // The most threadgroups one dispatch may have along x, y and z (CUDA: 2^31 - 1, 65535, 65535). A plan's grid may
  // be larger: src/core/grid_pieces.h runs it in pieces that fit.
  Dim3 max_threadgroups{UINT32_MAX, UINT32_MAX, UINT32_MAX};
  // Metal: the highest Apple GPU family the device supports ("apple7", "apple8", "apple9"); empty elsewhere.
  std::string gpu_family;
};

// One argument of a dispatch: the argument struct (bytes, slot 0) or a buffer range.
struct Binding {
  const Storage* storage = nullptr;  // null: `bytes` holds inline constant data
  size_t offset = 0;                 // byte offset into storage
  size_t size = 0;                   // bytes visible to the kernel from offset
  std::vector<uint8_t> bytes;        // inline data when storage == null
};

struct Dispatch {
  KernelId kernel{};
  Dim3 threadgroups;  // of this dispatch: the whole grid, or a piece of it
  Dim3 threads_per_threadgroup;
  // The piece of the grid this dispatch runs (src/core/grid_pieces.h): its first threadgroup, and the whole grid.
  // The kernel sees its threadgroup's position in the whole grid (origin + position in the piece) and the whole
  // grid as threadgroups_per_grid, so it cannot tell a piece from the whole.
  Dim3 origin{0, 0, 0};
  Dim3 grid;
  std::vector<Binding> bindings;  // bindings[i] is [[buffer(i)]]
};

// Host access. On CUDA and Metal an op returns once its kernels are queued (op_dispatched), and the host's next op
// overlaps the device's work; the emulator runs each kernel as it is dispatched. So the host touches a Storage's
// memory only after waiting for the work queued before: upload and download wait themselves, and every other read
// or write through Storage::host goes through Tensor::host_data(), which synchronizes (and reports a failed
// kernel). A pointer obtained so (a NumPy view, a DLPack capsule) stays valid, but it shows work queued later only
// after the next wait, and the host must not write through it while queued work may still use the memory.
// Memory that wrap_host wraps is the caller's: see there.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceCaps& caps() const = 0;

  // Throws OutOfMemory when the allocation fails.
  virtual StoragePtr allocate(size_t bytes) = 0;
  // Wraps existing host memory without copying where the backend can (nullptr when it cannot). The memory stays
  // the caller's, who keeps it alive while the Storage lives; the Storage's destructor waits until the device has
  // finished the work queued on it, so the caller may free or reuse the memory as soon as the last reference to
  // the Storage is gone, whatever is still queued. While the Storage lives the memory is the tensor's: host writes
  // to it follow the rule of host access above.
  virtual StoragePtr wrap_host(void* host, size_t bytes) = 0;
  // Wraps memory of this backend's device that another library allocated (a CUDA pointer from DLPack or
  // __cuda_array_interface__), on the terms of wrap_host; nullptr where the backend has no such memory (the default).
  virtual StoragePtr wrap_device(void* device, size_t bytes) {
    (void)device;
    (void)bytes;
    return nullptr;
  }
  // Orders the work queued from now on after the work queued so far on another library's stream (a CUDA stream
  // handle, as DLPack and __cuda_array_interface__ pass it: 1 the legacy default stream, 2 the per-thread one).
  // Backends without streams have nothing to order.
  virtual void wait_for_stream(uintptr_t stream) { (void)stream; }
  virtual void upload(Storage& dst, size_t offset, const void* src, size_t bytes) = 0;
  virtual void download(const Storage& src, size_t offset, void* dst, size_t bytes) = 0;

  // Whether this backend can run kernel `id` (every kernel of the table, where the build is whole).
  virtual bool has_kernel(KernelId id) const = 0;
  // The names of the kernels it can run, sorted.
  std::vector<std::string> kernel_names() const;

  // Where the kernels come from, for device_info.
  struct KernelSource {
    // "built-in" (compiled into the binary: emulator, CUDA), "metallib" (Metal, compiled when mtlinv was built) or
    // "source" (Metal: the MSL embedded in the binary, compiled at run time, one kernel file at its first use).
    std::string origin = "built-in";
    // Seconds spent loading the metallib, or compiling kernel files so far; none before, and where nothing loads.
    std::optional<double> load_seconds;
    // Why a metallib the build configured is not used (it is missing, does not load, or lacks kernels); else "".
    std::string fallback;
  };
  virtual KernelSource kernel_source() const { return {}; }

  // Enqueues one kernel; may run it immediately. Errors surface here or at the next wait (synchronize, upload,
  // download, Tensor::host_data) as exceptions.
  virtual void dispatch(const Dispatch& d) = 0;
  // Waits for everything dispatched so far; throws the error of a kernel that failed since the last wait.
  virtual void synchronize() = 0;
  // Called once an op (or a raw launch) has dispatched its kernels: a backend that queues them sends them to the
  // device here and returns without waiting (host access above). The default waits.
  virtual void op_dispatched() { synchronize(); }

  // Launch batches (src/core/launch_batch.h). From begin_batch until end_batch, the calling thread's dispatches may
  // be deferred, and end_batch runs them in order as one unit. On CUDA they are recorded and go out as one graph
  // launch, in place of a driver call per kernel; on Metal they join one command buffer, which end_batch commits
  // (one command buffer a layer, not one an op). `key` names the batch's place in a sequence that repeats (a layer
  // of a decoding step), so that the backend can keep what it built for it. Inside a batch the thread must not
  // upload or download on CUDA (the recorded kernels have not run), and memory freed inside it is reused only after
  // it.
  // begin_batch returns false where a batch changes nothing (the default: the emulator runs each dispatch at once)
  // or cannot begin (another thread's batch; a scope inside the thread's own joins it); then end_batch must not be
  // called.
  virtual bool begin_batch(uint64_t key) {
    (void)key;
    return false;
  }
  virtual void end_batch() {}
  struct BatchCounts {
    uint64_t batches = 0;       // batches run
    uint64_t builds = 0;        // of them, run by a graph built for them (the rest reused one)
    uint64_t updates = 0;       // kernels changed in a reused graph (arguments, grid or kernel)
    uint64_t kernels = 0;       // kernels run in batches
  };
  virtual BatchCounts batch_counts() const { return {}; }
};

// The calling thread's backend (its innermost BackendScope), else the process-wide active backend, chosen on first
// use from MTLINV_DEVICE=auto|emu|metal|cuda (default auto: metal when built and its device accepted, else cuda
// when built with a device, else emu). Throws DeviceError when the requested backend is not built, or has no
// device it accepts.
Backend& active_backend();
// A scope of the calling thread whose ops run on `backend` instead of the process-wide one: an MLX primitive's GPU
// evaluation (mtlinv/mlx_ext) runs mtlinv's ops on a backend that encodes their kernels on MLX's own command
// encoder, so that they join MLX's stream. Scopes nest and end in the reverse order of their start, on the thread
// that started them; `backend` must outlive the scope.
class BackendScope {
 public:
  explicit BackendScope(Backend& backend);
  ~BackendScope();
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  Backend* saved_;  // the thread's backend before this scope (null: the process-wide one)
};
// Why MTLINV_DEVICE=auto runs on another backend than the first it prefers (the messages of the backends that
// refused, e.g. Metal on an Intel Mac), also printed once to stderr as a warning; "" when it runs on that
// one, or when MTLINV_DEVICE named the backend. Chooses the backend if none is active yet.
const std::string& backend_fallback();
// Names of the backends compiled into this build, e.g. {"emu", "cuda"}.
std::vector<std::string> built_backends();

}  // namespace mtlinv
