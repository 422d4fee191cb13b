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
 * MTLINV_ERROR_INVALID_ARGUMENT.
 *
 * ABI rules (from 1.0; below 1.0 they hold within one MAJOR.MINOR, which the shared library's soname carries):
 *   - A release never changes or removes a function, an enum value or a struct below; it only adds functions and
 *     enum values. A program built against version X.Y runs with any library X.Z, Z >= Y (check
 *     mtlinv_version() >= the MTLINV_VERSION it was built with before calling a function newer than that).
 *   - The structs (mtlinv_quant_linear, mtlinv_decoder_layer, mtlinv_decoder_config, mtlinv_decoder_layer_extras,
 *     mtlinv_decoder_layer_supers) are passed by pointer and never grow; a new field means a new struct and a new
 *     function taking it.
 *   - Handles (mtlinv_tensor, mtlinv_decoder) are opaque; their layout is not part of the ABI.
 *   - Statuses may gain values: treat any value other than MTLINV_OK as an error.
 *   - Strings returned (mtlinv_last_error, mtlinv_version_string) belong to the library.
 *
 * Thread safety. Any function may be called from any thread, and calls may run at once on several threads,
 * except that: a tensor that one call writes (an output's storage, a cache of write_heads, qkv_to_heads or a
 * decoder) must not be read or written by another call at the same time; a decoder runs one forward at a time
 * (it writes its caches); mtlinv_tensor_free and mtlinv_decoder_free must not race with a call using the same
 * handle. The limit and the last error are per thread as described; mtlinv_set_limit is atomic. */
#ifndef MTLINV_H
#define MTLINV_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"

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
  MTLINV_INT8 = 5, /* the super-block form's scale and bias codes (mtlinv_qgemv_super) */
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

/* The message of the calling thread's last failed call ("" after a success); valid until its next call. */
const char* mtlinv_last_error(void);

/* The library's version: MTLINV_VERSION's number (10000 * MAJOR + 100 * MINOR + PATCH) and "MAJOR.MINOR.PATCH".
 * They may differ from the MTLINV_VERSION_* macros a program was compiled with (the ABI rules above). */
int mtlinv_version(void);
const char* mtlinv_version_string(void);

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
/* mtlinv_qgemv in the super-block form (GGUF's K-quants: Q4_K, Q5_K, Q6_K; Python's mtlinv.gguf_kquants.to_super):
 * wq as mtlinv_qgemv takes it, scales and biases MTLINV_INT8 codes [N, K/group_size], supers MTLINV_FLOAT32
 * [N, K/256, 2]. Group g of row n, in super-block s = g * group_size / 256, has the scale supers[n, s, 0] *
 * scales[n, g] and the bias supers[n, s, 1] * biases[n, g], each rounded to float32: the weights of mtlinv_qgemv
 * with those products as float32 scales and biases, and its bits where both run the same arithmetic (all but the
 * matrix-unit kernel at 5 and 6 bits). K a multiple of 256; bits 4 or 5 at group_size 32, bits 6 at group_size 16. On a
 * device with matrix units (16-bit x) the tile layout of mtlinv_quant_tile_super runs too. */
mtlinv_status mtlinv_qgemv_super(const mtlinv_tensor* x, const mtlinv_tensor* wq, const mtlinv_tensor* scales,
                                 const mtlinv_tensor* biases, const mtlinv_tensor* supers, const mtlinv_tensor* bias,
                                 int group_size, int bits, mtlinv_tensor** out);
/* The tile layouts of mtlinv_gemv and mtlinv_qgemv above, made on the host from row-major weights (one
 * implementation with Python's mtlinv.tile_weights and mtlinv.quant.tile: src/core/tile_layout.h). Row-major host
 * arrays; outputs must not overlap inputs; upload the results with mtlinv_tensor_from_host in the shapes below.
 * Dense: w [N, K] of dtype (MTLINV_FLOAT16 or MTLINV_BFLOAT16) -> w_tiled, *elements elements (from
 * mtlinv_tiled_weight_elements), [N/16, K/32, 16, 32]; N and K multiples of 16 and 32.
 * Quantized: wq [N, K*bits/32] -> wq_tiled, *words words (from mtlinv_quant_tiled_words),
 * [N/16, ceil(K/128), 16, 4*bits]; scales and biases [N, K/group_size] of scale_dtype (MTLINV_FLOAT16,
 * MTLINV_BFLOAT16 or MTLINV_FLOAT32) -> the same count in [N/16, K/group_size, 16]; bits 4 or 8, N a multiple of
 * 16, K a multiple of group_size (32, 64 or 128, or 16 at bits 8) and of 32; a last partial block of 128 K positions is
 * padded with zeros. mtlinv_quant_tiled_words also counts the super-block form's words (mtlinv_quant_tile_super). */
mtlinv_status mtlinv_tiled_weight_elements(int64_t n, int64_t k, int64_t* elements);
mtlinv_status mtlinv_tile_weights(const void* w, mtlinv_dtype dtype, int64_t n, int64_t k, void* w_tiled);
mtlinv_status mtlinv_quant_tiled_words(int64_t n, int64_t k, int group_size, int bits, int64_t* words);
mtlinv_status mtlinv_quant_tile(const uint32_t* wq, const void* scales, const void* biases, mtlinv_dtype scale_dtype,
                                int64_t n, int64_t k, int group_size, int bits, uint32_t* wq_tiled,
                                void* scales_tiled, void* biases_tiled);
/* The tile layout of the super-block form: wq as mtlinv_quant_tile's; the int8 codes scales and biases
 * [N, K/group_size] -> [N/16, K/group_size, 16]; supers [N, K/256, 2] -> supers_tiled [N/16, K/256, 16, 2]
 * (N K/128 floats). A format of mtlinv_qgemv_super, N a multiple of 16, K a multiple of 256; wq_tiled holds
 * mtlinv_quant_tiled_words(n, k, group_size, bits) words. */
mtlinv_status mtlinv_quant_tile_super(const uint32_t* wq, const int8_t* scales, const int8_t* biases,
                                      const float* supers, int64_t n, int64_t k, int group_size, int bits,
                                      uint32_t* wq_tiled, int8_t* scales_tiled, int8_t* biases_tiled,
                                      float* supers_tiled);
/* Attention; kv_len < 0: all C keys; scale <= 0: 1/sqrt(D) (Python's sdpa takes 0 and negatives as given);
 * a NaN or infinite scale is an error. */
mtlinv_status mtlinv_sdpa(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                          int64_t kv_len, float scale, mtlinv_tensor** out);
mtlinv_status mtlinv_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* weight, float eps, mtlinv_tensor** out);

