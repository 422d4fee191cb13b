#pragma once
#include "../tensor.h"

namespace mtlinv {

// (sdpa: declarations land here)

}  // namespace mtlinv
