#include "deferred_backend.h"

#include <exception>
#include <mutex>
#include <utility>
#include <vector>

namespace mtlinv {

namespace {

// The queued kernels and what they need, shared with the storages handed out: a storage may be released after
// the backend (at exit), and its release runs the queue.
struct Queue {
  explicit Queue(std::unique_ptr<Backend> backend) : inner(std::move(backend)) {}

  // Runs the queued kernels in order. The first error is kept for wait(); the kernels after it are dropped, as a
  // GPU abandons a failed command buffer.
  void run() {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Dispatch& d : queued) {
      try {
        inner->dispatch(d);
      } catch (...) {
        if (!failure) failure = std::current_exception();
        break;
      }
    }
    queued.clear();
    held.clear();
  }

  // run(), then throws the error of a kernel that failed since the last wait.
  void wait() {
    run();
    std::exception_ptr failed;
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::swap(failed, failure);
    }
    if (failed) std::rethrow_exception(failed);
  }

  std::unique_ptr<Backend> inner;
  std::mutex mutex;  // guards the members below
  std::vector<Dispatch> queued;
  std::vector<StoragePtr> held;  // storages released while queued kernels may bind them
  std::exception_ptr failure;
};

class DeferredBackend final : public Backend {
 public:
  explicit DeferredBackend(std::unique_ptr<Backend> inner) : queue_(std::make_shared<Queue>(std::move(inner))) {}

  ~DeferredBackend() override { queue_->run(); }

  const DeviceCaps& caps() const override { return queue_->inner->caps(); }

  // A storage released while kernels are queued lives until they have run, as a command buffer keeps the buffers
  // it binds.
  StoragePtr allocate(size_t bytes) override {
    StoragePtr storage = queue_->inner->allocate(bytes);
    return StoragePtr(storage.get(), [queue = queue_, storage](Storage*) mutable {
      std::lock_guard<std::mutex> lock(queue->mutex);
      if (!queue->queued.empty()) queue->held.push_back(std::move(storage));
      storage.reset();
    });
  }

  // Wrapped memory is the caller's once the storage is released (Backend::wrap_host): the release runs the queue.
  StoragePtr wrap_host(void* host, size_t bytes) override {
    StoragePtr storage = queue_->inner->wrap_host(host, bytes);
    if (!storage) return nullptr;
    return StoragePtr(storage.get(), [queue = queue_, storage](Storage*) mutable {
      queue->run();
      storage.reset();
    });
  }

  void upload(Storage& dst, size_t offset, const void* src, size_t bytes) override {
    queue_->wait();
    queue_->inner->upload(dst, offset, src, bytes);
  }

  void download(const Storage& src, size_t offset, void* dst, size_t bytes) override {
    queue_->wait();
    queue_->inner->download(src, offset, dst, bytes);
  }

  bool has_kernel(KernelId id) const override { return queue_->inner->has_kernel(id); }
  KernelSource kernel_source() const override { return queue_->inner->kernel_source(); }

  void dispatch(const Dispatch& d) override {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->queued.push_back(d);
  }

  void synchronize() override { queue_->wait(); }
  void op_dispatched() override {}  // the kernels stay queued until the host waits

 private:
  std::shared_ptr<Queue> queue_;
};

}  // namespace

std::unique_ptr<Backend> defer_dispatches(std::unique_ptr<Backend> inner) {
  return std::make_unique<DeferredBackend>(std::move(inner));
}

}  // namespace mtlinv
