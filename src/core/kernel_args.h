// The argument structs of metal/args.h, seen from the host, with the layout checks that keep both sides equal.
#pragma once
#include <cstdint>

#include "../../metal/args.h"
#include "../../metal/gemv_args.h"

namespace mtlinv {

static_assert(sizeof(RmsNormArgs) == 20, "RmsNormArgs layout must match metal/args.h on every target");

}  // namespace mtlinv

namespace mtlinv {
static_assert(sizeof(GemvArgs) == 40, "GemvArgs layout must match metal/gemv_args.h on every target");
}  // namespace mtlinv

namespace mtlinv {
static_assert(sizeof(DecoderOpArgs) == 44, "DecoderOpArgs layout must match metal/args.h on every target");
}  // namespace mtlinv
