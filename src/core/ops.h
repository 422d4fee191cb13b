// The ops of mtlinv, as the C++ library and the Python extension call them. Each validates its inputs (clear
// errors naming the argument and values), asks a plan which kernels to run, and runs them on the active backend.
// On the emulator an op's result is ready when it returns; on CUDA and Metal the op returns once its kernels are
// queued, and reading the result waits for them (backend.h: host access). One header per op under ops/.
#pragma once
#include "ops/gemv.h"
#include "ops/qgemv.h"
#include "ops/rms_norm.h"
#include "ops/sdpa.h"
#include "ops/decoder_ops.h"
