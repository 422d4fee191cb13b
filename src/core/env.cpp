#include "env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "errors.h"

namespace mtlinv {

bool env_switch(const char* name, bool unset) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return unset;
  if (std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  throw InvalidArgument(name, "='", value, "' is not 0 or 1");
}

std::optional<uint64_t> env_count(const char* name, uint64_t max, const char* largest) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  // Digits only: strtoull alone would also take leading blanks, a sign, and a 0x prefix.
  if (std::string(value).find_first_not_of("0123456789") != std::string::npos) {
    throw InvalidArgument(name, "='", value, "' is not a non-negative integer");
  }
  errno = 0;
  const unsigned long long n = std::strtoull(value, nullptr, 10);
  if (errno != 0 || n > max) throw InvalidArgument(name, "='", value, "' is beyond ", largest);
  return n;
}

}  // namespace mtlinv
