// The quantized matmul family (metal/qgemv.metal, qgemv_mma.metal, qgemm.metal) as the kernels and the host
// (src/core/plans/qgemv.cpp) both see it: the argument struct, 4-byte scalars only so that its layout is the same on
// every target (its size is static_assert'ed in src/core/plans/qgemv.cpp), and the geometry the plans size grids by.
#pragma once
#include "mma_tile_args.h"
#include "shared.h"

// qgemv: y[m, n] = sum_k x[m, k] * W(n, k) (+ bias[n]) with W(n, k) = scales[n, g] * q(n, k) + biases[n, g],
// g = k / group_size, q unpacked from wq [N, K * bits / 32] (MLX's affine format). The bit width is a template
// parameter of the kernels (one kernel per width), the group size a runtime value (with one compile-time split:
// group size 16 has kernels of its own, metal/qgemv_run.h). In the super-block form (GGUF's K-quants at their own
// bytes: metal/quant.h, QuantGroups<char>) scales and biases are int8 codes and `supers` holds two float32 factors
// per QGEMV_SUPER values of a row.
struct QGemvArgs {
  uint32_t rows;          // M: rows of x (all leading dimensions of x flattened)
  uint32_t k;             // reduced extent, a multiple of group_size and of QGEMV_RUN
  uint32_t n;             // outputs per row
  uint32_t group_size;    // 16 (at 8 bits), 32, 64 or 128: K positions sharing one scale and bias
  uint32_t k_splits;      // simdgroups sharing one output tile's K range (canonical kernel); from K and the device
  uint32_t has_bias;      // 1: add bias[n] in the epilogue
  uint32_t vector_loads;  // 1: x starts 16-byte aligned, full vectors of it may be loaded at once
  uint32_t w_vector_loads;  // 1: wq starts 16-byte aligned (qgemv loads runs of 4- and 8-bit words 16 bytes at once)
};

// The buffer slots of every kernel of the family (shared.h).
enum QGemvSlot : uint32_t {
  QGEMV_SLOT_ARGS = 0,    // QGemvArgs
  QGEMV_SLOT_X = 1,
  QGEMV_SLOT_WQ = 2,      // the packed weights
  QGEMV_SLOT_SCALES = 3,
  QGEMV_SLOT_BIASES = 4,  // the quantization biases, one per group
  QGEMV_SLOT_BIAS = 5,    // the output bias, read only with has_bias
  QGEMV_SLOT_Y = 6,
  QGEMV_SLOT_SUPERS = 7,  // the super-block factors, read only with int8 scales (any buffer otherwise)
};

// The super-block form: K positions sharing one pair of float32 factors (llama.cpp's QK_K: a K-quant block).
MTLINV_SHARED uint32_t QGEMV_SUPER = 256;

// A run: 32 consecutive K positions of one weight row (BITS packed words), the unit both GEMVs load and unpack
// (metal/qgemv_run.h). A run lies in one group, or in two at group size 16.
MTLINV_SHARED uint32_t QGEMV_RUN = 32;
// qgemv: weight rows (outputs) per simdgroup, and most simdgroups sharing one output tile (k_splits).
MTLINV_SHARED uint32_t QGEMV_COLS = 4;
MTLINV_SHARED uint32_t QGEMV_MAX_SPLITS = 8;
// qgemv_mma: runs per step, one per lane of a weight row; its output tile is the MMA tile (mma_tile_args.h).
MTLINV_SHARED uint32_t QGEMV_MMA_STEP = 4;
// qgemm: outputs per threadgroup along M and along N, and its threads (each stages one run of QGEMM_RUN values of a
// tile row: QGEMM_TILE rows x QGEMM_BK / QGEMM_RUN runs, 32 x 4).
MTLINV_SHARED uint32_t QGEMM_TILE = 32;
MTLINV_SHARED uint32_t QGEMM_THREADS = 128;
