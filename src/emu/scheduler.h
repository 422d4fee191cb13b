// Runs one threadgroup: its GPU threads as fibers on the calling OS thread, with barriers and simd exchanges.
#pragma once
#include <cstdint>

#include "runtime.h"

namespace emu::detail {

// The order in which a threadgroup resumes its runnable fibers in each scheduling round. kReverseRandom uses
// the same random permutations as kRandom (same seed), each walked backwards: any read that raced a write
// in one order sees the other outcome in the other.
enum class Order { kNatural, kRandom, kReverseRandom };

// Runs threadgroup `group` (linear index into l.threadgroups, x fastest) of `l` to completion on the calling
// OS thread. Throws Fault, prefixed with the kernel name and the threadgroup position, when a kernel thread
// throws or the threads diverge (a barrier or simd call that not all of them reach).
void run_threadgroup(const Launch& l, uint64_t group, Order order, uint64_t seed);

// True while the calling OS thread runs a threadgroup (so a kernel is calling).
bool in_kernel();

}  // namespace emu::detail
