// The threadgroup scheduler: fibers run in rounds; a fiber runs until it waits at a barrier or a simd
// exchange (or returns), and the last arriver at either releases the waiters into the next round. A fiber that
// stops switches straight to the next runnable one; the OS thread's own context gets control back only when
// none is left. Then, if not every fiber has returned, the threads diverged: that is a Fault.
#include "scheduler.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fiber.h"

namespace emu::detail {
namespace {

enum class Wait : uint8_t { kNew, kNone, kBarrier, kSimd, kDone };  // kNew: not started, nor set up

struct Fiber {
  Context ctx;
  KernelCtx k;
  Wait wait;
};

struct SimdGroup {
  unsigned char in[kSimdWidth * kMaxSimdBytes];  // [lane][bytes], packed with stride `bytes`
  unsigned char out[kSimdWidth * kMaxSimdBytes];
  int32_t params[kSimdWidth];
  uint32_t active;   // lanes that exist
  uint32_t arrived;  // lanes waiting at `site`
  Site site;
  SimdCombine combine;
  size_t bytes;
};

bool same_site(Site a, Site b) {
  return a.line == b.line && (a.file == b.file || (a.file && b.file && std::strcmp(a.file, b.file) == 0));
}

std::string site_str(Site s) {
  const char* f = s.file ? s.file : "?";
  const char* slash = std::strrchr(f, '/');
  return std::string(slash ? slash + 1 : f) + ":" + std::to_string(s.line);
}

std::string count_str(uint32_t n, const char* unit) {
  return std::to_string(n) + " " + unit + (n == 1 ? "" : "s");
}

std::string dim_str(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

// "0..3, 8, 10..11": sorted indices as ranges, cut short after a few.
std::string ranges_str(const std::vector<uint32_t>& v) {
  std::string s;
  size_t i = 0, shown = 0;
  for (; i < v.size() && shown < 6; ++shown) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(v[i]);
    if (j > i) s += ".." + std::to_string(v[j]);
    i = j + 1;
  }
  if (i < v.size()) s += " and " + std::to_string(v.size() - i) + " more";
  return s;
}

// splitmix64: a tiny, good-enough generator for shuffling fibers.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

class Threadgroup {
 public:
  Threadgroup() = default;
  Threadgroup(const Threadgroup&) = delete;
  Threadgroup& operator=(const Threadgroup&) = delete;
  ~Threadgroup() {
    for (Stack s : stacks_) stack_free(s);
  }

  void run(const Launch& l, uint64_t group, Order order, uint64_t seed);
  void barrier(Site site);
  void simd_exchange(const void* in, int32_t param, void* out, size_t bytes, SimdCombine combine, Site site);

 private:
  static void fiber_main(void* self);
  void run_kernel(Fiber& f);
  void start(const Launch& l, uint64_t group);
  void prepare(uint32_t t);
  Context& pick();
  void yield();
  void release(uint32_t first, uint32_t count);
  std::string stuck_message() const;
  std::string others_str(const std::vector<uint32_t>& others, uint32_t base, const char* unit) const;

