// The emulator's metal_stdlib: what the kernels under metal/ use of MSL, in C++17, for the code that
// tools/msl2cpp.py generates (it includes this header first, then the kernels inside namespace
// MTLINV_VARIANT_NS: emu_fast, or emu_checked when built with -DEMU_CHECKED=1).
//
//   shim/scalar.h  uint, ushort, uchar, half, bfloat, as_type
//   shim/vec.h     float4, half2, packed_float3, ... and their operators, dot, all, any
//   shim/math.h    fma, exp, sqrt, rsqrt, max, clamp, select, isnan, ...; numeric_limits; HALF_MAX, M_PI_F, ...
//   shim/simd.h    mem_flags, threadgroup_barrier, simdgroup_barrier, simd_* (over emu::simd_exchange)
//   shim/device.h  EMU_DPTR, emu::checked_ptr, emu::bind_device / bind_constant / attr, MTLINV_KERNEL
// scalar.h, vec.h and math.h hold only what is the emulator's own (the 16-bit conversions, F16C widening, the C
// library bindings) and include the rest from src/shim/, the target-independent part shared with the CUDA shim.
//
// Types live at global scope. Functions live in namespace metal (with metal::precise and metal::fast) and are
// brought into emu_fast and emu_checked by using-declarations rather than declared globally: the C library and
// libstdc++'s <math.h>/<stdlib.h> wrappers put their own abs, sqrt, ... at global scope, and a using-declaration
// in the kernel's namespace hides those instead of competing with them in overload resolution.
//
// The MSL address-space keywords become macros at the end of this header. They break system headers and
// Objective-C, so everything this header needs is included before they are defined, and only generated kernel
// sources (and their tests) may include it.
#pragma once
#if defined(__OBJC__)
#error "msl_shim.h defines `device`, `thread`, ... as macros; keep it out of Objective-C(++) translation units"
#endif

#include "runtime.h"
#include "shim/device.h"
#include "shim/math.h"
#include "shim/scalar.h"
#include "shim/simd.h"
#include "shim/vec.h"
#include "../shim/names.h"

#define EMU_SHIM_USING(name) using ::metal::name;

namespace metal {
// On the CPU the precise and fast variants are both the precise functions.
namespace precise {
MTLINV_SHIM_MATH_NAMES(EMU_SHIM_USING)
}
namespace fast {
MTLINV_SHIM_MATH_NAMES(EMU_SHIM_USING)
}
}  // namespace metal

// Makes the MSL functions visible unqualified in the namespace where it is expanded (the shim does it for the
// kernels' namespaces; tests and host-side reference code may do it for theirs).
#define MTLINV_MSL_USING                  \
  MTLINV_SHIM_MATH_NAMES(EMU_SHIM_USING)  \
  MTLINV_SHIM_OTHER_NAMES(EMU_SHIM_USING) \
  namespace precise = ::metal::precise;   \
  namespace fast = ::metal::fast;

namespace emu_fast {
MTLINV_MSL_USING
}
namespace emu_checked {
MTLINV_MSL_USING
}

#ifndef MTLINV_VARIANT_NS
#if EMU_CHECKED
#define MTLINV_VARIANT_NS emu_checked
#else
#define MTLINV_VARIANT_NS emu_fast
#endif
#endif

// MSL address spaces: one flat memory on the CPU. `constant` data is read-only.
#define kernel
#define device
#define threadgroup
#define thread
#define constant const
