// The emulator's parameters of the shared shim headers (src/shim/params.h says what each means): namespace metal
// and plain C++ functions. No unroll hint: `#pragma unroll` is CUDA's (g++ warns on it), and the host compiler
// unrolls the 2- to 4-trip element loops by itself.
#pragma once
#define MTLINV_SHIM_NS metal
#define MTLINV_SHIM_FN
#define MTLINV_SHIM_UNROLL
