// Plans: pure functions from (op, shapes, dtypes, limit, device caps) to the kernels to run. They never touch a
// device, so routing is unit-tested without running a kernel, and every backend makes the same decision.
#pragma once
#include <cstdint>
#include <cstring>
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

// One launch of a plan: the dispatch itself (kernel, grid, threads and the argument struct, [[buffer(0)]]), with its
// other buffers named by their role until run_plan binds them.
struct PlanLaunch : Dispatch {
  std::vector<PlanBuffer> buffers;  // [[buffer(1)]], [[buffer(2)]], ...

  template <class Args>
  void set_args(const Args& a) {
    bindings.assign(1, Binding{});
    bindings[0].bytes.resize(sizeof(Args));
    std::memcpy(bindings[0].bytes.data(), &a, sizeof(Args));
  }
  const std::vector<uint8_t>& args() const { return bindings.at(0).bytes; }
};

// Threadgroups needed to cover `n` items `per` at a time (grid sizes are uint32 on every target).
inline uint32_t ceil_div(int64_t n, int64_t per) { return static_cast<uint32_t>((n + per - 1) / per); }

struct Plan {
  std::vector<PlanLaunch> launches;   // run in order
  std::vector<size_t> scratch_bytes;  // float32 partials and the like, allocated per call
  bool canonical = true;              // false: the throughput path (free to depend on M)
};

}  // namespace mtlinv
