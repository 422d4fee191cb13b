// Tests of the emulator runtime (src/emu): barriers, simd exchanges, divergence and race detection, faults,
// worker-count determinism, the registry, and a micro-benchmark. Kernels are plain C++ functions here, since
// the MSL shim is not used. Exits non-zero on any failure.
#include <cfenv>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fiber.h"
#include "runtime.h"

using emu::dim3;
using emu::KernelCtx;
using emu::Site;

static int g_failures = 0;

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      ++g_failures;                                                   \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
    }                                                                 \
  } while (0)

// --- helpers ------------------------------------------------------------------------------------------------

static void run(const char* name, emu::KernelFn fn, dim3 grid, dim3 threads, std::vector<void*> bufs,
                std::vector<size_t> bytes) {
  emu::Launch l{name, fn, grid, threads, bufs.data(), bytes.data(), static_cast<int>(bufs.size())};
  emu::launch(l);
}

template <typename T>
static void run1(const char* name, emu::KernelFn fn, dim3 grid, dim3 threads, std::vector<T>& out) {
  run(name, fn, grid, threads, {out.data()}, {out.size() * sizeof(T)});
}

// Runs the launch expecting a Fault; returns its message ("" if none was thrown).
template <typename T>
static std::string fault_of(const char* name, emu::KernelFn fn, dim3 grid, dim3 threads, std::vector<T>& out) {
  try {
    run1(name, fn, grid, threads, out);
  } catch (const emu::Fault& f) {
    return f.what();
  }
  return "";
}

static bool contains(const std::string& s, const std::string& part) {
  if (s.find(part) != std::string::npos) return true;
  std::printf("  message \"%s\" lacks \"%s\"\n", s.c_str(), part.c_str());
  return false;
}

static uint32_t group_linear(const KernelCtx& c) {
  const dim3 p = c.threadgroup_position_in_grid, g = c.threadgroups_per_grid;
  return (p.z * g.y + p.y) * g.x + p.x;
}

static uint32_t group_size(const KernelCtx& c) {
  return c.threads_per_threadgroup.x * c.threads_per_threadgroup.y * c.threads_per_threadgroup.z;
}

static uint32_t global_linear(const KernelCtx& c) { return group_linear(c) * group_size(c) + c.thread_index_in_threadgroup; }

// --- simd combines: what the shim's simd_* functions will build on ----------------------------------------

static bool lane_on(uint32_t active, int lane) { return lane >= 0 && lane < 32 && (active >> lane & 1); }

static int32_t in_at(const unsigned char* in, int lane) {
  int32_t v;
  std::memcpy(&v, in + lane * 4, 4);
  return v;
}

static void shuffle_down(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out, size_t) {
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) std::memcpy(out + l * 4, in + (lane_on(active, l + params[l]) ? l + params[l] : l) * 4, 4);
}

static void shuffle_xor(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out, size_t) {
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) std::memcpy(out + l * 4, in + (lane_on(active, l ^ params[l]) ? l ^ params[l] : l) * 4, 4);
}

static void broadcast(const unsigned char* in, const int32_t* params, uint32_t active, unsigned char* out, size_t) {
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) std::memcpy(out + l * 4, in + params[l] * 4, 4);
}

static void sum_i32(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, size_t) {
  int32_t s = 0;
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) s += in_at(in, l);
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) std::memcpy(out + l * 4, &s, 4);
}

// Sums floats in a fixed lane order, so the result is the same whatever order lanes arrived in.
static void sum_f32(const unsigned char* in, const int32_t*, uint32_t active, unsigned char* out, size_t) {
  float s = 0;
  for (int l = 0; l < 32; ++l) {
    float v;
    std::memcpy(&v, in + l * 4, 4);
    if (lane_on(active, l)) s += v;
  }
  for (int l = 0; l < 32; ++l)
    if (lane_on(active, l)) std::memcpy(out + l * 4, &s, 4);
}

