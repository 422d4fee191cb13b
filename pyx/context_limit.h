// A Python batch_invariant scope carried into one C++ call (pyx/limit.pxi). Python's scopes live in a context
// variable, so that each thread and asyncio task has its own; the C++ ops read the calling thread's innermost
// LimitScope (src/core/limit.h). An op that reads the limit opens a ContextLimit on its calling context's value for
// the length of its C++ call, so a scope never outlives the call on the thread, and a task switch between calls
// cannot hand one task's scope to another.
#pragma once
#include <optional>

#include "../src/core/limit.h"

namespace mtlinv_py {

// Default-constructible, since Cython declares C++ locals at the top of a function; its destructor, at the
// function's end (exceptions included), closes the scope.
class ContextLimit {
 public:
  // limit < 0: the context has no scope, and the thread's own scopes and the process value apply as they are.
  void open(int limit) {
    if (limit >= 0) scope_.emplace(limit);
  }

 private:
  std::optional<mtlinv::LimitScope> scope_;
};

}  // namespace mtlinv_py
