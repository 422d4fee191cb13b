// mtlinv's C++ API: the core's tensors, the limit, the ops (all in namespace mtlinv; see src/core/ops.h), the
// weights' tile layouts (src/core/tile_layout.h) and a llama decoder built on them (src/core/model/decoder.h).
// The limit (src/core/limit.h): set_limit sets the process value; a mtlinv::LimitScope guard overrides it for the
// calling thread alone until the guard ends, restoring what that thread saw before (guards nest); get_limit and
// every op read the thread's innermost scope, else the process value.
// C++17. It includes the core's headers where they lie in the source tree, so compile against a checkout (the
// CMake target `mtlinv` sets the include path), not a copied include/ folder. Tensor::upload and Tensor::download
// move data in and out, checked; the backend's own upload and download are unchecked internals.
#pragma once
#include "../../src/core/backend.h"
#include "../../src/core/errors.h"
#include "../../src/core/limit.h"
#include "../../src/core/model/decoder.h"
#include "../../src/core/ops.h"
#include "../../src/core/tile_layout.h"
#include "../../src/core/tensor.h"