/* ---- Tensors, continued ---- */

/* A new contiguous tensor of ndim (0..8) dimensions on the active device, its contents unspecified (a KV cache:
 * each position is written before it is read). Same shape rules as mtlinv_tensor_from_host. */
mtlinv_status mtlinv_tensor_empty(const int64_t* shape, int ndim, mtlinv_dtype dtype, mtlinv_tensor** out);
/* The tensor's dtype; MTLINV_ERROR_INVALID_ARGUMENT for a NULL tensor. */
mtlinv_status mtlinv_tensor_dtype(const mtlinv_tensor* t, mtlinv_dtype* dtype);
/* A new handle on the same memory with another shape of as many elements (a view: writes through one show in
 * the other). */
mtlinv_status mtlinv_tensor_reshape(const mtlinv_tensor* t, const int64_t* shape, int ndim, mtlinv_tensor** out);

/* ---- More ops (src/core/ops/): the same checks, limit and bits as the Python API's functions of the same names.
 * Each returns a new tensor in *out (free it with mtlinv_tensor_free) unless it writes in place. ---- */

/* a @ b for b [K, N] (mtlinv_gemv with transpose = 0, with errors naming a and b). */
mtlinv_status mtlinv_matmul(const mtlinv_tensor* a, const mtlinv_tensor* b, mtlinv_tensor** out);
/* mtlinv_sdpa with the output as rows, [B, Lq, Hq * D] ([Lq, Hq * D] for a 3-d q): each query's heads side by
 * side, the bits of mtlinv_heads_to_rows of mtlinv_sdpa's. */
