// Launch batches on CUDA (Backend::begin_batch): the kernels one thread dispatches inside a batch are recorded and
// then run as one CUDA graph. A graph is built once for each batch key and kept; when the key comes back, only the
// kernels whose arguments, grid or function differ are updated in place (cudaGraphExecKernelNodeSetParams): a
// decoding step's layer costs its updates (positions move, intermediate buffers may come from other blocks) and
// one graph launch, instead of a driver call per kernel.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../core/backend.h"
#include "launch.h"

namespace mtlinv {

// One kernel launch as the driver takes it.
struct CudaLaunch {
  cu::KernelHandle entry = nullptr;
  dim3 grid, block;
  cu::LaunchArgs args{};
  KernelId kernel{};  // for errors
};

// Queues `l` on `stream`. With `overlapped`, programmatic dependent launch: the kernel may be started before the
// previous one in the stream has finished and waits for it on the device (shim/device.cuh).
cudaError_t launch_on(const CudaLaunch& l, cudaStream_t stream, bool overlapped);

std::string describe(cudaError_t e);

class GraphBatches {
 public:
  GraphBatches() = default;
  ~GraphBatches();
  GraphBatches(const GraphBatches&) = delete;
  GraphBatches& operator=(const GraphBatches&) = delete;

  // False while another thread records a batch (the caller's kernels then run as they are dispatched) or while
  // the caller does (they join its batch).
  bool begin(uint64_t key);
  bool recording() const { return owner_.load(std::memory_order_acquire) == std::this_thread::get_id(); }
  void record(CudaLaunch l) { launches_.push_back(std::move(l)); }
  // Queues the recorded kernels on `stream` as one graph launch and ends the batch (also when it throws). A graph
  // built here launches them as launch_on(..., overlapped) does. Returns the last kernel, which errors found later
  // are reported against (none when nothing was recorded).
  std::optional<KernelId> end(cudaStream_t stream, bool overlapped);
  Backend::BatchCounts counts() const;

 private:
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::vector<cudaGraphNode_t> nodes;  // the graph's kernel nodes, in launch order
    std::vector<CudaLaunch> launches;    // what each node runs now
    uint64_t last_used = 0;
  };

  void run(uint64_t key, cudaStream_t stream, bool overlapped);
  Graph build(bool overlapped);
  bool update(Graph& g);
  static void destroy(Graph& g) noexcept;
  void evict_least_recent();

  // Graphs kept, by key. A step of a 30-layer decoder at each of a few row counts needs a few hundred.
  static constexpr size_t kMaxGraphs = 1024;

  std::mutex mutex_;  // held by the recording thread from begin to end; guards everything below but the counters
  std::atomic<std::thread::id> owner_{};
  uint64_t key_ = 0;
  std::vector<CudaLaunch> launches_;
  std::unordered_map<uint64_t, Graph> graphs_;
  cudaStream_t capture_ = nullptr;  // graphs are recorded by capturing a stream of our own (the legacy one cannot)
  uint64_t clock_ = 0;
  std::atomic<uint64_t> batches_{0}, builds_{0}, updates_{0}, kernels_{0};
};

}  // namespace mtlinv
