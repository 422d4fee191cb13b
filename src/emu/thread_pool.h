// The emulator's persistent worker threads. A launch runs the same job on the calling thread and on some
// workers at once; the job takes threadgroups from a shared counter until none are left.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace emu::detail {

class ThreadPool {
 public:
  using Job = void (*)(void* arg) noexcept;

  // The process's pool. After fork() the child gets a fresh, empty one (the parent's threads are not there).
  static ThreadPool& instance();

  // Calls job(arg) on the calling thread and on `helpers` pool threads concurrently, starting threads as
  // needed; returns once every call has returned. Not reentrant: one run at a time.
  void run(int helpers, Job job, void* arg);

 private:
  void worker(int index);

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;  // bumped per run, so each worker sees each run once
  int wanted_ = 0;           // workers 0..wanted_-1 take part in the current run
  int running_ = 0;          // of those, how many have not returned yet
  Job job_ = nullptr;
  void* arg_ = nullptr;
  int threads_ = 0;
};

}  // namespace emu::detail