  std::vector<Stack> stacks_;  // kept across threadgroups: one per fiber of the largest threadgroup so far
  std::vector<Fiber> fibers_;
  std::vector<SimdGroup> simds_;
  std::vector<uint16_t> ready_, next_;  // this round's runnable fibers; those released during it
  size_t ready_pos_ = 0;                // ready_[ready_pos_..] have not run yet this round
  Context home_;                        // the OS thread's own stack: run() waits there until no fiber can run
  const Launch* launch_ = nullptr;
  dim3 pos_;  // this threadgroup's position in the grid
  KernelFn fn_ = nullptr;
  uint32_t n_ = 0, current_ = 0, done_ = 0;
  uint32_t barrier_arrived_ = 0;
  Site barrier_site_{};
  Order order_ = Order::kNatural;
  FpMode fp_ = FpMode::kIeee;  // the modes every fiber of this threadgroup starts in
  Rng rng_{0};
  bool failed_ = false;
  std::string failure_;
};

thread_local Threadgroup* tl_running = nullptr;

Threadgroup& running() {
  if (!tl_running) throw Fault("emu: barrier or simd function called outside a kernel");
  return *tl_running;
}

// Never returns, so it must not take a frame on ASan's fake stack (reused by the next fiber: the frame would
// leak, fill it, and slow every later allocation); the real work is in run_kernel, which returns.
__attribute__((no_sanitize_address)) void Threadgroup::fiber_main(void* self) {
  auto* tg = static_cast<Threadgroup*>(self);
  Fiber& f = tg->fibers_[tg->current_];
  context_started(f.ctx);
  tg->run_kernel(f);
  context_exit(f.ctx, tg->failed_ ? tg->home_ : tg->pick());
}

void Threadgroup::run_kernel(Fiber& f) {
  // Nothing may unwind past this frame: below it is no caller, only the trampoline.
  try {
    fn_(f.k);
  } catch (const std::exception& e) {
    // The launch prefixes "kernel K: threadgroup (..): "; drop the kernel name a shim message may already carry.
    std::string what = e.what();
    const std::string named = std::string("kernel ") + (f.k.kernel_name ? f.k.kernel_name : "?") + ": ";
    if (what.compare(0, named.size(), named) == 0) what.erase(0, named.size());
    failed_ = true;
    failure_ = "thread " + dim_str(f.k.thread_position_in_threadgroup) + ": " + what;
  } catch (...) {
    failed_ = true;
    failure_ = "thread " + dim_str(f.k.thread_position_in_threadgroup) + ": unknown exception";
  }
  f.wait = Wait::kDone;
  ++done_;
}

// Sets up fiber t just before its first run, while its stack top is about to be hot in the cache anyway.
void Threadgroup::prepare(uint32_t t) {
  const Launch& l = *launch_;
  const dim3 T = l.threads;
  Fiber& f = fibers_[t];
  KernelCtx& k = f.k;
  k.buffers = l.buffers;
  k.buffer_bytes = l.buffer_bytes;
  k.num_buffers = l.num_buffers;
  k.kernel_name = l.kernel_name;
  k.threadgroup_position_in_grid = pos_;
  k.threadgroups_per_grid = l.grid.x == 0 ? l.threadgroups : l.grid;
  k.thread_position_in_threadgroup = dim3{t % T.x, t / T.x % T.y, t / T.x / T.y};
  k.threads_per_threadgroup = T;
  k.thread_position_in_grid = dim3{pos_.x * T.x + k.thread_position_in_threadgroup.x,
                                   pos_.y * T.y + k.thread_position_in_threadgroup.y,
                                   pos_.z * T.z + k.thread_position_in_threadgroup.z};
  k.thread_index_in_threadgroup = t;
  k.simdgroup_index_in_threadgroup = t / kSimdWidth;
  k.thread_index_in_simdgroup = t % kSimdWidth;
  k.simdgroups_per_threadgroup = static_cast<uint32_t>(simds_.size());
  k.threads_per_simdgroup = kSimdWidth;
  f.wait = Wait::kNone;
  // Stack tops 68 KiB apart would all share one L1 cache set; a per-fiber offset spreads them.
  const Stack s = stacks_[t];
  context_make(f.ctx, Stack{s.lo, s.size - t % 64 * 64}, &Threadgroup::fiber_main, this, fp_);
}

void Threadgroup::start(const Launch& l, uint64_t group) {
  const dim3 T = l.threads, G = l.threadgroups;
  n_ = T.x * T.y * T.z;
  while (stacks_.size() < n_) stacks_.push_back(stack_alloc(kFiberStackBytes));
  if (fibers_.size() < n_) fibers_.resize(n_);
  const uint32_t simds = (n_ + kSimdWidth - 1) / kSimdWidth;
  simds_.resize(simds);
  for (uint32_t s = 0; s < simds; ++s) {
    const uint32_t lanes = std::min(kSimdWidth, n_ - s * kSimdWidth);
    simds_[s].active = lanes == 32 ? ~0u : (1u << lanes) - 1;
    simds_[s].arrived = 0;
  }
  launch_ = &l;
  pos_ = dim3{l.origin.x + static_cast<uint32_t>(group % G.x), l.origin.y + static_cast<uint32_t>(group / G.x % G.y),
              l.origin.z + static_cast<uint32_t>(group / G.x / G.y)};
  ready_.clear();
  ready_pos_ = 0;
  next_.clear();
  for (uint32_t t = 0; t < n_; ++t) {
    fibers_[t].wait = Wait::kNew;
    next_.push_back(static_cast<uint16_t>(t));
  }
  fn_ = l.fn;
  fp_ = flush_subnormals() ? FpMode::kFlushSubnormals : FpMode::kIeee;
  done_ = 0;
  barrier_arrived_ = 0;
  failed_ = false;
  failure_.clear();
}

Context& Threadgroup::pick() {
  if (ready_pos_ == ready_.size()) {
    ready_.clear();
    ready_.swap(next_);
    ready_pos_ = 0;
    if (ready_.empty()) return home_;
    if (order_ != Order::kNatural) {
      // Shuffle the sorted list, so both orders see the same permutation whatever the release order was.
      std::sort(ready_.begin(), ready_.end());
      for (size_t i = ready_.size(); i > 1; --i) std::swap(ready_[i - 1], ready_[rng_.next() % i]);
      if (order_ == Order::kReverseRandom) std::reverse(ready_.begin(), ready_.end());
    }
  }
  current_ = ready_[ready_pos_++];
  if (fibers_[current_].wait == Wait::kNew) prepare(current_);
  return fibers_[current_].ctx;
}

void Threadgroup::yield() {
  Context& self = fibers_[current_].ctx;
  Context& to = pick();
  if (&to != &self) context_switch(self, to);  // a last arriver may be the first to run in the next round
}

void Threadgroup::run(const Launch& l, uint64_t group, Order order, uint64_t seed) {
  start(l, group);
  order_ = order;
  rng_.s = seed ^ (group * 0xd1b54a32d192ed03ull);
  tl_running = this;
  context_switch(home_, pick());
  tl_running = nullptr;
  if (failed_ || done_ < n_) {
    const std::string where = std::string("kernel ") + (l.kernel_name ? l.kernel_name : "?") + ": threadgroup " +
                              dim_str(pos_) + ": ";
    const std::string what = failed_ ? failure_ : stuck_message();
    // The fibers that never returned left ASan's redzones of their frames on the stacks we reuse next time.
    for (uint32_t t = 0; t < n_; ++t)
      if (fibers_[t].wait != Wait::kDone && fibers_[t].wait != Wait::kNew) stack_forget_frames(stacks_[t]);
    throw Fault(where + what);
  }
}

void Threadgroup::release(uint32_t first, uint32_t count) {
  for (uint32_t t = first; t < first + count; ++t) {
    fibers_[t].wait = Wait::kNone;
    next_.push_back(static_cast<uint16_t>(t));
  }
}

void Threadgroup::barrier(Site site) {
  if (barrier_arrived_ == 0) {
    barrier_site_ = site;
  } else if (!same_site(site, barrier_site_)) {
    throw Fault("barrier at " + site_str(site) + " reached while " + count_str(barrier_arrived_, "thread") +
                " wait at a different barrier at " + site_str(barrier_site_));
  }
  fibers_[current_].wait = Wait::kBarrier;
  // Every thread must arrive: on a GPU, a thread that returned before a barrier makes the barrier undefined.
  if (++barrier_arrived_ == n_) {
    barrier_arrived_ = 0;
    release(0, n_);
  }
  yield();
}

void Threadgroup::simd_exchange(const void* in, int32_t param, void* out, size_t bytes, SimdCombine combine,
                                Site site) {
  if (bytes > kMaxSimdBytes || !combine)
    throw Fault("simd function at " + site_str(site) + ": bad exchange (" + std::to_string(bytes) + " bytes)");
  Fiber& f = fibers_[current_];
  const uint32_t lane = f.k.thread_index_in_simdgroup;
  SimdGroup& g = simds_[f.k.simdgroup_index_in_threadgroup];
  if (g.arrived == 0) {
    g.site = site;
    g.combine = combine;
    g.bytes = bytes;
  } else if (!same_site(site, g.site) || combine != g.combine || bytes != g.bytes) {
    throw Fault("simd function at " + site_str(site) + " reached by lane " + std::to_string(lane) + " of simdgroup " +
                std::to_string(f.k.simdgroup_index_in_threadgroup) + " while " +
                count_str(__builtin_popcount(g.arrived), "lane") + " wait at a different simd function at " +
                site_str(g.site));
  }
  std::memcpy(g.in + lane * bytes, in, bytes);
  g.params[lane] = param;
  g.arrived |= 1u << lane;
  f.wait = Wait::kSimd;
  if (g.arrived == g.active) {
    g.arrived = 0;
    // Results go to a separate array, so a released lane may deposit its next input before the others read.
    combine(g.in, g.params, g.active, g.out, bytes);
    release(f.k.simdgroup_index_in_threadgroup * kSimdWidth, __builtin_popcount(g.active));
  }
  yield();
  std::memcpy(out, g.out + lane * bytes, bytes);
}

// Names where the threads (or lanes, numbered from `base`) in `others` are instead.
std::string Threadgroup::others_str(const std::vector<uint32_t>& others, uint32_t base, const char* unit) const {
  std::vector<std::pair<std::string, std::vector<uint32_t>>> by_place;
  for (uint32_t t : others) {
    const Fiber& f = fibers_[t];
    std::string place = "finished without reaching it";
    if (f.wait == Wait::kBarrier) place = "wait at barrier at " + site_str(barrier_site_);
    if (f.wait == Wait::kSimd)
      place = "wait at simd function at " + site_str(simds_[f.k.simdgroup_index_in_threadgroup].site);
    auto it = std::find_if(by_place.begin(), by_place.end(), [&](const auto& p) { return p.first == place; });
    if (it == by_place.end()) it = by_place.insert(by_place.end(), {place, {}});
    it->second.push_back(t - base);
  }
  std::string s;
  for (const auto& [place, who] : by_place)
    s += (s.empty() ? "" : "; ") + std::string(unit) + " " + ranges_str(who) + " " + place;
  return s;
}

std::string Threadgroup::stuck_message() const {
  std::vector<uint32_t> others;
  if (barrier_arrived_ > 0) {
    for (uint32_t t = 0; t < n_; ++t)
      if (fibers_[t].wait != Wait::kBarrier) others.push_back(t);
    return "barrier at " + site_str(barrier_site_) + " reached by " + std::to_string(barrier_arrived_) + " of " +
           std::to_string(n_) + " threads (" + others_str(others, 0, "threads") + ")";
  }
  for (uint32_t s = 0; s < simds_.size(); ++s) {
    const SimdGroup& g = simds_[s];
    if (g.arrived == 0) continue;
    for (uint32_t lane = 0; lane < kSimdWidth; ++lane)
      if ((g.active >> lane & 1) && !(g.arrived >> lane & 1)) others.push_back(s * kSimdWidth + lane);
    return "simd function at " + site_str(g.site) + " reached by " + std::to_string(__builtin_popcount(g.arrived)) +
           " of " + std::to_string(__builtin_popcount(g.active)) + " lanes of simdgroup " + std::to_string(s) + " (" +
           others_str(others, s * kSimdWidth, "lanes") + ")";
  }
  return "threads stopped without finishing";  // unreachable: a waiting thread waits at a barrier or simd call
}

}  // namespace

void run_threadgroup(const Launch& l, uint64_t group, Order order, uint64_t seed) {
  static thread_local Threadgroup tg;
  tg.run(l, group, order, seed);
}

bool in_kernel() { return tl_running != nullptr; }

}  // namespace emu::detail

namespace emu {

void barrier(Site site) { detail::running().barrier(site); }

void simd_exchange(const void* in, int32_t param, void* out, size_t bytes, SimdCombine combine, Site site) {
  detail::running().simd_exchange(in, param, out, bytes, combine, site);
}

}  // namespace emu
