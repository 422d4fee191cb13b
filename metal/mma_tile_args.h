// The output tile of the matrix-unit GEMVs (metal/mma_tile.h: gemv_nk_mma, qgemv_mma), also the rows of a tile of
// the tile layout (src/core/tile_layout.cpp); shared by the kernels and their plans.
#pragma once
#include "shared.h"

MTLINV_SHARED uint32_t MMA_TILE_COLS = 16;        // outputs per output tile (the builtin's A rows)
MTLINV_SHARED uint32_t MMA_TILE_MAX_SPLITS = 16;  // most k splits per threadgroup
