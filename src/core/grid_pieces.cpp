#include "grid_pieces.h"

#include <algorithm>
#include <atomic>

#include "errors.h"

namespace mtlinv {

namespace {

std::atomic<uint32_t> g_limit_y{0}, g_limit_z{0};  // set_piece_limit's; 0: none

uint32_t capped(uint32_t own, uint32_t lowered) { return lowered == 0 ? own : std::min(own, lowered); }

bool inside(uint32_t origin, uint32_t count, uint32_t whole) { return origin <= whole && count <= whole - origin; }

}  // namespace

PieceLimit set_piece_limit(PieceLimit limit) {
  if ((limit.y == 0) != (limit.z == 0)) {
    throw InvalidArgument("set_piece_limit: y and z must both be >= 1 (or both 0 to reset), got (", limit.y, ", ",
                          limit.z, ")");
  }
  return {g_limit_y.exchange(limit.y), g_limit_z.exchange(limit.z)};
}

void check_piece(const Dispatch& d) {
  if (!inside(d.origin.x, d.threadgroups.x, d.grid.x) || !inside(d.origin.y, d.threadgroups.y, d.grid.y) ||
      !inside(d.origin.z, d.threadgroups.z, d.grid.z)) {
    throw KernelError("internal: ", d.kernel, ": a piece of (", d.threadgroups.x, ", ", d.threadgroups.y, ", ",
                      d.threadgroups.z, ") threadgroups from (", d.origin.x, ", ", d.origin.y, ", ", d.origin.z,
                      ") does not lie inside its grid (", d.grid.x, ", ", d.grid.y, ", ", d.grid.z, ")");
  }
}

void dispatch_in_pieces(Backend& backend, Dispatch d) {
  const Dim3 grid = d.threadgroups;
  const Dim3 own = backend.caps().max_threadgroups;
  if (grid.x > own.x) {
    throw KernelError(d.kernel, ": grid of (", grid.x, ", ", grid.y, ", ", grid.z, ") threadgroups; the ",
                      backend.caps().backend, " backend launches at most ", own.x, " along x");
  }
  const uint32_t most_y = capped(own.y, g_limit_y.load());
  const uint32_t most_z = capped(own.z, g_limit_z.load());
  d.grid = grid;
  for (uint64_t z = 0; z < grid.z; z += most_z) {  // 64 bits: z + most_z may pass 2^32
    for (uint64_t y = 0; y < grid.y; y += most_y) {
      d.origin = {0, static_cast<uint32_t>(y), static_cast<uint32_t>(z)};
      d.threadgroups = {grid.x, static_cast<uint32_t>(std::min<uint64_t>(most_y, grid.y - y)),
                        static_cast<uint32_t>(std::min<uint64_t>(most_z, grid.z - z))};
      backend.dispatch(d);
    }
  }
}

}  // namespace mtlinv
