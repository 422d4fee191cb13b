// Plans: pure functions from (op, shapes, dtypes, limit, device caps) to the kernels to run. They never touch a
// device, so routing is unit-tested without running a kernel, and every backend makes the same decision.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "backend.h"
#include "errors.h"

namespace mtlinv {

// A buffer of a launch: an operand of the op (index into the op's tensor list) or a scratch buffer of the plan;
// `none` in a slot the kernel does not take.
struct PlanBuffer {
  enum Kind : uint8_t { none, operand, scratch } kind = none;
  int index = 0;
  static PlanBuffer op(int i) { return {operand, i}; }
  static PlanBuffer tmp(int i) { return {scratch, i}; }
};

// One launch of a plan: the dispatch itself (kernel, grid, threads and the argument struct in slot 0), with its
// other buffers named by their role until run_plan binds them.
struct PlanLaunch : Dispatch {
  // buffers[s] is the buffer of slot s, [[buffer(s)]]: bound by the name of the slot, which the kernel's signature
  // writes too (the family's `enum XSlot` in metal/*_args.h). buffers[0] stays `none`: slot 0 is the argument struct.
  std::vector<PlanBuffer> buffers;

  void bind(uint32_t slot, PlanBuffer b) {
    if (slot == 0) throw KernelError("internal: a plan binds a buffer to slot 0, the argument struct's");
    if (buffers.size() <= slot) buffers.resize(slot + 1);
    buffers[slot] = b;
  }
  // Binds the op's operands, in the order of its tensor list, to `slots` (a family's XSlot names).
  template <class Slot>
  void bind_operands(std::initializer_list<Slot> slots) {
    int operand = 0;
    for (Slot slot : slots) bind(slot, PlanBuffer::op(operand++));
  }

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
