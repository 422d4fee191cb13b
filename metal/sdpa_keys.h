// Which keys a query sees, shared by the sdpa kernels (metal/sdpa.metal, metal/sdpa_mma.metal).
#pragma once
#include "common.h"
#include "sdpa_args.h"

// The last key query i of the block sees (the op guarantees q_len <= kv_len for causal attention).
inline uint sdpa_last_key(constant SdpaArgs& args, uint i) {
  return args.causal != 0 ? args.kv_len - args.q_len + i : args.kv_len - 1;
}