template <typename T>
static T simd(T v, int32_t param, emu::SimdCombine combine, Site site = Site::here()) {
  T r;
  emu::simd_exchange(&v, param, &r, sizeof(T), combine, site);
  return r;
}

// --- kernels --------------------------------------------------------------------------------------------------

// Each thread publishes a value in threadgroup memory and reads its neighbour's after a barrier.
static void k_neighbour(const KernelCtx& c) {
  static thread_local int mem[emu::kMaxThreadsPerThreadgroup];
  const uint32_t t = c.thread_index_in_threadgroup, n = group_size(c);
  mem[t] = static_cast<int>(group_linear(c) * 7919 + t);
  emu::barrier(Site::here());
  static_cast<int*>(c.buffers[0])[global_linear(c)] = mem[(t + 1) % n];
}

static void check_neighbour(const std::vector<int>& out, uint32_t groups, uint32_t n) {
  bool ok = true;
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t t = 0; t < n; ++t) ok = ok && out[g * n + t] == static_cast<int>(g * 7919 + (t + 1) % n);
  EXPECT(ok);
}

// Positions: every thread writes its 3-D grid position; checked against the launch geometry.
static void k_positions(const KernelCtx& c) {
  auto* out = static_cast<uint32_t*>(c.buffers[0]) + global_linear(c) * 4;
  const dim3 p = c.thread_position_in_grid;
  out[0] = p.x;
  out[1] = p.y;
  out[2] = p.z;
  out[3] = c.simdgroup_index_in_threadgroup * 32 + c.thread_index_in_simdgroup;
}

// A tree reduction over the whole threadgroup in threadgroup memory (log2(n) barriers), cross-checked with a
// simd-sum-then-barrier reduction.
static void k_reduce(const KernelCtx& c) {
  static thread_local int mem[emu::kMaxThreadsPerThreadgroup];
  static thread_local int partial[32];
  const uint32_t t = c.thread_index_in_threadgroup, n = group_size(c);
  const int v = static_cast<int>(group_linear(c) + t * 3);
  mem[t] = v;
  emu::barrier(Site::here());
  for (uint32_t stride = n / 2; stride > 0; stride /= 2) {
    if (t < stride) mem[t] += mem[t + stride];
    emu::barrier(Site::here());
  }
  const int s = simd(v, 0, sum_i32);
  if (c.thread_index_in_simdgroup == 0) partial[c.simdgroup_index_in_threadgroup] = s;
  emu::barrier(Site::here());
  if (t == 0) {
    int total = 0;
    for (uint32_t i = 0; i < c.simdgroups_per_threadgroup; ++i) total += partial[i];
    auto* out = static_cast<int*>(c.buffers[0]) + group_linear(c) * 2;
    out[0] = mem[0];
    out[1] = total;
  }
}

// Shuffles; with 48 threads per threadgroup, simdgroup 1 has only 16 lanes.
static void k_shuffles(const KernelCtx& c) {
  const int v = static_cast<int>(group_linear(c) * 1000 + c.thread_index_in_threadgroup);
  const uint32_t lanes = std::min(32u, group_size(c) - c.simdgroup_index_in_threadgroup * 32);
  auto* out = static_cast<int*>(c.buffers[0]) + global_linear(c) * 5;
  out[0] = simd(v, 3, shuffle_down);
  out[1] = simd(v, 5, shuffle_xor);
  out[2] = simd(v, lanes > 2 ? 2 : 0, broadcast);
  out[3] = simd(v, 0, sum_i32);
  out[4] = static_cast<int>(c.threads_per_simdgroup);
}

// Reads a neighbour's slot without a barrier: a data race.
static void k_race_tg(const KernelCtx& c) {
  static thread_local int mem[emu::kMaxThreadsPerThreadgroup];
  const uint32_t t = c.thread_index_in_threadgroup;
  mem[t] = static_cast<int>(group_linear(c) * 100 + t + 1);
  emu::barrier(Site::here());  // a barrier elsewhere does not make the read below safe
  mem[t] += 1000;
  static_cast<int*>(c.buffers[0])[global_linear(c)] = mem[(t + 1) % group_size(c)];
}

