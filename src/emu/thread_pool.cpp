// See thread_pool.h.
#include "thread_pool.h"

#include <pthread.h>

#include <system_error>
#include <thread>

namespace emu::detail {

// Never destroyed: workers block on its condition variable until the process exits, and destroying it at
// exit (or joining them) would race with a launch from another exiting thread.
static ThreadPool* g_pool = nullptr;

ThreadPool& ThreadPool::instance() {
  static const bool created = [] {
    g_pool = new ThreadPool;
    pthread_atfork(nullptr, nullptr, [] { g_pool = new ThreadPool; });
    return true;
  }();
  (void)created;
  return *g_pool;
}

void ThreadPool::run(int helpers, Job job, void* arg) {
  std::unique_lock<std::mutex> lock(mu_);
  // Where threads cannot be created (a container's limit), run with the ones there are.
  try {
    for (; threads_ < helpers; ++threads_) std::thread(&ThreadPool::worker, this, threads_).detach();
  } catch (const std::system_error&) {
    helpers = threads_;
  }
  if (helpers > 0) {
    job_ = job;
    arg_ = arg;
    wanted_ = helpers;
    running_ = helpers;
    ++generation_;
  }
  lock.unlock();
  if (helpers > 0) wake_.notify_all();
  job(arg);
  if (helpers <= 0) return;
  lock.lock();
  done_.wait(lock, [&] { return running_ == 0; });
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return generation_ != seen; });
    seen = generation_;
    if (index >= wanted_) continue;
    Job job = job_;
    void* arg = arg_;
    lock.unlock();
    job(arg);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace emu::detail
