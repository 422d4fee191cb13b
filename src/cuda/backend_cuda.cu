// The CUDA backend (see backend_cuda.h). Kernels run on the legacy default stream, the one PyTorch and CuPy use
// unless told otherwise, so their work and ours are ordered without events; cudaMemcpy orders itself after both.
#include "backend_cuda.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../core/backend_select.h"
#include "../core/env.h"
#include "../core/errors.h"
#include "../core/grid_pieces.h"
#include "graph_batch.h"
#include "launch.h"

namespace mtlinv {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError("cuda: ", what, " failed (", describe(e), ")");
}

// Device memory is recycled rather than returned: an op allocates its output on every call, and the driver's
// allocation costs microseconds. Blocks are reused by rounded size. Reuse is safe without events because every
// kernel and copy runs on the one legacy stream, in order. Where the device has memory pools (CUDA 11.2+), blocks
// come from cudaMallocAsync and go back through cudaFreeAsync on that stream: cudaFree waits for the whole device,
// and the evictions below then stalled the queue inside an op's call (seen on an H200 as one verification length
// timing 3x slower, 136 us against 42, once earlier benchmarks had filled the cache with blocks of other sizes).
class Pool {
 public:
  explicit Pool(bool stream_ordered) : stream_ordered_(stream_ordered) {}

  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t e = device_malloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it, give the cache back, try once more
      release_all();
      e = device_malloc(&p, bytes);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw OutOfMemory("cuda: cannot allocate ", bytes, " bytes of device memory (", describe(e), ")");
    }
    return p;
  }

  // Never throws: called from Storage destructors, also during interpreter shutdown when the runtime may be gone.
  // Over the cap, cached blocks make room for the one coming back: it is of a size in use now, they may be of sizes
  // no call asks for any more (freed tensors of another shape). Freeing the returning block instead made every call
  // of a new size pay a cudaMalloc and a synchronising cudaFree once stale blocks filled the cache (seen on an H200
  // as 1.7x slower sdpa calls at 64K keys after benchmarks of shorter contexts).
  void give(void* p, size_t bytes) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (holding_) {
      held_.push_back({p, bytes});
      return;
    }
    cache(p, bytes);
  }

  // While a launch batch records, kernels that read or write a block freed meanwhile have not been queued yet, so
  // the block must not be taken again (by this batch's next op, or by another thread's, queued ahead of the batch)
  // until the batch is queued: blocks given back are held until release_held().
  void hold() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = true;
  }

  void release_held() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    holding_ = false;
    for (const Held& h : held_) cache(h.p, h.bytes);
    held_.clear();
  }

  static size_t rounded(size_t bytes) {
    const size_t unit = bytes < (size_t{1} << 20) ? 512 : (size_t{1} << 20);
    return (bytes + unit - 1) / unit * unit;
  }

 private:
  static constexpr size_t kMaxCachedBytes = size_t{2} << 30;

  struct Held {
    void* p;
    size_t bytes;
  };

  // Called with mutex_ held.
  void cache(void* p, size_t bytes) noexcept {
    for (auto it = free_.begin(); it != free_.end() && cached_ + bytes > kMaxCachedBytes; ++it) {
      while (!it->second.empty() && cached_ + bytes > kMaxCachedBytes) {
        device_free(it->second.back());
        it->second.pop_back();
        cached_ -= it->first;
      }
    }
    if (cached_ + bytes > kMaxCachedBytes) {
      device_free(p);
      return;
    }
    free_[bytes].push_back(p);
    cached_ += bytes;
  }

  void release_all() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : free_) {
      for (void* p : entry.second) device_free(p);
    }
    free_.clear();
    cached_ = 0;
  }

  // A block freed on the stream can be taken again by an allocation queued after it (stream order), so the retry
  // after release_all finds the memory released there.
  cudaError_t device_malloc(void** p, size_t bytes) const {
    return stream_ordered_ ? cudaMallocAsync(p, bytes, cudaStreamLegacy) : cudaMalloc(p, bytes);
  }
  void device_free(void* p) const noexcept {
    (void)(stream_ordered_ ? cudaFreeAsync(p, cudaStreamLegacy) : cudaFree(p));
  }

  const bool stream_ordered_;
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  bool holding_ = false;
  std::vector<Held> held_;
};

// Holds its pool, so memory that outlives the backend (a Tensor kept to interpreter exit) still has a home.
struct CudaStorage : Storage {
  std::shared_ptr<Pool> pool;
  size_t block = 0;
  ~CudaStorage() override {
    if (device) pool->give(device, block);
  }
};

