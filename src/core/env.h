// The library's environment variables, all read one way: a switch is "0" or "1" (unset or empty: its default), a
// count is decimal digits. Anything else is an InvalidArgument naming the variable and its value, raised by the
// first use that reads it, never a silent default ("false" or "yes" for a switch would otherwise mean one thing here
// and another there).
#pragma once
#include <cstdint>
#include <optional>

namespace mtlinv {

bool env_switch(const char* name, bool unset);

// The value of a count in [0, max], or nullopt where the variable is unset or empty. `largest` says what max is, for
// the message: "the largest limit, 2^30".
std::optional<uint64_t> env_count(const char* name, uint64_t max, const char* largest);

}  // namespace mtlinv
