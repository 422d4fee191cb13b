#include "limit.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "errors.h"

namespace mtlinv {

namespace {
std::atomic<int> g_limit{0};
}

int get_limit() { return g_limit.load(std::memory_order_relaxed); }

int set_limit(int n) {
  if (n < 0) throw InvalidArgument("set_limit: limit must be >= 0, got ", n);
  return g_limit.exchange(n);
}

void init_limit_from_env() {
  const char* raw = std::getenv("MTLINV_BATCH_INVARIANT_LIMIT");
  if (raw == nullptr || *raw == '\0') return;
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(raw, &end, 10);
  if (errno != 0 || end == raw || *end != '\0' || value < 0 || value > 1 << 30) {
    throw InvalidArgument("MTLINV_BATCH_INVARIANT_LIMIT='", raw, "' is not a non-negative integer");
  }
  set_limit(static_cast<int>(value));
}

}  // namespace mtlinv
