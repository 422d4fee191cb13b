#include "checks_only.h"

namespace mtlinv {

namespace {
thread_local bool checking_only = false;
}

bool checks_only() { return checking_only; }

void stop_if_checks_only() {
  if (checking_only) throw ChecksPassed{};
}

ChecksOnlyScope::ChecksOnlyScope() : previous_(checking_only) { checking_only = true; }

ChecksOnlyScope::~ChecksOnlyScope() { checking_only = previous_; }

}  // namespace mtlinv