mtlinv_status mtlinv_sdpa_rows(const mtlinv_tensor* q, const mtlinv_tensor* k, const mtlinv_tensor* v, int causal,
                               int64_t kv_len, float scale, mtlinv_tensor** out);
/* s = x + residual (mtlinv_add's bits) into *sum and y = rms_norm(s, weight, eps) into *out, in one launch. */
mtlinv_status mtlinv_add_rms_norm(const mtlinv_tensor* x, const mtlinv_tensor* residual, const mtlinv_tensor* weight,
                                  float eps, mtlinv_tensor** sum, mtlinv_tensor** out);
/* a + b elementwise (same shape and dtype). */
mtlinv_status mtlinv_add(const mtlinv_tensor* a, const mtlinv_tensor* b, mtlinv_tensor** out);
/* silu(gate) * up elementwise, computed in float32. */
mtlinv_status mtlinv_swiglu(const mtlinv_tensor* gate, const mtlinv_tensor* up, mtlinv_tensor** out);
/* x [L, 2 F] -> swiglu(x[:, :F], x[:, F:]) [L, F], the same bits. */
mtlinv_status mtlinv_swiglu_halves(const mtlinv_tensor* x, mtlinv_tensor** out);
/* Writes x [L, H, D] into dst [H, C, D] (in place) at sequence indices seq_offset.., rotating the interleaved
 * pairs for positions start_pos.. when rotate != 0 (RoPE as llama GGUF files store it, frequency base^(-2j/D),
 * base in [1, FLT_MAX]). */
mtlinv_status mtlinv_write_heads(const mtlinv_tensor* x, mtlinv_tensor* dst, int64_t seq_offset, int64_t start_pos,
                                 int rotate, double base);
/* RoPE on x [L, H, D] (even D) for positions start_pos.., returned as [H, L, D] (the layout mtlinv_sdpa takes). */
mtlinv_status mtlinv_rope_heads(const mtlinv_tensor* x, int64_t start_pos, double base, mtlinv_tensor** out);
/* A fused q|k|v projection's output x [L, q_heads + 2 Hkv, D] -> the rotated queries [q_heads, L, D] in *out; the
 * rotated keys and the values written into k_dst and v_dst [Hkv, C, D] (in place) at sequence indices
 * seq_offset..: the bits of mtlinv_rope_heads and two mtlinv_write_heads, in one launch. */
mtlinv_status mtlinv_qkv_to_heads(const mtlinv_tensor* x, int64_t q_heads, mtlinv_tensor* k_dst, mtlinv_tensor* v_dst,
                                  int64_t seq_offset, int64_t start_pos, double base, mtlinv_tensor** out);
/* mtlinv_qkv_to_heads with pair j of each head turned by position * freqs[j] instead of base^(-2j/D): a scaled
 * RoPE's frequencies (Llama 3's), n_freqs = D / 2 values, each in (0, 1]. */
mtlinv_status mtlinv_qkv_to_heads_freqs(const mtlinv_tensor* x, int64_t q_heads, mtlinv_tensor* k_dst,
                                        mtlinv_tensor* v_dst, int64_t seq_offset, int64_t start_pos,
                                        const float* freqs, size_t n_freqs, mtlinv_tensor** out);
/* Qwen 3's per-head RMS norms before RoPE: x [L, q_heads + 2 kv_heads, D] (or [L, (q_heads + 2 kv_heads) * D]) with
 * each query head normed by q_weight [D] and each key head by k_weight [D] (mtlinv_rms_norm's bits per head), value
 * heads copied; *out has x's shape. */
mtlinv_status mtlinv_qk_rms_norm(const mtlinv_tensor* x, int64_t q_heads, int64_t kv_heads,
                                 const mtlinv_tensor* q_weight, const mtlinv_tensor* k_weight, float eps,
                                 mtlinv_tensor** out);
