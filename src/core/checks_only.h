// A thread's checks-only mode: an op called in it runs its argument checks and then stops, before it allocates
// a result, launches a kernel or reads an operand's memory, by throwing ChecksPassed. The Python ops use it to
// check the shapes of arguments they must copy first (a broadcast, strided or byte-swapped array) before the
// copy, with the same checks and messages as for a contiguous array: the copy of a view of 2^32 rows would fail
// for memory (or take gigabytes) before the op could refuse its shape. The operands of such a call are
// Tensor::shape_only tensors, which have a shape and no memory.
#pragma once

namespace mtlinv {

// Not an mtlinv::Error (nor a std::exception): no catch of a real error may take it for one.
struct ChecksPassed {};

bool checks_only();
// Throws ChecksPassed in checks-only mode: called where an op's work begins (Tensor::empty, run_plan, and every
// access to a tensor's memory).
void stop_if_checks_only();

// Checks-only mode on the calling thread for the scope's life.
class ChecksOnlyScope {
 public:
  ChecksOnlyScope();
  ~ChecksOnlyScope();
  ChecksOnlyScope(const ChecksOnlyScope&) = delete;
  ChecksOnlyScope& operator=(const ChecksOnlyScope&) = delete;

 private:
  bool previous_;
};

}  // namespace mtlinv
