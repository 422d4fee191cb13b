#include "limit.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>

#include "errors.h"

namespace mtlinv {

namespace {

std::atomic<int> g_limit{0};
std::once_flag g_env_read;
std::string g_env_error;  // written once, under g_env_read

void read_env() {
  const char* raw = std::getenv("MTLINV_BATCH_INVARIANT_LIMIT");
  if (raw == nullptr || *raw == '\0') return;
  const std::string text(raw);
  // Digits only: strtol alone would also take leading blanks and a '+' sign.
  if (text.find_first_not_of("0123456789") != std::string::npos) {
    g_env_error = "MTLINV_BATCH_INVARIANT_LIMIT='" + text + "' is not a non-negative integer";
    return;
  }
  errno = 0;
  const long long value = std::strtoll(raw, nullptr, 10);
  if (errno != 0 || value > 1 << 30) {
    g_env_error = "MTLINV_BATCH_INVARIANT_LIMIT='" + text + "' is beyond the largest limit, 2^30";
    return;
  }
  g_limit.store(static_cast<int>(value), std::memory_order_relaxed);
}

// Every entry reads the variable first (once per process), so the C and C++ libraries honour it as the Python
// package does, and a bad value is the error of every use of the limit rather than a silent 0.
void require_env_read() {
  std::call_once(g_env_read, read_env);
  if (!g_env_error.empty()) throw InvalidArgument(g_env_error);
}

}  // namespace

int get_limit() {
  require_env_read();
  return g_limit.load(std::memory_order_relaxed);
}

int set_limit(int n) {
  require_env_read();
  if (n < 0 || n > 1 << 30) throw InvalidArgument("set_limit: limit must be in [0, 2^30], got ", n);
  return g_limit.exchange(n);
}

void init_limit_from_env() { require_env_read(); }

}  // namespace mtlinv
