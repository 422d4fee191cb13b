// How much of a later projection's weights an op's small kernel asks L2 for (metal/common.h, prefetch_ahead).
#pragma once
#include <algorithm>
#include <cstdint>

#include "../backend.h"
#include "../tensor.h"

namespace mtlinv {

// 16-byte words from the start of `weights`: up to the device's l2_ahead_bytes, none without weights or where they
// do not start on a 16-byte boundary of their storage.
inline uint32_t ahead_words(const Tensor* weights, const DeviceCaps& caps) {
  if (weights == nullptr || weights->offset % 16 != 0) return 0;
  const uint64_t bytes = std::min<uint64_t>(weights->nbytes(), caps.l2_ahead_bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(bytes / 16, UINT32_MAX));
}

}  // namespace mtlinv
