// mtlinv's C++ API: the core's tensors, the limit and the ops (all in namespace mtlinv). See src/core/ops.h.
#pragma once
#include "../../src/core/backend.h"
#include "../../src/core/errors.h"
#include "../../src/core/limit.h"
#include "../../src/core/ops.h"
#include "../../src/core/tensor.h"
