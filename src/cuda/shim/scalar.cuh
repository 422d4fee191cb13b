// MSL scalar types on CUDA: the short integer names, and the conversions of the 16-bit floats `half` (IEEE
// binary16, over __half's) and `bfloat` (over __nv_bfloat16's), over which src/shim/scalar.h defines the types
// themselves, their operators and as_type. CUDA's own __half operators would give the same bits as the shared
// ones, which compute in float and round once; going through float keeps one code path for both formats, both
// targets and the mixed-type rules.
//
// Everything lives in namespace cu_msl; cuda_shim.cuh brings the names into the kernels' namespace, because CUDA
// declares its own `float4`, `uint2`, ... (and, unless CUDA_NO_HALF, `half`) at global scope.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "target.cuh"

namespace cu_msl {
namespace detail {

// Conversions through CUDA's intrinsics: cvt.rn on the device (sm_90 has it for both formats), the same rounding
// in software on the host.
struct binary16 {
  static MTLINV_HD uint16_t from_float(float f) { return __half_as_ushort(__float2half_rn(f)); }
  static MTLINV_HD float to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
};
struct bfloat16 {
  static MTLINV_HD uint16_t from_float(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
  static MTLINV_HD float to_float(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
};

}  // namespace detail
}  // namespace cu_msl

#include "../../shim/scalar.h"

namespace cu_msl {
MTLINV_SHIM_INTEGER_NAMES
}  // namespace cu_msl