// Every thread writes the same device location: the last writer wins, so the result depends on the order.
static void k_race_device(const KernelCtx& c) {
  static_cast<int*>(c.buffers[0])[group_linear(c)] = static_cast<int>(c.thread_index_in_threadgroup);
}

static void k_divergent_barrier(const KernelCtx& c) {
  if (c.thread_index_in_threadgroup % 2 == 0) emu::barrier(Site::here());
}

static int g_site_a, g_site_b;
static void k_mismatched_barriers(const KernelCtx& c) {
  if (c.thread_index_in_threadgroup % 2 == 0) {
    g_site_a = __LINE__; emu::barrier(Site::here());
  } else {
    g_site_b = __LINE__; emu::barrier(Site::here());
  }
}

static void k_divergent_simd(const KernelCtx& c) {
  if (c.thread_index_in_simdgroup < 16) simd(1, 0, sum_i32);
}

static int g_simd_a, g_simd_b;
static void k_mismatched_simd(const KernelCtx& c) {
  if (c.thread_index_in_simdgroup % 2) {
    g_simd_a = __LINE__; simd(1, 0, sum_i32);
  } else {
    g_simd_b = __LINE__; simd(1, 0, sum_i32);
  }
}

// Half the threads wait at a simd call, the other half at a barrier: neither can complete.
static int g_simd_line, g_barrier_line;
static void k_simd_vs_barrier(const KernelCtx& c) {
  if (c.thread_index_in_threadgroup < 16) {
    g_simd_line = __LINE__; simd(1, 0, sum_i32);
  } else {
    g_barrier_line = __LINE__; emu::barrier(Site::here());
  }
}

static void k_throws(const KernelCtx& c) {
  emu::barrier(Site::here());
  if (group_linear(c) == 7 && c.thread_index_in_threadgroup == 5) throw std::runtime_error("boom");
  emu::barrier(Site::here());
}

static void k_throws_int(const KernelCtx& c) {
  if (c.thread_index_in_threadgroup == 3) throw 42;
  emu::barrier(Site::here());
}

// A float reduction whose bits must not depend on the number of workers: uses a big local array too.
static void k_float_reduce(const KernelCtx& c) {
  static thread_local float partial[32];
  volatile float scratch[2048];  // exercises the fiber stack
  const uint32_t t = c.thread_index_in_threadgroup;
  float v = 0;
  for (int i = 0; i < 2048; ++i) scratch[i] = 1.0f / static_cast<float>(global_linear(c) + i + 1);
  for (int i = 0; i < 2048; ++i) v += scratch[i];
  v = simd(v, 0, sum_f32);
  if (c.thread_index_in_simdgroup == 0) partial[c.simdgroup_index_in_threadgroup] = v;
  emu::barrier(Site::here());
  if (t == 0) {
    float total = 0;
    for (uint32_t i = 0; i < c.simdgroups_per_threadgroup; ++i) total += partial[i];
    static_cast<float*>(c.buffers[0])[group_linear(c)] = total;
  }
}

// Each fiber keeps its own floating-point rounding mode across switches, as each GPU thread would.
static void k_rounding(const KernelCtx& c) {
  const int mode = c.thread_index_in_threadgroup % 2 ? FE_UPWARD : FE_TONEAREST;
  std::fesetround(mode);
  emu::barrier(Site::here());
  static_cast<int*>(c.buffers[0])[global_linear(c)] = std::fegetround() == mode;
}

// A subnormal product: 0 under flush-to-zero, 1e-40 in IEEE arithmetic.
static void k_subnormal(const KernelCtx& c) {
  volatile float a = 1e-30f;
  const float product = a * 1e-10f;
  static_cast<int*>(c.buffers[0])[global_linear(c)] = product > 0.0f;
}

