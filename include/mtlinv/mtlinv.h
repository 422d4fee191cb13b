/* mtlinv's C API: plain functions and opaque handles over the C++ core, for C and Swift callers.
 *
 * Every function returning mtlinv_status returns MTLINV_OK or an error; mtlinv_last_error() then describes it
 * (the message names the offending arguments and values) until the next call on the same thread. Tensors are
 * created from host memory (copied onto the active device) and released with mtlinv_tensor_free. On CUDA and
 * Metal an op returns once its kernels are queued, and reading a tensor (mtlinv_tensor_to_host) waits for them;
 * mtlinv_synchronize waits for all, and a failed kernel's error is the status of the call that waited (on CUDA,
 * MTLINV_CUDA_SYNC=1 makes every op wait, so that a kernel's error is the status of the op that launched it).
 *
 * On an error, *out is left as it was. Every NULL pointer argument, shape, dtype, size and limit is checked (a
 * status, never a crash). Undefined behaviour, as in C's own library (no check can tell such memory from valid
 * memory): using a tensor after mtlinv_tensor_free or freeing it twice, and passing a host buffer smaller than the
 * size given with it (data shorter than the shape, bytes or size beyond the buffer, tile-layout outputs shorter
 * than mtlinv_tiled_weight_elements or mtlinv_quant_tiled_words).
 * The limit starts from MTLINV_BATCH_INVARIANT_LIMIT, read on first use (unset or empty: 0); while that value is
 * not an integer in [0, 2^30] (digits only) every call that uses the limit fails with
 * MTLINV_ERROR_INVALID_ARGUMENT. */
#ifndef MTLINV_H
#define MTLINV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mtlinv_tensor mtlinv_tensor;

typedef enum {
  MTLINV_FLOAT32 = 0,
  MTLINV_FLOAT16 = 1,
  MTLINV_BFLOAT16 = 2,
  MTLINV_UINT32 = 3,
  MTLINV_INT32 = 4,
} mtlinv_dtype;

typedef enum {
  MTLINV_OK = 0,
  MTLINV_ERROR_INVALID_ARGUMENT = 1, /* bad shape, value or limit */
  MTLINV_ERROR_DTYPE = 2,            /* unsupported or mixed dtypes */
  MTLINV_ERROR_DEVICE = 3,           /* no device, backend not built, device command failed */
  MTLINV_ERROR_KERNEL = 4,           /* a kernel faulted */
  MTLINV_ERROR_OUT_OF_MEMORY = 5,
  MTLINV_ERROR_INTERNAL = 6,
} mtlinv_status;

const char* mtlinv_last_error(void);

/* The batch-invariance limit, in [0, 2^30]: calls with M <= limit rows (or queries) take the canonical kernels.
 * mtlinv_set_limit sets the process value, for every thread. mtlinv_push_limit opens a scope on the calling thread:
 * its calls use `limit` until the matching mtlinv_pop_limit, which restores what the thread saw before; scopes nest,
 * belong to the thread that opened them (other threads and the process value are untouched), and a thread's calls
 * take its innermost scope, else the process value. mtlinv_pop_limit with no scope open on the thread is
 * MTLINV_ERROR_INVALID_ARGUMENT. mtlinv_get_limit reads the calling thread's limit. (The C++ API's guard for the same
 * scopes is mtlinv::LimitScope.) */
mtlinv_status mtlinv_set_limit(int limit, int* previous /* may be NULL */);
int mtlinv_get_limit(void); /* -1 on error (see mtlinv_last_error) */
mtlinv_status mtlinv_push_limit(int limit);
mtlinv_status mtlinv_pop_limit(void);

/* Name of the active backend ("emu", "metal", "cuda") and device, written NUL-terminated into buf; an error,
 * never a truncated name, when it needs more than size bytes. */
mtlinv_status mtlinv_device_name(char* buf, size_t size);

/* Waits until the device has run every kernel queued so far; the error of one that failed, if any. */
mtlinv_status mtlinv_synchronize(void);

/* A tensor of ndim (0..8) dimensions, copied from data (which may be NULL when the shape holds no element). Each
 * dimension is at most 2^32 - 1, as the kernels count in 32 bits (MTLINV_ERROR_INVALID_ARGUMENT beyond). */
mtlinv_status mtlinv_tensor_from_host(const void* data, const int64_t* shape, int ndim, mtlinv_dtype dtype,
                                      mtlinv_tensor** out);
