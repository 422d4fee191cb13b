#include "limit.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "env.h"
#include "errors.h"

namespace mtlinv {

namespace {

constexpr int kMaxLimit = 1 << 30;
constexpr int kNoScope = -1;  // below every limit, so a thread's scope is one int that every op reads

std::atomic<int> g_limit{0};
std::once_flag g_env_read;
std::string g_env_error;  // written once, under g_env_read

// The calling thread's innermost scope, or kNoScope.
thread_local int t_scope = kNoScope;
// What each open push_limit saved, innermost last: the C API's scopes have no object of their own to hold it.
thread_local std::vector<int> t_pushed;

void read_env() {
  try {
    const auto n = env_count("MTLINV_BATCH_INVARIANT_LIMIT", kMaxLimit, "the largest limit, 2^30");
    if (n) g_limit.store(static_cast<int>(*n), std::memory_order_relaxed);
  } catch (const InvalidArgument& bad) {
    g_env_error = bad.what();
  }
}

// Every entry reads the variable first (once per process), so the C and C++ libraries honour it as the Python
// package does, and a bad value is the error of every use of the limit rather than a silent 0.
void require_env_read() {
  std::call_once(g_env_read, read_env);
  if (!g_env_error.empty()) throw InvalidArgument(g_env_error);
}

void check_limit(const char* fn, int n) {
  require_env_read();
  if (n < 0 || n > kMaxLimit) throw InvalidArgument(fn, ": limit must be in [0, 2^30], got ", n);
}

}  // namespace

int get_limit() {
  require_env_read();
  return t_scope != kNoScope ? t_scope : g_limit.load(std::memory_order_relaxed);
}

int set_limit(int n) {
  check_limit("set_limit", n);
  return g_limit.exchange(n);
}

void init_limit_from_env() { require_env_read(); }

LimitScope::LimitScope(int limit) : saved_(t_scope) {
  check_limit("LimitScope", limit);
  t_scope = limit;
}

LimitScope::~LimitScope() { t_scope = saved_; }

void push_limit(int limit) {
  check_limit("push_limit", limit);
  t_pushed.push_back(t_scope);
  t_scope = limit;
}

void pop_limit() {
  if (t_pushed.empty()) throw InvalidArgument("pop_limit: no limit scope is open on this thread");
  t_scope = t_pushed.back();
  t_pushed.pop_back();
}

}  // namespace mtlinv