// A subnormal operand: 1e-40 * 1e30 is 1e-10 in IEEE arithmetic, 0 when subnormal operands read as zero.
static void k_subnormal_operand(const KernelCtx& c) {
  volatile float a = 1e-40f;
  const float product = a * 1e30f;
  static_cast<int*>(c.buffers[0])[global_linear(c)] = product > 0.0f;
}

// Flush-to-zero and denormals-are-zero on the calling thread only (x86-64: MXCSR; arm64: FPCR.FZ), for one scope.
struct CallerFlushesSubnormals {
#if defined(__x86_64__)
  unsigned saved = __builtin_ia32_stmxcsr();
  CallerFlushesSubnormals() { __builtin_ia32_ldmxcsr(saved | 0x8040u); }
  ~CallerFlushesSubnormals() { __builtin_ia32_ldmxcsr(saved); }
#elif defined(__aarch64__)
  uint64_t saved = read();
  static uint64_t read() {
    uint64_t v;
    asm volatile("mrs %0, fpcr" : "=r"(v));
    return v;
  }
  CallerFlushesSubnormals() { asm volatile("msr fpcr, %0" ::"r"(saved | (uint64_t{1} << 24))); }
  ~CallerFlushesSubnormals() { asm volatile("msr fpcr, %0" ::"r"(saved)); }
#endif
};

static void k_empty(const KernelCtx&) {}

static void k_barrier_loop(const KernelCtx& c) {
  const int rounds = static_cast<const int*>(c.buffers[0])[0];
  for (int i = 0; i < rounds; ++i) emu::barrier(Site::here());
}

// --- tests ------------------------------------------------------------------------------------------------------

static void test_barrier() {
  for (int workers : {1, 2, 4}) {
    emu::set_num_workers(workers);
    std::vector<int> out(3000 * 64);
    run1("neighbour", k_neighbour, {3000, 1, 1}, {64, 1, 1}, out);
    check_neighbour(out, 3000, 64);
  }
  std::vector<int> out(40 * 1024);
  run1("neighbour1024", k_neighbour, {40, 1, 1}, {1024, 1, 1}, out);
  check_neighbour(out, 40, 1024);
  std::vector<int> single(10);
  run1("neighbour1", k_neighbour, {10, 1, 1}, {1, 1, 1}, single);
  check_neighbour(single, 10, 1);
}

static void test_positions() {
  const dim3 G{5, 4, 3}, T{4, 4, 2};
  std::vector<uint32_t> out(60 * 32 * 4);
  run1("positions", k_positions, G, T, out);
  bool ok = true;
  for (uint32_t gz = 0; gz < G.z; ++gz)
    for (uint32_t gy = 0; gy < G.y; ++gy)
      for (uint32_t gx = 0; gx < G.x; ++gx)
        for (uint32_t t = 0; t < 32; ++t) {
          const uint32_t* o = &out[(((gz * G.y + gy) * G.x + gx) * 32 + t) * 4];
          ok = ok && o[0] == gx * T.x + t % 4 && o[1] == gy * T.y + t / 4 % 4 && o[2] == gz * T.z + t / 16 && o[3] == t;
        }
  EXPECT(ok);
}

static void test_reduce() {
  for (uint32_t n : {1024u, 256u, 64u}) {
    std::vector<int> out(16 * 2);
    run1("reduce", k_reduce, {16, 1, 1}, {n, 1, 1}, out);
    bool ok = true;
    for (int g = 0; g < 16; ++g) {
      const int expect = g * static_cast<int>(n) + 3 * static_cast<int>(n * (n - 1) / 2);
      ok = ok && out[g * 2] == expect && out[g * 2 + 1] == expect;
    }
    EXPECT(ok);
  }
}

