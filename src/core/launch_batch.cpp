#include "launch_batch.h"

#include <atomic>

namespace mtlinv {

namespace {
std::atomic<bool> g_enabled{true};
}  // namespace

bool set_launch_batches(bool enabled) { return g_enabled.exchange(enabled); }

Backend::BatchCounts launch_batch_counts() { return active_backend().batch_counts(); }

LaunchBatch::LaunchBatch(uint64_t key) {
  if (!g_enabled.load(std::memory_order_relaxed)) return;
  Backend& backend = active_backend();
  if (backend.begin_batch(key)) recording_ = &backend;
}

LaunchBatch::~LaunchBatch() {
  try {
    run();
  } catch (...) {
  }
}

void LaunchBatch::run() {
  Backend* backend = recording_;
  recording_ = nullptr;  // ended even if running fails: the backend's batch is over either way
  if (backend) backend->end_batch();
}

}  // namespace mtlinv
