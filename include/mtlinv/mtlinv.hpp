// mtlinv's C++ API: the core's tensors, the limit, the ops (all in namespace mtlinv), the weights' quantisation
// (MLX's affine format) and tile layouts, and a llama decoder built on the ops. C++17.
// The limit: set_limit sets the process value; a mtlinv::LimitScope guard overrides it for the calling thread alone
// until the guard ends, restoring what that thread saw before (guards nest); get_limit and every op read the
// thread's innermost scope, else the process value. Tensor::upload and Tensor::download move data in and out,
// checked; the backend's own upload and download are unchecked internals. Errors are exceptions derived from
// mtlinv::Error (core/errors.h), each naming the argument and the offending value.
//
// The headers below are the core's public ones (tools/sources.py lists them), installed under <mtlinv/core/>; the
// C++ API has no ABI promise across versions (rebuild against the headers of the library you link), unlike the C
// API (mtlinv.h). Thread safety: as the C API's notes in mtlinv.h say for the matching calls.
#pragma once
#include <mtlinv/version.h>
#include <mtlinv/core/backend.h>
#include <mtlinv/core/errors.h>
#include <mtlinv/core/limit.h>
#include <mtlinv/core/model/decoder.h>
#include <mtlinv/core/ops.h>
#include <mtlinv/core/quant.h>
#include <mtlinv/core/tile_layout.h>
#include <mtlinv/core/tensor.h>