static void check_shuffles(uint32_t n) {
  const uint32_t groups = 3;
  std::vector<int> out(groups * n * 5);
  run1("shuffles", k_shuffles, {groups, 1, 1}, {n, 1, 1}, out);
  bool ok = true;
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t t = 0; t < n; ++t) {
      const uint32_t base = t / 32 * 32, lanes = std::min(32u, n - base), lane = t % 32;
      auto val = [&](uint32_t l) { return static_cast<int>(g * 1000 + base + l); };
      int sum = 0;
      for (uint32_t l = 0; l < lanes; ++l) sum += val(l);
      const int* o = &out[(g * n + t) * 5];
      ok = ok && o[0] == val(lane + 3 < lanes ? lane + 3 : lane);
      ok = ok && o[1] == val((lane ^ 5) < lanes ? lane ^ 5 : lane);
      ok = ok && o[2] == val(lanes > 2 ? 2 : 0) && o[3] == sum && o[4] == 32;
    }
  EXPECT(ok);
}

static void test_shuffles() {
  for (uint32_t n : {48u, 64u, 1u}) check_shuffles(n);
}

static void test_check_mode() {
  emu::set_num_workers(2);
  std::vector<int> out(200 * 64);
  run1("race_tg", k_race_tg, {200, 1, 1}, {64, 1, 1}, out);  // normal mode: runs, whatever it computes
  std::vector<int> dev(50);
  run1("race_device", k_race_device, {50, 1, 1}, {64, 1, 1}, dev);

  emu::set_check_mode(true, 1234);
  EXPECT(emu::check_mode());
  std::string f = fault_of("race_tg", k_race_tg, {200, 1, 1}, {64, 1, 1}, out);
  EXPECT(contains(f, "kernel race_tg: result depends on thread order (data race): buffer 0 differs first at byte"));
  f = fault_of("race_device", k_race_device, {50, 1, 1}, {64, 1, 1}, dev);
  EXPECT(contains(f, "data race"));
  // Race-free kernels pass checking mode and give the normal results.
  std::vector<int> nb(100 * 64);
  run1("neighbour", k_neighbour, {100, 1, 1}, {64, 1, 1}, nb);
  check_neighbour(nb, 100, 64);
  std::vector<int> sh(3 * 48 * 5), sh_check(3 * 48 * 5);
  run1("shuffles", k_shuffles, {3, 1, 1}, {48, 1, 1}, sh_check);
  emu::set_check_mode(false);
  run1("shuffles", k_shuffles, {3, 1, 1}, {48, 1, 1}, sh);
  EXPECT(sh == sh_check);
}

static void test_divergence() {
  emu::set_num_workers(2);
  std::vector<int> out(64);
  std::string f = fault_of("div_barrier", k_divergent_barrier, {1, 1, 1}, {64, 1, 1}, out);
  EXPECT(contains(f, "kernel div_barrier: threadgroup (0,0,0): barrier at test_runtime.cpp:"));
  EXPECT(contains(f, "reached by 32 of 64 threads (threads 1, 3, 5, 7, 9, 11 and 26 more finished without reaching it)"));

  f = fault_of("mismatch", k_mismatched_barriers, {1, 1, 1}, {64, 1, 1}, out);
  EXPECT(contains(f, "test_runtime.cpp:" + std::to_string(g_site_a)));
  EXPECT(contains(f, "test_runtime.cpp:" + std::to_string(g_site_b)));
  EXPECT(contains(f, "different barrier"));

  f = fault_of("div_simd", k_divergent_simd, {2, 1, 1}, {64, 1, 1}, out);
  EXPECT(contains(f, "kernel div_simd: threadgroup ("));
  EXPECT(contains(f, "reached by 16 of 32 lanes of simdgroup 0 (lanes 16..31 finished without reaching it)"));

  f = fault_of("mismatch_simd", k_mismatched_simd, {1, 1, 1}, {32, 1, 1}, out);
  EXPECT(contains(f, "test_runtime.cpp:" + std::to_string(g_simd_a)));
  EXPECT(contains(f, "test_runtime.cpp:" + std::to_string(g_simd_b)));
  EXPECT(contains(f, "different simd function"));

  f = fault_of("simd_vs_barrier", k_simd_vs_barrier, {1, 1, 1}, {32, 1, 1}, out);
  EXPECT(contains(f, "barrier at test_runtime.cpp:" + std::to_string(g_barrier_line) +
                         " reached by 16 of 32 threads (threads 0..15 wait at simd function at test_runtime.cpp:" +
                         std::to_string(g_simd_line) + ")"));

  // The emulator still works after faults.
  std::vector<int> nb(64 * 10);
  run1("neighbour", k_neighbour, {10, 1, 1}, {64, 1, 1}, nb);
  check_neighbour(nb, 10, 64);
}

