// Grids larger than a backend launches at once, run in pieces. CUDA takes at most 65535 threadgroups along y and z,
// and the plans put rows, heads, batch or key blocks there: a prefill of more than 65535 tokens has that many
// threadgroups along z of rope_to_heads. dispatch_in_pieces cuts such a grid along y and z into pieces that fit and
// dispatches them in order, each with its origin. A kernel sees its position in the whole grid and the whole
// grid's size (Dispatch::origin, Dispatch::grid), so it cannot tell a piece from the whole and computes the same
// bits; no threadgroup of a plan's kernels depends on another of the same launch, so the order of the pieces
// changes nothing either (tests/ops/test_grid_pieces.py runs every op in pieces and compares the bits).
//
// x is never cut: CUDA's 2^31 - 1 threadgroups along x is more than any plan asks for, and on CUDA an offset on x
// too changed nvcc's registers for the canonical kernels (gemv_nk_mma_r16_u2: 48 -> 56), where y and z left them
// as they were (tools/sass_report.py). A grid past the backend's x limit is refused with a KernelError.
#pragma once
#include "backend.h"

namespace mtlinv {

// Dispatches d, whose threadgroups are the whole grid, in as few pieces as the active limits allow (one when the
// grid fits), y faster than z.
void dispatch_in_pieces(Backend& backend, Dispatch d);

// For the backends: throws KernelError unless d's piece lies inside its grid (origin + threadgroups <= grid).
void check_piece(const Dispatch& d);

// The most threadgroups along y and z of one dispatch.
struct PieceLimit {
  uint32_t y = 0, z = 0;  // 0: the backend's own (DeviceCaps::max_threadgroups)
};

// Testing: caps y and z of every dispatch (each >= 1) on any backend, below the backend's own limits, so that CI
// runs grids in pieces on the emulator; {0, 0} returns to the backends' limits. Returns the previous setting.
PieceLimit set_piece_limit(PieceLimit limit);

}  // namespace mtlinv
