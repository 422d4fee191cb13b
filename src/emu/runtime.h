// The emulator's runtime: runs a kernel grid on the CPU with real SIMT semantics.
//
// Every GPU thread of a threadgroup is a fiber with its own stack; all fibers of one threadgroup run on one OS
// thread (so `static thread_local` threadgroup arrays emitted by the pre-pass are shared by exactly the fibers
// of one threadgroup), and threadgroups run in parallel on a pool of OS threads. A fiber runs until it reaches
// a barrier or a simd_* call, then yields to the threadgroup's scheduler; results never depend on the order in
// which fibers run (checking mode verifies this).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace emu {

struct dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// What a kernel sees: its buffers and its thread's position. The pre-pass rewrites each kernel's parameter
// list into bindings from this struct (see tools/msl2cpp.py), so every kernel has the signature KernelFn.
struct KernelCtx {
  void* const* buffers;          // buffer(i) base address
  const size_t* buffer_bytes;    // buffer(i) size in bytes
  int num_buffers;
  const char* kernel_name;
  dim3 threadgroup_position_in_grid;
  dim3 threadgroups_per_grid;
  dim3 thread_position_in_threadgroup;
  dim3 threads_per_threadgroup;
  dim3 thread_position_in_grid;
  uint32_t thread_index_in_threadgroup;
  uint32_t simdgroup_index_in_threadgroup;
  uint32_t thread_index_in_simdgroup;
  uint32_t simdgroups_per_threadgroup;
  uint32_t threads_per_simdgroup;  // always 32
};

using KernelFn = void (*)(const KernelCtx&);

constexpr uint32_t kSimdWidth = 32;
constexpr uint32_t kMaxThreadsPerThreadgroup = 1024;

// A kernel fault: out-of-range access, divergent barrier or simd call, race found by checking mode, or an
// exception thrown inside a kernel. The message names the kernel and the offending values.
struct Fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a barrier or simd_* call sits in the kernel source; all threads of a group must meet at the same site.
struct Site {
  const char* file;
  int line;
  static constexpr Site here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return Site{file, line};
  }
};

// --- called from kernel code (through the shim), on a fiber -------------------------------------------------

// threadgroup_barrier: blocks until every thread of the threadgroup reaches a barrier at the same site.
void barrier(Site site);

// One simdgroup-wide exchange, the primitive under every simd_* function. Each lane deposits `bytes` bytes at
// `in` (at most kMaxSimdBytes) and an int `param` (a lane index, a shuffle delta, ...), then waits until every
// lane of its simdgroup has arrived at the same site with the same `combine`. The last lane to arrive calls
// `combine` once with all inputs; then each lane receives its own `bytes` bytes of output at `out`.
// Lanes of a partial last simdgroup (threadgroup size not a multiple of 32) are absent: `active` says which.
constexpr size_t kMaxSimdBytes = 32;
using SimdCombine = void (*)(const unsigned char* in /* [32][bytes] */, const int32_t* params /* [32] */,
                             uint32_t active /* bit i = lane i present */, unsigned char* out /* [32][bytes] */,
                             size_t bytes);
void simd_exchange(const void* in, int32_t param, void* out, size_t bytes, SimdCombine combine, Site site);

// --- called from the host ---------------------------------------------------------------------------------

struct Launch {
  const char* kernel_name;
  KernelFn fn;
  dim3 threadgroups;           // threadgroups to run: the whole grid, or a piece of it (below)
  dim3 threads;                // threads per threadgroup (product <= kMaxThreadsPerThreadgroup)
  void* const* buffers;
  const size_t* buffer_bytes;
  int num_buffers;
  // A piece of a larger grid (src/core/grid_pieces.h): its first threadgroup, and the whole grid the kernel sees
  // as threadgroups_per_grid ({0, 0, 0}: `threadgroups` is the whole grid).
  dim3 origin{0, 0, 0};
  dim3 grid{0, 0, 0};
};

// Runs the launch's threadgroups and returns when they are done. Throws Fault on any kernel fault (other
// threadgroups are stopped; the buffers' contents are then unspecified).
void launch(const Launch& l);

// Checking mode: fibers run in a seeded random order, every launch runs twice (random order, then the reverse
// of each round's order) from the same buffer contents and the results must be identical bit for bit, else a
// Fault names the kernel, the buffer and the first differing byte (a data race). Off by default.
void set_check_mode(bool on, uint64_t seed = 0);
bool check_mode();

// Flush-to-zero mode: every GPU thread computes with float32 subnormals flushed to zero, keeping their sign, as
// operands (read as zero) and as results (replaced by zero) of its arithmetic, math functions and conversions to and
// from bfloat: the Metal Shading Language lets a GPU do that, and a canonical kernel's row must not depend on M on
// such a GPU either. Half values are never flushed (no float32 subnormal converts to a nonzero half, nor a half to
// a float32 subnormal). Off by default (the emulator backend: MTLINV_EMU_FTZ=1). Applies to launches that start
// after the call.
void set_flush_subnormals(bool on);
bool flush_subnormals();

// Size of the OS thread pool (n <= 0, and by default: hardware concurrency).
void set_num_workers(int n);
int num_workers();

// --- the kernel registry ------------------------------------------------------------------------------------
// Filled at static-initialisation time by MTLINV_KERNEL in the generated kernel sources. Each kernel is built
// twice: `fast` (raw pointers) and `checked` (every device load/store bounds-checked); checking mode and debug
// builds use `checked`.
struct KernelEntry {
  KernelFn fast = nullptr;
  KernelFn checked = nullptr;
};
struct Registrar {
  Registrar(const char* name, KernelFn fn, bool checked);
};
const KernelEntry* find_kernel(const std::string& name);  // nullptr if not registered
std::vector<std::string> kernel_names();                  // sorted

}  // namespace emu