/* x [H, L, D] -> [L, H * D]. */
mtlinv_status mtlinv_heads_to_rows(const mtlinv_tensor* x, mtlinv_tensor** out);
/* table [V, D] and ids [L] (host memory), each in [0, V) -> table[ids] [L, D]. */
mtlinv_status mtlinv_embedding(const mtlinv_tensor* table, const int64_t* ids, size_t n_ids, mtlinv_tensor** out);

/* ---- MLX's affine quantisation on the host (src/core/quant.h): the format mtlinv_qgemv takes ----
 * A weight w [rows, K] is quantized along K in groups of group_size (16, 32, 64 or 128), bits 2, 3, 4, 5, 6 or 8:
 * wq [rows, K*bits/32] uint32 words (a little-endian bit stream of q in [0, 2^bits)), scales and biases
 * [rows, K/group_size] in w's dtype (MTLINV_FLOAT32, MTLINV_FLOAT16 or MTLINV_BFLOAT16), w ~= scale * q + bias.
 * The bits of mlx.core.quantize / dequantize (whose per-group arithmetic serves group_size 16 too, which MLX
 * refuses). Row-major host arrays; outputs must not overlap inputs; K a multiple
 * of group_size and of 32. Any thread, at once. */
/* Words of one packed row (K*bits/32), checking bits, group_size and K. */
mtlinv_status mtlinv_quant_row_words(int64_t k, int group_size, int bits, int64_t* words);
/* w must be finite, and no group's max - min may overflow float32 (MTLINV_ERROR_INVALID_ARGUMENT). */
mtlinv_status mtlinv_quantize(const void* w, mtlinv_dtype dtype, int64_t rows, int64_t k, int group_size, int bits,
                              uint32_t* wq, void* scales, void* biases);
/* out [rows, K] in dtype, the scales' (mlx.core.dequantize), or float32 (the weight a float32-accumulating kernel
 * multiplies: float32(scale) * q + float32(bias)). */
mtlinv_status mtlinv_dequantize(const uint32_t* wq, const void* scales, const void* biases, mtlinv_dtype dtype,
                                int64_t rows, int64_t k, int group_size, int bits, void* out);
mtlinv_status mtlinv_dequantize_float32(const uint32_t* wq, const void* scales, const void* biases,
                                        mtlinv_dtype dtype, int64_t rows, int64_t k, int group_size, int bits,
                                        float* out);

/* ---- A llama decoder's forward pass (src/core/model/decoder.h) ----
 * Built from device tensors (the decoder keeps its own references: the handles may be freed after
 * mtlinv_decoder_create; the caches stay shared, so the caller's cache handles see what it writes). With
 * mtlinv_set_limit(L) (or a scope) and M <= L tokens a call, a position's logits do not depend on how many
 * positions share its call: greedy speculative decoding is exact (examples/programs/speculative.cpp). Qwen 2's
 * q/k/v biases, Qwen 3's q/k norms and a scaled RoPE's frequencies (Llama 3's): mtlinv_decoder_create_ext; GGUF
 * K-quant projections: mtlinv_decoder_create_super. */
typedef struct mtlinv_decoder mtlinv_decoder;

/* y = x @ W^T with W [N, K] in the quantized format of mtlinv_qgemv. */
typedef struct {
  const mtlinv_tensor* wq;
  const mtlinv_tensor* scales;
  const mtlinv_tensor* biases;
  int group_size;
  int bits;
} mtlinv_quant_linear;

typedef struct {
  const mtlinv_tensor* attn_norm;  /* [H] */
  const mtlinv_tensor* ffn_norm;   /* [H] */
  mtlinv_quant_linear qkv;         /* q, k and v stacked by rows: [(Hq + 2 Hkv) D, H] */
  mtlinv_quant_linear o;           /* [H, Hq D] */
  mtlinv_quant_linear gate_up;     /* gate and up stacked by rows: [2 F, H] */
  mtlinv_quant_linear down;        /* [H, F] */
  mtlinv_tensor* k_cache;          /* [Hkv, C, D], written in place */
  mtlinv_tensor* v_cache;          /* [Hkv, C, D], written in place */
} mtlinv_decoder_layer;