/* bytes must be the tensor's size (mtlinv_tensor_nbytes); data may be NULL when it is 0. */
mtlinv_status mtlinv_tensor_to_host(const mtlinv_tensor* t, void* data, size_t bytes);
/* -1 (ndim, dim) or 0 (nbytes) for a NULL tensor or a dimension index outside [0, ndim). */
int mtlinv_tensor_ndim(const mtlinv_tensor* t);
int64_t mtlinv_tensor_dim(const mtlinv_tensor* t, int i);
size_t mtlinv_tensor_nbytes(const mtlinv_tensor* t);
void mtlinv_tensor_free(mtlinv_tensor* t);

/* y = x @ w^T (+ bias) for w [N, K] (transpose != 0) or y = x @ w for w [K, N]; bias may be NULL. On a device with
 * matrix units w [N, K] may also come in the tile layout of mtlinv_tile_weights ([N/16, K/32, 16, 32], float16
 * or bfloat16, transpose != 0): at or below the limit the same bits. */
mtlinv_status mtlinv_gemv(const mtlinv_tensor* x, const mtlinv_tensor* w, const mtlinv_tensor* bias, int transpose,
                          mtlinv_tensor** out);
/* Quantized (MLX affine format) y = x @ W^T (+ bias); bias may be NULL. wq [N, K*bits/32] (MLX's rows), or on a
 * device with matrix units the tile layout of mtlinv.quant.tile (wq [N/16, ceil(K/128), 16, 4*bits], scales and
 * biases [N/16, K/group_size, 16]; 16-bit x, bits 4 or 8): at or below the limit the same bits
 * (src/core/ops/qgemv.h). */
mtlinv_status mtlinv_qgemv(const mtlinv_tensor* x, const mtlinv_tensor* wq, const mtlinv_tensor* scales,
                           const mtlinv_tensor* biases, const mtlinv_tensor* bias, int group_size, int bits,
                           mtlinv_tensor** out);
/* The tile layouts of mtlinv_gemv and mtlinv_qgemv above, made on the host from row-major weights (one
 * implementation with Python's mtlinv.tile_weights and mtlinv.quant.tile: src/core/tile_layout.h). Row-major host
 * arrays; outputs must not overlap inputs; upload the results with mtlinv_tensor_from_host in the shapes below.
 * Dense: w [N, K] of dtype (MTLINV_FLOAT16 or MTLINV_BFLOAT16) -> w_tiled, *elements elements (from
 * mtlinv_tiled_weight_elements), [N/16, K/32, 16, 32]; N and K multiples of 16 and 32.
 * Quantized: wq [N, K*bits/32] -> wq_tiled, *words words (from mtlinv_quant_tiled_words),
 * [N/16, ceil(K/128), 16, 4*bits]; scales and biases [N, K/group_size] of scale_dtype (MTLINV_FLOAT16,
 * MTLINV_BFLOAT16 or MTLINV_FLOAT32) -> the same count in [N/16, K/group_size, 16]; bits 4 or 8, N a multiple of
 * 16, K a multiple of group_size (32, 64 or 128); a last partial block of 128 K positions is padded with zeros. */
mtlinv_status mtlinv_tiled_weight_elements(int64_t n, int64_t k, int64_t* elements);
mtlinv_status mtlinv_tile_weights(const void* w, mtlinv_dtype dtype, int64_t n, int64_t k, void* w_tiled);
mtlinv_status mtlinv_quant_tiled_words(int64_t n, int64_t k, int group_size, int bits, int64_t* words);
mtlinv_status mtlinv_quant_tile(const uint32_t* wq, const void* scales, const void* biases, mtlinv_dtype scale_dtype,
                                int64_t n, int64_t k, int group_size, int bits, uint32_t* wq_tiled,
                                void* scales_tiled, void* biases_tiled);
/* Attention; kv_len < 0: all C keys; scale <= 0: 1/sqrt(D) (Python's sdpa takes 0 and negatives as given);
 * a NaN or infinite scale is an error. */
mtlinv_status mtlinv_sdpa(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                          int64_t kv_len, float scale, mtlinv_tensor** out);
mtlinv_status mtlinv_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* weight, float eps, mtlinv_tensor** out);

#ifdef __cplusplus
}
#endif

#endif /* MTLINV_H */
