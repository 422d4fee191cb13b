#include "graph_batch.h"

#include <cstring>
#include <utility>

#include "../core/errors.h"

namespace mtlinv {

std::string describe(cudaError_t e) { return concat(cudaGetErrorName(e), ": ", cudaGetErrorString(e)); }

cudaError_t launch_on(const CudaLaunch& l, cudaStream_t stream, bool overlapped) {
  void* params[] = {const_cast<cu::LaunchArgs*>(&l.args)};
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = l.grid;
  config.blockDim = l.block;
  config.stream = stream;
  config.attrs = overlapped ? &overlap : nullptr;
  config.numAttrs = overlapped ? 1 : 0;
  return cudaLaunchKernelExC(&config, l.entry, params);
}

namespace {

bool same_dim(const dim3& a, const dim3& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// Member by member: the struct's padding is not part of the launch.
bool same_launch(const CudaLaunch& a, const CudaLaunch& b) {
  const cu::LaunchArgs& x = a.args;
  const cu::LaunchArgs& y = b.args;
  return a.entry == b.entry && same_dim(a.grid, b.grid) && same_dim(a.block, b.block) &&
         std::memcmp(x.arg_bytes, y.arg_bytes, sizeof x.arg_bytes) == 0 &&
         std::memcmp(x.buffers, y.buffers, sizeof x.buffers) == 0 && x.origin_y == y.origin_y &&
         x.origin_z == y.origin_z && std::memcmp(x.grid, y.grid, sizeof x.grid) == 0;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw DeviceError("cuda: ", what, " failed (", describe(e), ")");
  }
}

// The node that follows `node` in a chain (its one dependent), or null at the end.
cudaGraphNode_t next_in_chain(cudaGraphNode_t node) {
  cudaGraphNode_t next[2] = {};
  cudaGraphEdgeData edges[2] = {};  // programmatic edges are not the default kind: a query without edge data fails
  size_t count = 2;
  check(cudaGraphNodeGetDependentNodes(node, next, edges, &count), "cudaGraphNodeGetDependentNodes");
  if (count > 1) throw KernelError("internal: cuda: a captured batch is not a chain (a node has ", count, " next)");
  return count == 1 ? next[0] : nullptr;
}

}  // namespace

GraphBatches::~GraphBatches() {
  for (auto& entry : graphs_) destroy(entry.second);
  if (capture_) (void)cudaStreamDestroy(capture_);
}

bool GraphBatches::begin(uint64_t key) {
  // A scope inside the thread's own batch joins it (try_lock on a mutex the thread holds would be undefined).
  if (recording() || !mutex_.try_lock()) return false;
  key_ = key;
  launches_.clear();
  owner_.store(std::this_thread::get_id(), std::memory_order_release);
  return true;
}

std::optional<KernelId> GraphBatches::end(cudaStream_t stream, bool overlapped) {
  struct Finish {  // the batch ends whatever happens: the thread records no more, and another may begin
    GraphBatches& b;
    ~Finish() {
      b.launches_.clear();
      b.owner_.store(std::thread::id(), std::memory_order_release);
      b.mutex_.unlock();
    }
  } finish{*this};
  if (launches_.empty()) return std::nullopt;
  run(key_, stream, overlapped);
  return launches_.back().kernel;
}

Backend::BatchCounts GraphBatches::counts() const {
  Backend::BatchCounts c;
  c.batches = batches_.load();
  c.builds = builds_.load();
  c.updates = updates_.load();
  c.kernels = kernels_.load();
  return c;
}

void GraphBatches::run(uint64_t key, cudaStream_t stream, bool overlapped) {
  auto it = graphs_.find(key);
  if (it != graphs_.end() && !update(it->second)) {  // another length, or a change the driver refused
    destroy(it->second);
    graphs_.erase(it);
    it = graphs_.end();
  }
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) evict_least_recent();
    it = graphs_.emplace(key, build(overlapped)).first;
    builds_.fetch_add(1);
  }
  Graph& g = it->second;
  g.last_used = ++clock_;
  const cudaError_t e = cudaGraphLaunch(g.exec, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw KernelError("cuda: launching a graph of ", launches_.size(), " kernels (", launches_.front().kernel, " .. ",
                      launches_.back().kernel, ") failed (", describe(e), ")");
  }
  batches_.fetch_add(1);
  kernels_.fetch_add(launches_.size());
}

GraphBatches::Graph GraphBatches::build(bool overlapped) {
  if (capture_ == nullptr) check(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking), "cudaStreamCreate");
  Graph g;
  // Captured, not assembled node by node: the launches are made as the direct path makes them, so the graph keeps
  // their programmatic dependent launch (as programmatic edges) and every other setting.
  check(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaError_t failed = cudaSuccess;
  const CudaLaunch* failing = nullptr;
  for (const CudaLaunch& l : launches_) {
    failed = launch_on(l, capture_, overlapped);
    if (failed != cudaSuccess) {
      failing = &l;
      break;
    }
  }
  const cudaError_t ended = cudaStreamEndCapture(capture_, &g.graph);
  if (failing != nullptr || ended != cudaSuccess) {
    (void)cudaGetLastError();
    destroy(g);
    if (failing != nullptr) {
      throw KernelError("cuda: recording ", failing->kernel, " with grid (", failing->grid.x, ", ", failing->grid.y,
                        ", ", failing->grid.z, ") into a graph failed (", describe(failed), ")");
    }
    throw DeviceError("cuda: cudaStreamEndCapture failed (", describe(ended), ")");
  }
  try {
    cudaGraphNode_t root[2] = {};
    size_t roots = 2;
    check(cudaGraphGetRootNodes(g.graph, root, &roots), "cudaGraphGetRootNodes");
    if (roots != 1) throw KernelError("internal: cuda: a captured batch has ", roots, " first kernels");
    cudaGraphNode_t node = root[0];
    for (; node != nullptr; node = next_in_chain(node)) g.nodes.push_back(node);
    if (g.nodes.size() != launches_.size()) {
      throw KernelError("internal: cuda: a batch of ", launches_.size(), " kernels was captured as ", g.nodes.size(),
                        " nodes");
    }
    check(cudaGraphInstantiate(&g.exec, g.graph, 0), "cudaGraphInstantiate");
  } catch (...) {
    destroy(g);
    throw;
  }
  g.launches = launches_;
  return g;
}

bool GraphBatches::update(Graph& g) {
  if (g.launches.size() != launches_.size()) return false;
  for (size_t i = 0; i < launches_.size(); ++i) {
    const CudaLaunch& l = launches_[i];
    if (same_launch(l, g.launches[i])) continue;
    void* params[] = {const_cast<cu::LaunchArgs*>(&l.args)};
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(l.entry);
    p.gridDim = l.grid;
    p.blockDim = l.block;
    p.kernelParams = params;
    if (cudaGraphExecKernelNodeSetParams(g.exec, g.nodes[i], &p) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    g.launches[i] = l;
    updates_.fetch_add(1);
  }
  return true;
}

void GraphBatches::destroy(Graph& g) noexcept {
  if (g.exec) (void)cudaGraphExecDestroy(g.exec);
  if (g.graph) (void)cudaGraphDestroy(g.graph);
  g.exec = nullptr;
  g.graph = nullptr;
}

void GraphBatches::evict_least_recent() {
  auto oldest = graphs_.begin();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->second.last_used < oldest->second.last_used) oldest = it;
  }
  destroy(oldest->second);
  graphs_.erase(oldest);
}

}  // namespace mtlinv
