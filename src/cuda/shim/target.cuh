// CUDA's parameters of the shared shim headers (src/shim/params.h says what each means): namespace cu_msl, and
// functions for host and device, always inlined: they are one or two instructions each.
#pragma once
#define MTLINV_HD __host__ __device__ __forceinline__
#define MTLINV_SHIM_NS cu_msl
#define MTLINV_SHIM_FN MTLINV_HD
// The element loops run 2 to 4 times: unrolled, every element of a vector stays in a register. Only in the device
// pass: the host compiler does not know the pragma (and warns under -Wall).
#if defined(__CUDA_ARCH__)
#define MTLINV_SHIM_UNROLL _Pragma("unroll")
#else
#define MTLINV_SHIM_UNROLL
#endif
