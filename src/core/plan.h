// Plans: pure functions from (op, shapes, dtypes, limit, device caps) to the kernels to run. They never touch a
// device, so routing is unit-tested without running a kernel, and every backend makes the same decision.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend.h"

namespace mtlinv {

// A buffer of a launch: an operand of the op (index into the op's tensor list) or a scratch buffer of the plan.
struct PlanBuffer {
  enum Kind : uint8_t { operand, scratch } kind = operand;
  int index = 0;
  static PlanBuffer op(int i) { return {operand, i}; }
  static PlanBuffer tmp(int i) { return {scratch, i}; }
};

struct PlanLaunch {
  std::string kernel;
  Dim3 threadgroups;
  Dim3 threads;
  std::vector<uint8_t> args;          // the argument struct, [[buffer(0)]]
  std::vector<PlanBuffer> buffers;    // [[buffer(1)]], [[buffer(2)]], ...
};

// Threadgroups needed to cover `n` items `per` at a time (grid sizes are uint32 on every target).
inline uint32_t ceil_div(int64_t n, int64_t per) { return static_cast<uint32_t>((n + per - 1) / per); }

struct Plan {
  std::vector<PlanLaunch> launches;   // run in order
  std::vector<size_t> scratch_bytes;  // float32 partials and the like, allocated per call
  bool canonical = true;              // false: the throughput path (free to depend on M)
};

}  // namespace mtlinv