// Device memory another library allocated (Backend::wrap_device): the caller's to free once the Storage is gone,
// so its release first waits for the work queued on the stream, as a wrapped host array's does.
struct WrappedCudaStorage : Storage {
  ~WrappedCudaStorage() override { (void)cudaStreamSynchronize(cudaStreamLegacy); }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count < 1) throw DeviceError("cuda: no CUDA device is visible");
    check(cudaSetDevice(0), "cudaSetDevice(0)");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    caps_.backend = "cuda";
    caps_.name = concat(prop.name, " (sm_", prop.major, prop.minor, ", ", prop.multiProcessorCount, " SMs)");
    caps_.simd_width = static_cast<uint32_t>(prop.warpSize);
    caps_.max_threads_per_threadgroup = static_cast<uint32_t>(prop.maxThreadsPerBlock);
    // Static __shared__ arrays may use up to sharedMemPerBlock (48 KiB); the plans stay within Metal's 32 KiB.
    caps_.threadgroup_memory_bytes = static_cast<uint32_t>(prop.sharedMemPerBlock);
    caps_.compute_units = static_cast<uint32_t>(prop.multiProcessorCount);
    caps_.bfloat = true;
    caps_.max_threadgroups = {static_cast<uint32_t>(prop.maxGridSize[0]), static_cast<uint32_t>(prop.maxGridSize[1]),
                              static_cast<uint32_t>(prop.maxGridSize[2])};  // 2^31 - 1, 65535, 65535
    caps_.matrix_units = prop.major >= 8;  // mma.sync m16n8k16 with bf16 (the build targets sm_80 or later)
    int memory_pools = 0;
    check(cudaDeviceGetAttribute(&memory_pools, cudaDevAttrMemoryPoolsSupported, 0), "cudaDeviceGetAttribute");
    pool_ = std::make_shared<Pool>(memory_pools != 0);
    // Ops return once their kernels are queued (op_dispatched): every kernel, copy and free runs in the order of
    // the one (legacy default) stream, and the host sees device memory only through download, whose cudaMemcpy
    // waits for the work queued before it. On an H200 the demo model decoded 1.4-2.2x as many tokens per second
    // as with a wait after every op (docs/decisions.md, "CUDA runtime"). MTLINV_CUDA_SYNC=1 waits
    // after every op instead, so that a kernel's error surfaces at the op that launched it.
    blocking_ = env_switch("MTLINV_CUDA_SYNC", false);
    // Programmatic dependent launch (shim/device.cuh, follow_previous_grid) needs sm_90; MTLINV_CUDA_PDL=0 turns
    // it off, to time its effect.
    const bool pdl = env_switch("MTLINV_CUDA_PDL", true);  // read on every GPU, so a bad value is refused on each
    caps_.overlapped_launches = prop.major >= 9 && pdl;
  }

  const DeviceCaps& caps() const override { return caps_; }

  StoragePtr allocate(size_t bytes) override {
    auto s = std::make_shared<CudaStorage>();
    s->pool = pool_;
    s->block = Pool::rounded(bytes ? bytes : 1);
    s->device = pool_->take(s->block);
    s->bytes = bytes;
    return s;
  }

  // CUDA memory is not host memory: Tensor::from_host copies through upload().
  StoragePtr wrap_host(void*, size_t) override { return nullptr; }

  // Any CUDA pointer of device 0 (cudaMalloc, a memory pool, managed memory): kernels read it as they read ours.
  StoragePtr wrap_device(void* device, size_t bytes) override {
    cudaPointerAttributes attributes{};
    check(cudaPointerGetAttributes(&attributes, device), "cudaPointerGetAttributes");
    if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
      throw InvalidArgument("cuda: pointer ", device, " is not device memory (cudaPointerGetAttributes type ",
                            static_cast<int>(attributes.type), ")");
    }
    if (attributes.device != 0) {
      throw InvalidArgument("cuda: pointer ", device, " is memory of CUDA device ", attributes.device,
                            "; mtlinv runs on device 0");
    }
    auto s = std::make_shared<WrappedCudaStorage>();
    s->device = device;
    s->bytes = bytes;
    return s;
  }

  // Our work runs on the legacy stream: make it wait for what the producer queued on its stream so far.
  void wait_for_stream(uintptr_t stream) override {
    cudaStream_t other = stream == 1   ? cudaStreamLegacy
                         : stream == 2 ? cudaStreamPerThread
                                       : reinterpret_cast<cudaStream_t>(stream);
    if (other == cudaStreamLegacy) return;  // ours: in order already
    cudaEvent_t done;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cudaError_t e = cudaEventRecord(done, other);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(cudaStreamLegacy, done, 0);
    (void)cudaEventDestroy(done);  // released once the wait completes
    check(e, "ordering the producer's stream before mtlinv's (cudaEventRecord / cudaStreamWaitEvent)");
  }

  void upload(Storage& dst, size_t offset, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    refuse_in_batch("upload");
    copy(static_cast<char*>(dst.device) + offset, src, bytes, cudaMemcpyHostToDevice, "upload");
  }
  void download(const Storage& src, size_t offset, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    refuse_in_batch("download");
    copy(dst, static_cast<const char*>(src.device) + offset, bytes, cudaMemcpyDeviceToHost, "download");
  }

  bool has_kernel(KernelId id) const override { return entry(id) != nullptr; }

  void dispatch(const Dispatch& d) override {
    const cu::KernelHandle entry = this->entry(d.kernel);
    if (entry == nullptr) {
      throw KernelError("cuda: no kernel named '", d.kernel, "' is registered (", cu::kernel_names().size(),
                        " kernels built)");
    }
    check_piece(d);
    const Dim3& g = d.threadgroups;
    const Dim3& t = d.threads_per_threadgroup;
    if (g.x == 0 || g.y == 0 || g.z == 0) return;  // an empty grid runs nothing, as on Metal
    check_launch_shape(d, entry);
    CudaLaunch launch;
    launch.entry = entry;
    launch.grid = dim3(g.x, g.y, g.z);
    launch.block = dim3(t.x, t.y, t.z);
    fill_launch_args(d, launch.args);
    if (batches_.recording()) {
      launch.kernel = d.kernel;
      batches_.record(std::move(launch));
      return;
    }
    const cudaError_t e = launch_on(launch, cudaStreamLegacy, caps_.overlapped_launches);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw KernelError("cuda: launching ", d.kernel, " with grid (", g.x, ", ", g.y, ", ", g.z, ") x threads (",
                        t.x, ", ", t.y, ", ", t.z, ") failed (", describe(e), ")");
    }
    last_kernel_.store(static_cast<int>(kernel_index(d.kernel)), std::memory_order_relaxed);
  }

  // MTLINV_CUDA_SYNC=1 records nothing: each kernel is waited for where it is dispatched.
  bool begin_batch(uint64_t key) override {
    if (blocking_ || !batches_.begin(key)) return false;
    pool_->hold();
    return true;
  }

  void end_batch() override {
    struct Release {  // after the graph is queued: work queued later cannot overtake it
      Pool& pool;
      ~Release() { pool.release_held(); }
    } release{*pool_};
    const std::optional<KernelId> last = batches_.end(cudaStreamLegacy, caps_.overlapped_launches);
    if (last) last_kernel_.store(static_cast<int>(kernel_index(*last)), std::memory_order_relaxed);
  }

  BatchCounts batch_counts() const override { return batches_.counts(); }

  void synchronize() override {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw failure(e, "synchronize");
  }

  // A queued kernel's fault surfaces at the next call that waits (download, synchronize) or launches.
  void op_dispatched() override {
    const cudaError_t e = blocking_ ? cudaDeviceSynchronize() : cudaPeekAtLastError();
    if (e != cudaSuccess) throw failure(e, blocking_ ? "synchronize" : "launch");
  }

 private:
  void fill_launch_args(const Dispatch& d, cu::LaunchArgs& args) const {
    if (d.bindings.empty() || d.bindings[0].storage != nullptr) {
      throw KernelError("cuda: ", d.kernel, ": binding 0 must be the inline argument struct");
    }
    if (d.bindings.size() > static_cast<size_t>(cu::kMaxBindings)) {
      throw KernelError("cuda: ", d.kernel, " binds ", d.bindings.size(), " buffers; at most ", cu::kMaxBindings);
    }
    const std::vector<uint8_t>& bytes = d.bindings[0].bytes;
    if (bytes.size() > cu::kMaxArgBytes) {
      throw KernelError("cuda: ", d.kernel, ": argument struct of ", bytes.size(), " bytes; at most ",
                        cu::kMaxArgBytes);
    }
    if (!bytes.empty()) std::memcpy(args.arg_bytes, bytes.data(), bytes.size());
    if (d.origin.x != 0) throw KernelError("internal: cuda: ", d.kernel, ": a piece must start at x = 0");
    args.origin_y = d.origin.y;
    args.origin_z = d.origin.z;
    args.grid[0] = d.grid.x;
    args.grid[1] = d.grid.y;
    args.grid[2] = d.grid.z;
    for (size_t i = 1; i < d.bindings.size(); ++i) {
      const Binding& b = d.bindings[i];
      if (b.storage == nullptr && !b.bytes.empty()) {
        throw KernelError("cuda: ", d.kernel, ": binding ", i, " is inline bytes; only binding 0 may be");
      }
      // A slot the plan leaves empty (one its family has and this kernel does not take) is a null pointer.
      args.buffers[i] = b.storage ? static_cast<char*>(b.storage->device) + b.offset : nullptr;
    }
  }

  // Reports what the device refuses before launching, with the kernel's own limit: a kernel that needs many
  // registers can run fewer threads per block than the device maximum.
  void check_launch_shape(const Dispatch& d, cu::KernelHandle entry) {
    const Dim3& g = d.threadgroups;
    const Dim3& t = d.threads_per_threadgroup;
    const uint64_t threads = uint64_t{t.x} * t.y * t.z;
    const int max_threads = max_threads_of(d.kernel, entry);
    if (threads == 0 || threads > static_cast<uint64_t>(max_threads)) {
      throw KernelError("cuda: ", d.kernel, " asked for ", threads, " threads per threadgroup; it can run 1..",
                        max_threads);
    }
    // The shim's simd_* functions take every lane of a warp (shim/simd.cuh says why); every plan's threadgroups are
    // whole simdgroups.
    if (threads % 32 != 0) {
      throw KernelError("cuda: ", d.kernel, " asked for ", threads, " threads per threadgroup (", t.x, ", ", t.y, ", ",
                        t.z, "); the CUDA target runs whole warps only: a multiple of 32");
    }
    const Dim3& most = caps_.max_threadgroups;
    if (g.x > most.x || g.y > most.y || g.z > most.z) {  // dispatch_in_pieces keeps every piece inside
      throw KernelError("internal: cuda: ", d.kernel, " piece (", g.x, ", ", g.y, ", ", g.z,
                        ") exceeds CUDA's (", most.x, ", ", most.y, ", ", most.z, ") threadgroups");
    }
  }

  // Asked of the driver at a kernel's first launch; two threads asking at once store the same value.
  int max_threads_of(KernelId id, cu::KernelHandle entry) {
    std::atomic<int>& known = max_threads_[kernel_index(id)];
    int most = known.load(std::memory_order_relaxed);
    if (most != 0) return most;
    cudaFuncAttributes attr{};
    check(cudaFuncGetAttributes(&attr, entry), "cudaFuncGetAttributes");
    most = attr.maxThreadsPerBlock;
    known.store(most, std::memory_order_relaxed);
    return most;
  }

  cu::KernelHandle entry(KernelId id) const {
    return kernel_index(id) < kernels_.size() ? kernels_[kernel_index(id)] : nullptr;
  }

  // A copy runs at once, while the batch's kernels have not been queued: it would read or write memory out of order.
  void refuse_in_batch(const char* what) const {
    if (batches_.recording()) throw KernelError("internal: cuda: ", what, " inside a launch batch");
  }

  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
    const cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess) throw failure(e, what);
  }

  // An error at a synchronising call belongs to the last kernel launched (or an earlier one, when asynchronous).
  // Faults such as an illegal address are sticky: the process's CUDA context is unusable afterwards.
  KernelError failure(cudaError_t e, const char* what) {
    const int last = last_kernel_.load(std::memory_order_relaxed);
    const char* kernel = last < 0 ? "(none)" : kernel_name(kernel_at(static_cast<size_t>(last)));
    return KernelError("cuda: ", what, " after kernel ", kernel, ": ", describe(e),
                       e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
                               e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction
                           ? "; the CUDA context is lost, restart the process"
                           : "");
  }

  DeviceCaps caps_;
  bool blocking_ = false;  // MTLINV_CUDA_SYNC=1
  std::shared_ptr<Pool> pool_;
  GraphBatches batches_;
  // By kernel id (kernel_id.h): the registry's entries, found by name once, and each one's most threads per block
  // (0 until its first launch).
  std::vector<cu::KernelHandle> kernels_ = kernels_by_id<cu::KernelHandle>(cu::kernel_names(), cu::find_kernel);
  std::unique_ptr<std::atomic<int>[]> max_threads_{new std::atomic<int>[kernels_.size()]()};
  std::atomic<int> last_kernel_{-1};  // the index of the kernel launched last; -1 before any
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

bool cuda_device_available() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

namespace {
// MTLINV_DEVICE=auto tries CUDA after Metal (no build has both).
const BackendRegistrar kRegistered("cuda", 1, [] {
  if (!cuda_device_available()) throw DeviceError("CUDA: no device (the driver is missing, or sees none)");
  return make_cuda_backend();
});
}  // namespace

}  // namespace mtlinv
