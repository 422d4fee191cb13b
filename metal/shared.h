// What a header shared by the kernels and the host needs: fixed-width integers, and MTLINV_SHARED, which declares a
// constant both read (program-scope `constant` data in MSL, and in the emulator's and CUDA's translations of it;
// an inline constexpr in the host's C++). A fact of a kernel's geometry that the plans size grids by is written
// once so, in the family's *_args.h, instead of mirrored by hand on each side.
//
// So are the buffer slots: beside each argument struct `XArgs`, an `enum XSlot` gives every buffer a kernel of the
// family takes one slot number, `X_SLOT_ARGS` (0, the struct itself) first. The kernels write the names in
// `[[buffer(...)]]` (an enumerator is the integral constant expression the attribute takes, as in Apple's samples);
// the plans bind buffers to the same names (PlanLaunch::bind); the backends bind slot i to [[buffer(i)]]. A role has
// one slot across its family, so a kernel that does not take it leaves that slot empty.
#pragma once
#ifdef __METAL_VERSION__
#define MTLINV_SHARED constant constexpr
#else
#include <cstdint>
#define MTLINV_SHARED inline constexpr
#endif
