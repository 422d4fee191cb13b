// launch(): hands a grid's threadgroups to the thread pool, or, in checking mode, runs it twice in opposite
// orders and compares the results. Launches are serialised by a mutex: the pool serves one grid at a time.
#include "runtime.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "fiber.h"
#include "scheduler.h"
#include "thread_pool.h"

namespace emu {
namespace {

struct Settings {
  std::atomic<bool> check{false};
  std::atomic<bool> flush{false};
  std::atomic<uint64_t> seed{0};
  std::atomic<int> workers{1};
};

int default_workers() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// The emulator backend (src/emu/backend_emu.cpp) sets these from MTLINV_EMU_CHECK, _SEED, _FTZ and _THREADS.
Settings& settings() {
  static Settings* s = [] {
    auto* s = new Settings;
    s->workers = default_workers();
    return s;
  }();
  return *s;
}

std::string kernel_prefix(const Launch& l) {
  return std::string("kernel ") + (l.kernel_name ? l.kernel_name : "?") + ": ";
}

// The shared state of one parallel launch.
struct Grid {
  const Launch* l;
  uint64_t total;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};  // set by the first fault; the other threads finish their threadgroup and quit
  std::mutex mu;
  std::string fault;
  uint64_t fault_group = UINT64_MAX;

  // Keeps the fault of the lowest threadgroup: threadgroups are taken in order and every one taken is finished,
  // so that is the same one whatever the number of workers.
  void fail(uint64_t group, std::string msg) {
    std::lock_guard<std::mutex> lock(mu);
    if (group < fault_group) {
      fault_group = group;
      fault = std::move(msg);
    }
    stop = true;
  }

  static void work(void* self) noexcept {
    auto& g = *static_cast<Grid*>(self);
    while (!g.stop.load(std::memory_order_relaxed)) {
      const uint64_t i = g.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= g.total) break;
      try {
        detail::run_threadgroup(*g.l, i, detail::Order::kNatural, 0);
      } catch (const Fault& f) {
        g.fail(i, f.what());
      } catch (const std::exception& e) {
        g.fail(i, kernel_prefix(*g.l) + "emulator error: " + e.what());
      }
    }
  }
};

void run_parallel(const Launch& l, uint64_t total) {
  Grid grid;
  grid.l = &l;
  grid.total = total;
  const int workers = num_workers();
  const uint64_t helpers = std::min<uint64_t>(static_cast<uint64_t>(workers - 1), total - 1);
  detail::ThreadPool::instance().run(static_cast<int>(helpers), &Grid::work, &grid);
  if (grid.fault_group != UINT64_MAX) throw Fault(grid.fault);
}

std::vector<std::vector<unsigned char>> copy_buffers(const Launch& l) {
  std::vector<std::vector<unsigned char>> copies(l.num_buffers);
  for (int i = 0; i < l.num_buffers; ++i) {
    auto* p = static_cast<const unsigned char*>(l.buffers[i]);
    if (p) copies[i].assign(p, p + l.buffer_bytes[i]);
  }
  return copies;
}

std::string hex_byte(unsigned char b) {
  static const char digits[] = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

// Run A: a random fiber order per round, threadgroups forwards. Run B, from the same inputs: each round's
// order reversed, threadgroups backwards. Any read racing a write sees different values in the two.
void run_checked(const Launch& l, uint64_t total) {
  uint64_t seed = settings().seed.load();
  // Mixing in the kernel name (FNV-1a) gives each kernel its own orders, independent of earlier launches.
  for (const char* c = l.kernel_name ? l.kernel_name : ""; *c; ++c)
    seed = (seed ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
  const auto inputs = copy_buffers(l);
  for (uint64_t g = 0; g < total; ++g) detail::run_threadgroup(l, g, detail::Order::kRandom, seed);
  const auto first = copy_buffers(l);
  for (int i = 0; i < l.num_buffers; ++i)
    if (l.buffers[i]) std::memcpy(l.buffers[i], inputs[i].data(), inputs[i].size());
  for (uint64_t g = total; g-- > 0;) detail::run_threadgroup(l, g, detail::Order::kReverseRandom, seed);
  for (int i = 0; i < l.num_buffers; ++i) {
    if (!l.buffers[i]) continue;
    auto* now = static_cast<const unsigned char*>(l.buffers[i]);
    const auto& then = first[i];
    size_t at = then.size(), count = 0;
    for (size_t b = 0; b < then.size(); ++b) {
      if (now[b] == then[b]) continue;
      if (at == then.size()) at = b;
      ++count;
    }
    if (count == 0) continue;
    throw Fault(kernel_prefix(l) + "result depends on thread order (data race): buffer " + std::to_string(i) +
                " differs first at byte " + std::to_string(at) + " (" + hex_byte(then[at]) + " in one order, " +
                hex_byte(now[at]) + " in the reverse order; " + std::to_string(count) + " bytes differ)");
  }
}

}  // namespace

void launch(const Launch& l) {
  const dim3 G = l.threadgroups, T = l.threads;
  const uint64_t threads = uint64_t{T.x} * T.y * T.z;
  if (!l.fn || threads == 0 || threads > kMaxThreadsPerThreadgroup || l.num_buffers < 0 ||
      (l.num_buffers > 0 && (!l.buffers || !l.buffer_bytes)))
    throw Fault(kernel_prefix(l) + "bad launch: " + std::to_string(T.x) + "x" + std::to_string(T.y) + "x" +
                std::to_string(T.z) + " threads per threadgroup (1.." + std::to_string(kMaxThreadsPerThreadgroup) +
                " allowed), " + std::to_string(l.num_buffers) + " buffers" + (l.fn ? "" : ", no kernel function"));
  const uint64_t total = uint64_t{G.x} * G.y * G.z;
  if (total == 0) return;
  if (detail::in_kernel()) throw Fault(kernel_prefix(l) + "launch called from inside a kernel");
  if (flush_subnormals() && !detail::kFlushSubnormalsSupported)
    throw Fault(kernel_prefix(l) + "flush-to-zero mode (MTLINV_EMU_FTZ) needs an x86-64 or arm64 CPU");
  static std::mutex serial;
  std::lock_guard<std::mutex> lock(serial);
  if (check_mode())
    run_checked(l, total);
  else
    run_parallel(l, total);
}

void set_check_mode(bool on, uint64_t seed) {
  settings().check = on;
  settings().seed = seed;
}

bool check_mode() { return settings().check; }

void set_flush_subnormals(bool on) { settings().flush = on; }

bool flush_subnormals() { return settings().flush; }

void set_num_workers(int n) { settings().workers = n > 0 ? n : default_workers(); }

int num_workers() { return settings().workers; }

}  // namespace emu
