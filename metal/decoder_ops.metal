// The per-element kernels a llama decoder needs besides the matmuls, attention and rms_norm: residual add, SwiGLU,
// rotary embedding (with the head-major relayout sdpa wants), KV-cache writes, the head-to-row relayout after
// attention, and the embedding lookup. One thread per output element (or per rotated pair); no reductions.
#include "common.h"
#include "args.h"

// y = a + b, elementwise over `count` elements.
template <typename T>
[[kernel]] void add(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* a [[buffer(DECODER_SLOT_IN)]],
    device const T* b [[buffer(DECODER_SLOT_IN2)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint i [[thread_position_in_grid]]) {
  if (i < args.count) {
    y[i] = T(float(a[i]) + float(b[i]));
  }
}

// y = silu(gate) * up = gate / (1 + exp(-gate)) * up, in float.
template <typename T>
[[kernel]] void swiglu(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* gate [[buffer(DECODER_SLOT_IN)]],
    device const T* up [[buffer(DECODER_SLOT_IN2)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint i [[thread_position_in_grid]]) {
  if (i < args.count) {
    const float g = float(gate[i]);
    y[i] = T(g / (1.0f + exp(-g)) * float(up[i]));
  }
}

// swiglu of a stacked gate|up projection's output x [rows, 2 F]: y[r, c] = silu(x[r, c]) * x[r, F + c], the
// arithmetic of swiglu. Grid: count = rows * F threads.
template <typename T>
[[kernel]] void swiglu_halves(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint i [[thread_position_in_grid]]) {
  if (i < args.count) {
    const uint F = args.half_cols;
    device const T* row = x + ulong(i / F) * (2 * F) + i % F;
    const float g = float(row[0]);
    y[i] = T(g / (1.0f + exp(-g)) * float(row[F]));
  }
}

// Rotary embedding on interleaved pairs (x[2j], x[2j+1]) — the convention of llama GGUF files, whose Q/K rows are
// stored permuted for it — at absolute position `pos`, by the angle pos * freq.
inline float2 rotate_pair_by(float x0, float x1, uint pos, float freq) {
  const float angle = float(pos) * freq;
  const float c = cos(angle);
  const float s = sin(angle);
  return float2(x0 * c - x1 * s, x0 * s + x1 * c);
}

// The same with pair j's frequency base^(-2j/D), computed here.
inline float2 rotate_pair(float x0, float x1, uint pos, uint j, uint head_dim, float base) {
  return rotate_pair_by(x0, x1, pos, pow(base, -float(2 * j) / float(head_dim)));
}

// x [rows, heads, D] (projection output) -> y [heads, capacity, D] at sequence index args.seq_offset + row,
// rotated for position start_pos + row: queries into a standalone [heads, rows, D] tensor, or keys into a KV cache.
// Grid: (D / 2, heads, rows).
template <typename T>
[[kernel]] void rope_to_heads(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint3 pos3 [[thread_position_in_grid]]) {
  const uint j = pos3.x, h = pos3.y, row = pos3.z;
  const uint D = args.head_dim;
  if (j >= D / 2 || h >= args.heads || row >= args.rows) {
    return;
  }
  device const T* src = x + (ulong(row) * args.heads + h) * D + 2 * j;
  const float2 r = rotate_pair(float(src[0]), float(src[1]), args.start_pos + row, j, D, args.rope_base);
  device T* dst = y + (ulong(h) * args.capacity + args.seq_offset + row) * D + 2 * j;
  dst[0] = T(r.x);
  dst[1] = T(r.y);
}

// x [rows, heads, D] -> y [heads, capacity, D] at sequence index args.seq_offset + row, unrotated (values into a KV
// cache). Grid: (D, heads, rows).
template <typename T>
[[kernel]] void rows_to_heads(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint3 pos3 [[thread_position_in_grid]]) {
  const uint d = pos3.x, h = pos3.y, row = pos3.z;
  if (d >= args.head_dim || h >= args.heads || row >= args.rows) {
    return;
  }
  y[(ulong(h) * args.capacity + args.seq_offset + row) * args.head_dim + d] =
      x[(ulong(row) * args.heads + h) * args.head_dim + d];
}

// A fused q|k|v projection's output x [rows, heads + 2 kv_heads, D] -> the three places attention reads them: query
// heads rotated into q [heads, rows, D], key heads rotated into the cache k [kv_heads, capacity, D] and value heads
// into v (same shape) at sequence index args.seq_offset + row. One launch for what rope_to_heads and two calls of
// write_heads do, with the same arithmetic (rotate_pair), so the same bits: value heads are copied as rows_to_heads
// copies them, never through float (which quiets a signalling NaN, and on a GPU whose conversions flush float32
// subnormals, turns a bfloat subnormal into zero). Grid: (D / 2, heads + 2 kv_heads, rows), one thread per pair.
// `freq` is pair pos3.x's frequency (unused by value heads and threads past the end).
template <typename T>
inline void qkv_pair_to_heads(constant DecoderOpArgs& args, device const T* x, device T* q, device T* k, device T* v,
                              uint3 pos3, float freq) {
  const uint j = pos3.x, h = pos3.y, row = pos3.z;
  const uint D = args.head_dim;
  const uint all_heads = args.heads + 2 * args.kv_heads;
  if (j >= D / 2 || h >= all_heads || row >= args.rows) {
    return;
  }
  device const T* src = x + (ulong(row) * all_heads + h) * D + 2 * j;
  if (h >= args.heads + args.kv_heads) {
    device T* dst = v + (ulong(h - args.heads - args.kv_heads) * args.capacity + args.seq_offset + row) * D + 2 * j;
    dst[0] = src[0];
    dst[1] = src[1];
    return;
  }
  const float2 r = rotate_pair_by(float(src[0]), float(src[1]), args.start_pos + row, freq);
  device T* dst = h < args.heads ? q + (ulong(h) * args.rows + row) * D
                                 : k + (ulong(h - args.heads) * args.capacity + args.seq_offset + row) * D;
  dst[2 * j] = T(r.x);
  dst[2 * j + 1] = T(r.y);
}

// qkv_to_heads with the frequencies base^(-2j/D) (rotate_pair's).
template <typename T>
[[kernel]] void qkv_to_heads(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* q [[buffer(DECODER_SLOT_OUT)]],
    device T* k [[buffer(DECODER_SLOT_OUT_K)]],
    device T* v [[buffer(DECODER_SLOT_OUT_V)]],
    uint3 pos3 [[thread_position_in_grid]]) {
  qkv_pair_to_heads(args, x, q, k, v, pos3, pow(args.rope_base, -float(2 * pos3.x) / float(args.head_dim)));
}

// qkv_to_heads with a table of frequencies, freqs [D / 2] (float32): a scaled RoPE's (Llama 3's), which the host
// computes once.
template <typename T>
[[kernel]] void qkv_to_heads_freqs(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* q [[buffer(DECODER_SLOT_OUT)]],
    device T* k [[buffer(DECODER_SLOT_OUT_K)]],
    device T* v [[buffer(DECODER_SLOT_OUT_V)]],
    device const float* freqs [[buffer(DECODER_SLOT_FREQS)]],
    uint3 pos3 [[thread_position_in_grid]]) {
  qkv_pair_to_heads(args, x, q, k, v, pos3, pos3.x < args.head_dim / 2 ? freqs[pos3.x] : 0.0f);
}

// x [heads, rows, D] (attention output) -> y [rows, heads * D] for the output projection. Grid: (D, heads, rows).
template <typename T>
[[kernel]] void heads_to_rows(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* x [[buffer(DECODER_SLOT_IN)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint3 pos3 [[thread_position_in_grid]]) {
  const uint d = pos3.x, h = pos3.y, row = pos3.z;
  if (d >= args.head_dim || h >= args.heads || row >= args.rows) {
    return;
  }
  y[(ulong(row) * args.heads + h) * args.head_dim + d] = x[(ulong(h) * args.rows + row) * args.head_dim + d];
}

// Embedding lookup: y[row, :] = table[ids[row], :] (table [vocab, D]; D = head_dim here). Out-of-range ids were
// rejected on the host. Grid: (D, rows).
template <typename T>
[[kernel]] void gather_rows(
    constant DecoderOpArgs& args [[buffer(DECODER_SLOT_ARGS)]],
    device const T* table [[buffer(DECODER_SLOT_IN)]],
    device const uint* ids [[buffer(DECODER_SLOT_IN2)]],
    device T* y [[buffer(DECODER_SLOT_OUT)]],
    uint2 pos2 [[thread_position_in_grid]]) {
  const uint d = pos2.x, row = pos2.y;
  if (d >= args.head_dim || row >= args.rows) {
    return;
  }
  y[ulong(row) * args.head_dim + d] = table[ulong(ids[row]) * args.head_dim + d];
}

MTLINV_KERNEL(add_f32, add, float)
MTLINV_KERNEL(add_f16, add, half)
MTLINV_KERNEL(add_bf16, add, bfloat)
MTLINV_KERNEL(swiglu_f32, swiglu, float)
MTLINV_KERNEL(swiglu_f16, swiglu, half)
MTLINV_KERNEL(swiglu_bf16, swiglu, bfloat)
MTLINV_KERNEL(swiglu_halves_f32, swiglu_halves, float)
MTLINV_KERNEL(swiglu_halves_f16, swiglu_halves, half)
MTLINV_KERNEL(swiglu_halves_bf16, swiglu_halves, bfloat)
MTLINV_KERNEL(rope_to_heads_f32, rope_to_heads, float)
MTLINV_KERNEL(rope_to_heads_f16, rope_to_heads, half)
MTLINV_KERNEL(rope_to_heads_bf16, rope_to_heads, bfloat)
MTLINV_KERNEL(rows_to_heads_f32, rows_to_heads, float)
MTLINV_KERNEL(rows_to_heads_f16, rows_to_heads, half)
MTLINV_KERNEL(rows_to_heads_bf16, rows_to_heads, bfloat)
MTLINV_KERNEL(qkv_to_heads_f32, qkv_to_heads, float)
MTLINV_KERNEL(qkv_to_heads_f16, qkv_to_heads, half)
MTLINV_KERNEL(qkv_to_heads_bf16, qkv_to_heads, bfloat)
MTLINV_KERNEL(qkv_to_heads_freqs_f32, qkv_to_heads_freqs, float)
MTLINV_KERNEL(qkv_to_heads_freqs_f16, qkv_to_heads_freqs, half)
MTLINV_KERNEL(qkv_to_heads_freqs_bf16, qkv_to_heads_freqs, bfloat)
MTLINV_KERNEL(heads_to_rows_f32, heads_to_rows, float)
MTLINV_KERNEL(heads_to_rows_f16, heads_to_rows, half)
MTLINV_KERNEL(heads_to_rows_bf16, heads_to_rows, bfloat)
MTLINV_KERNEL(gather_rows_f32, gather_rows, float)
MTLINV_KERNEL(gather_rows_f16, gather_rows, half)
MTLINV_KERNEL(gather_rows_bf16, gather_rows, bfloat)