static void test_exceptions() {
  for (int workers : {1, 2}) {
    emu::set_num_workers(workers);
    std::vector<int> out(1);
    std::string f = fault_of("throws", k_throws, {1000, 1, 1}, {32, 1, 1}, out);
    EXPECT(contains(f, "kernel throws: threadgroup (7,0,0): thread (5,0,0): boom"));
    f = fault_of("throws_int", k_throws_int, {1, 1, 1}, {32, 1, 1}, out);
    EXPECT(contains(f, "thread (3,0,0): unknown exception"));
    std::vector<int> nb(64 * 500);
    run1("neighbour", k_neighbour, {500, 1, 1}, {64, 1, 1}, nb);
    check_neighbour(nb, 500, 64);
  }
  std::vector<int> out(1);
  std::string f = fault_of("bad", k_empty, {1, 1, 1}, {2048, 1, 1}, out);
  EXPECT(contains(f, "bad launch"));
  try {
    emu::barrier(Site::here());
    EXPECT(false);
  } catch (const emu::Fault& e) {
    EXPECT(contains(e.what(), "outside a kernel"));
  }
}

static void test_fp_modes() {
  std::vector<int> out(4 * 64);
  run1("rounding", k_rounding, {4, 1, 1}, {64, 1, 1}, out);
  EXPECT(std::all_of(out.begin(), out.end(), [](int ok) { return ok == 1; }));
  EXPECT(std::fegetround() == FE_TONEAREST);
  // Every GPU thread runs in IEEE modes whatever the host thread's: with the caller flushing subnormals (after the
  // pool's threads started, above), its own threadgroups once flushed them and the pool's did not.
#if defined(__x86_64__) || defined(__aarch64__)
  std::vector<int> kept(16 * 64);
  {
    CallerFlushesSubnormals ftz;
    run1("subnormal", k_subnormal, {16, 1, 1}, {64, 1, 1}, kept);
  }
  EXPECT(std::all_of(kept.begin(), kept.end(), [](int ok) { return ok == 1; }));
  // Flush-to-zero mode: every GPU thread flushes subnormal results and operands, whatever the calling thread does,
  // and the mode's end restores IEEE arithmetic.
  std::vector<int> flushed(16 * 64), operand(16 * 64);
  emu::set_flush_subnormals(true);
  run1("subnormal", k_subnormal, {16, 1, 1}, {64, 1, 1}, flushed);
  run1("subnormal_operand", k_subnormal_operand, {16, 1, 1}, {64, 1, 1}, operand);
  emu::set_flush_subnormals(false);
  EXPECT(std::all_of(flushed.begin(), flushed.end(), [](int ok) { return ok == 0; }));
  EXPECT(std::all_of(operand.begin(), operand.end(), [](int ok) { return ok == 0; }));
  volatile float tiny = 1e-30f;
  EXPECT(tiny * 1e-10f > 0.0f);  // the caller's own arithmetic was never touched
  run1("subnormal", k_subnormal, {16, 1, 1}, {64, 1, 1}, kept);
  run1("subnormal_operand", k_subnormal_operand, {16, 1, 1}, {64, 1, 1}, operand);
  EXPECT(std::all_of(kept.begin(), kept.end(), [](int ok) { return ok == 1; }));
  EXPECT(std::all_of(operand.begin(), operand.end(), [](int ok) { return ok == 1; }));
#endif
}

