// What a header shared by the kernels and the host needs: fixed-width integers, and MTLINV_SHARED, which declares a
// constant both read (program-scope `constant` data in MSL, and in the emulator's and CUDA's translations of it;
// an inline constexpr in the host's C++). A fact of a kernel's geometry that the plans size grids by is written
// once so, in the family's *_args.h, instead of mirrored by hand on each side.
#pragma once
#ifdef __METAL_VERSION__
#define MTLINV_SHARED constant constexpr
#else
#include <cstdint>
#define MTLINV_SHARED inline constexpr
#endif
