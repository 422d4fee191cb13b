// A scope whose kernels run as one launch batch (Backend::begin_batch): on CUDA, one graph launch instead of a
// driver call per kernel; on Metal, one command buffer instead of one per op. A decoding step of a small model issues
// hundreds of small kernels, and on an H200 the host spent about 4 us calling the driver for each while the GPU
// waited (docs/decisions.md, "Decoder step: launch batches"). Where the backend does not batch (the emulator), the
// scope changes nothing: every dispatch runs as it is made.
#pragma once
#include <cstdint>

#include "backend.h"

namespace mtlinv {

class LaunchBatch {
 public:
  explicit LaunchBatch(uint64_t key);  // key: Backend::begin_batch's
  // Runs what is still recorded. Its errors are dropped (a destructor runs during unwinding); run() reports them.
  ~LaunchBatch();
  LaunchBatch(const LaunchBatch&) = delete;
  LaunchBatch& operator=(const LaunchBatch&) = delete;

  // Runs the batch's kernels (on CUDA: queues them); the scope records nothing more.
  void run();

 private:
  Backend* recording_ = nullptr;  // null: nothing is being recorded
};

// Whether LaunchBatch scopes batch at all (default: yes); returns the previous setting. For benchmarks that time
// the same work both ways within one run, and to rule batching out when chasing a fault.
bool set_launch_batches(bool enabled);

// The active backend's counts of batches run, graphs built and kernels updated since the process started.
Backend::BatchCounts launch_batch_counts();

}  // namespace mtlinv