typedef struct {
  int64_t n_heads;                 /* query heads Hq; Hkv and D are the caches' */
  double rope_theta;               /* RoPE base, in [1, FLT_MAX] */
  double rms_eps;
} mtlinv_decoder_config;

/* embedding [V, H], output_norm [H], output [V, H]; layers[0 .. n_layers) (n_layers may be 0; a draft model may
 * run a prefix of a model's layers). Checks what the ops cannot (the caches' shapes, the head counts); the ops
 * check the rest at the first forward. */
mtlinv_status mtlinv_decoder_create(const mtlinv_decoder_config* config, const mtlinv_tensor* embedding,
                                    const mtlinv_decoder_layer* layers, size_t n_layers,
                                    const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                    mtlinv_decoder** out);
/* What Qwen 2 and Qwen 3 add to a layer; each field may be NULL. */
typedef struct {
  const mtlinv_tensor* qkv_bias;   /* [(Hq + 2 Hkv) D], the embedding's dtype: Qwen 2's q, k and v biases, stacked
                                      as qkv's rows */
  const mtlinv_tensor* q_norm;     /* [D]: Qwen 3's RMS norm of each query head before RoPE (with k_norm, or
                                      neither; mtlinv_qk_rms_norm) */
  const mtlinv_tensor* k_norm;     /* [D]: of each key head */
} mtlinv_decoder_layer_extras;

/* mtlinv_decoder_create with extras[0 .. n_layers) for the layers (NULL: none has any) and a scaled RoPE's pair
 * frequencies rope_freqs[0 .. D / 2), each in (0, 1] (NULL with n_rope_freqs 0: rope_theta^(-2j/D)), as
 * mtlinv_qkv_to_heads_freqs takes them. */
mtlinv_status mtlinv_decoder_create_ext(const mtlinv_decoder_config* config, const float* rope_freqs,
                                        size_t n_rope_freqs, const mtlinv_tensor* embedding,
                                        const mtlinv_decoder_layer* layers,
                                        const mtlinv_decoder_layer_extras* extras, size_t n_layers,
                                        const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                        mtlinv_decoder** out);
/* The super-block form's factors of a layer's projections (mtlinv_qgemv_super): each NULL for a projection in
 * the affine format, else the supers of a projection whose scales and biases are MTLINV_INT8 codes. */
typedef struct {
  const mtlinv_tensor* qkv;
  const mtlinv_tensor* o;
  const mtlinv_tensor* gate_up;
  const mtlinv_tensor* down;
} mtlinv_decoder_layer_supers;

/* mtlinv_decoder_create_ext with projections in the super-block form (a GGUF K-quant model's): supers[0 ..
 * n_layers) for the layers (NULL: none has any) and output_supers for the output projection (NULL: affine). */
mtlinv_status mtlinv_decoder_create_super(const mtlinv_decoder_config* config, const float* rope_freqs,
                                          size_t n_rope_freqs, const mtlinv_tensor* embedding,
                                          const mtlinv_decoder_layer* layers,
                                          const mtlinv_decoder_layer_extras* extras,
                                          const mtlinv_decoder_layer_supers* supers, size_t n_layers,
                                          const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                          const mtlinv_tensor* output_supers, mtlinv_decoder** out);
/* The logits [M, V] (the embedding's dtype) of ids[0 .. M) (M >= 1, each in [0, V)) at positions start ..
 * start + M - 1: writes their keys and values into the caches there and attends over positions 0 .. start + M - 1
 * (the caller keeps the positions before start valid). One call at a time per decoder. */
mtlinv_status mtlinv_decoder_forward(const mtlinv_decoder* decoder, const int64_t* ids, size_t n_ids, int64_t start,
                                     mtlinv_tensor** logits);
/* Cache positions per layer (the caches' C); -1 for NULL. */
int64_t mtlinv_decoder_capacity(const mtlinv_decoder* decoder);
void mtlinv_decoder_free(mtlinv_decoder* decoder);

#ifdef __cplusplus
}
#endif

#endif /* MTLINV_H */