static void test_determinism() {
  std::vector<std::vector<float>> results;
  for (int workers : {1, 2, 7}) {
    emu::set_num_workers(workers);
    std::vector<float> out(300);
    run1("float_reduce", k_float_reduce, {300, 1, 1}, {96, 1, 1}, out);
    results.push_back(out);
  }
  EXPECT(std::memcmp(results[0].data(), results[1].data(), 300 * sizeof(float)) == 0);
  EXPECT(std::memcmp(results[0].data(), results[2].data(), 300 * sizeof(float)) == 0);
}

static void test_registry() {
  auto* e = emu::find_kernel("test.neighbour");
  EXPECT(e && e->fast == k_neighbour && e->checked == k_reduce);
  EXPECT(emu::find_kernel("test.missing") == nullptr);
  const auto names = emu::kernel_names();
  EXPECT(names.size() == 2 && names[0] == "test.empty" && names[1] == "test.neighbour");
}
// Registered before main; the duplicate must be reported on stderr and ignored.
static emu::Registrar reg_a("test.neighbour", k_neighbour, false);
static emu::Registrar reg_b("test.neighbour", k_reduce, true);
static emu::Registrar reg_c("test.empty", k_empty, false);
static emu::Registrar reg_dup("test.neighbour", k_empty, false);

// --- benchmarks ---------------------------------------------------------------------------------------------

namespace bench {
emu::detail::Context home, fiber;
long switches_left;
void entry(void*) {
  emu::detail::context_started(fiber);
  while (--switches_left > 0) emu::detail::context_switch(fiber, home);
  emu::detail::context_exit(fiber, home);
}
}  // namespace bench

static double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void benchmark() {
  using namespace emu::detail;
  const bool fast_build = !EMU_ASAN && !EMU_PORTABLE_FIBERS;

  Stack stack = stack_alloc(kFiberStackBytes);
  const long iterations = 1000000;
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    bench::switches_left = iterations;
    context_make(bench::fiber, stack, bench::entry, nullptr, FpMode::kIeee);
    const double t0 = now_ns();
    while (bench::switches_left > 0) context_switch(bench::home, bench::fiber);
    best = std::min(best, (now_ns() - t0) / (2.0 * iterations));
  }
  stack_free(stack);
  std::printf("context switch: %.1f ns\n", best);
  if (fast_build) EXPECT(best < 100);

  emu::set_num_workers(2);
  int rounds = 2000;
  std::vector<int> arg{rounds};
  double t0 = now_ns();
  run1("barrier_loop", k_barrier_loop, {1, 1, 1}, {1024, 1, 1}, arg);
  std::printf("barrier round trip: %.1f ns per thread (1024 threads)\n", (now_ns() - t0) / (rounds * 1024.0));

  std::vector<int> none(1);
  double launch_best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const int launches = 2000;
    t0 = now_ns();
    for (int i = 0; i < launches; ++i) run1("empty", k_empty, {1, 1, 1}, {32, 1, 1}, none);
    launch_best = std::min(launch_best, (now_ns() - t0) / launches / 1000.0);
  }
  std::printf("launch of 1x32 threads: %.2f us\n", launch_best);
  if (fast_build) EXPECT(launch_best < 50);

  t0 = now_ns();
  const int launches = 200;
  for (int i = 0; i < launches; ++i) run1("empty", k_empty, {64, 1, 1}, {256, 1, 1}, none);
  std::printf("launch of 64x256 threads: %.2f us\n", (now_ns() - t0) / launches / 1000.0);
}

int main() {
  std::printf("fibers: %s%s\n", EMU_PORTABLE_FIBERS ? "ucontext" : "assembly", EMU_ASAN ? " (ASan)" : "");
  test_registry();
  test_barrier();
  test_positions();
  test_reduce();
  test_shuffles();
  test_check_mode();
  test_divergence();
  test_exceptions();
  test_fp_modes();
  test_determinism();
  benchmark();
  if (g_failures) {
    std::printf("%d FAILED\n", g_failures);
    return 1;
  }
  std::printf("all emulator runtime tests passed\n");
  return 0;
}
