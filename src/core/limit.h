// The batch-invariance limit: calls with M <= limit rows (or queries) take the canonical kernels. 0 (the default)
// still sends M == 1 to the canonical kernel; only rows 2..limit are affected by the setting.
//
// Two levels. The process value: one std::atomic<int>, initialised from MTLINV_BATCH_INVARIANT_LIMIT on first use
// and changed by set_limit, for every thread. Scopes: a thread opens one (LimitScope, or push_limit/pop_limit) to
// override the limit for itself alone until it closes it; scopes nest, and closing one restores exactly what the
// thread saw before it opened. An op reads the innermost scope of its thread, else the process value, so threads
// serving different verification widths never see each other's scopes, and no scope changes the process value.
#pragma once

namespace mtlinv {

// The first call of any of these reads MTLINV_BATCH_INVARIANT_LIMIT (unset or empty: 0). Each throws
// InvalidArgument while that value is unparsable or beyond 2^30, so a program fails loudly instead of running with a
// silent 0.

// The calling thread's limit: its innermost scope, else the process value.
int get_limit();
// Sets the process value and returns the previous one; throws InvalidArgument for n outside [0, 2^30]. Threads
// inside a scope keep the scope's value until it closes.
int set_limit(int n);
// Only reads the variable: the Python package calls it on import.
void init_limit_from_env();
// True when a call with `rows` rows must take the canonical kernel under `limit`.
inline bool use_canonical(long long rows, int limit) { return rows <= 1 || rows <= limit; }

// A scope of the calling thread: its ops use `limit` (in [0, 2^30], else InvalidArgument) from construction until
// destruction, which restores what the thread saw before. Scopes must end in the reverse order of their start, on
// the thread that started them, as a guard on the stack does.
class LimitScope {
 public:
  explicit LimitScope(int limit);
  ~LimitScope();
  LimitScope(const LimitScope&) = delete;
  LimitScope& operator=(const LimitScope&) = delete;

 private:
  int saved_;  // the thread's scope before this one (or none)
};

// The same scopes as a pair of calls, for the C API: push_limit opens one on the calling thread (limit in
// [0, 2^30], else InvalidArgument), pop_limit closes the innermost one that push_limit opened and throws
// InvalidArgument when the thread has none open.
void push_limit(int limit);
void pop_limit();

}  // namespace mtlinv
