#include "decoder_ops.h"

#include <initializer_list>

#include "../kernel_args.h"
#include "../kernels.h"

namespace mtlinv {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// The slot of each of the op's operands, in the order of its tensor list.
using Slots = std::initializer_list<DecoderOpSlot>;

// Each decoder kernel has one template argument, the element type.
Plan one_launch(KernelFamily family, DType dtype, Dim3 grid, Dim3 threads, const DecoderOpArgs& args, Slots slots) {
  PlanLaunch l;
  l.kernel = kernel_id(family, dtype);
  l.threadgroups = grid;
  l.threads_per_threadgroup = threads;
  l.set_args(args);
  l.bind_operands(slots);
  Plan p;
  p.launches.push_back(std::move(l));
  return p;
}

// The arguments of the kernels that write heads at sequence indices seq_offset.. (rotated for start_pos..).
DecoderOpArgs heads_write_args(int64_t rows, int64_t heads, int64_t head_dim, int64_t capacity, int64_t seq_offset,
                               int64_t start_pos, float rope_base) {
  DecoderOpArgs a{};
  a.rows = u32(rows);
  a.heads = u32(heads);
  a.head_dim = u32(head_dim);
  a.capacity = u32(capacity);
  a.seq_offset = u32(seq_offset);
  a.start_pos = u32(start_pos);
  a.rope_base = rope_base;
  return a;
}

// y = f(a, b) per element: add, swiglu.
Plan elementwise(KernelFamily kernel, DType dtype, int64_t count) {
  DecoderOpArgs a{};
  a.count = u32(count);
  return one_launch(kernel, dtype, {ceil_div(count, 256), 1, 1}, {256, 1, 1}, a,
                    {DECODER_SLOT_IN, DECODER_SLOT_IN2, DECODER_SLOT_OUT});
}

}  // namespace

Plan plan_add(DType dtype, int64_t count) { return elementwise(KernelFamily::add, dtype, count); }
Plan plan_swiglu(DType dtype, int64_t count) { return elementwise(KernelFamily::swiglu, dtype, count); }

Plan plan_swiglu_halves(DType dtype, int64_t rows, int64_t half_cols) {
  DecoderOpArgs a{};
  a.count = u32(rows * half_cols);
  a.half_cols = u32(half_cols);
  return one_launch(KernelFamily::swiglu_halves, dtype, {ceil_div(rows * half_cols, 256), 1, 1}, {256, 1, 1}, a,
                    {DECODER_SLOT_IN, DECODER_SLOT_OUT});
}

Plan plan_to_heads(bool rotate, DType dtype, int64_t rows, int64_t heads, int64_t head_dim, int64_t capacity,
                   int64_t seq_offset, int64_t start_pos, float rope_base) {
  const DecoderOpArgs a = heads_write_args(rows, heads, head_dim, capacity, seq_offset, start_pos, rope_base);
  const int64_t width = rotate ? head_dim / 2 : head_dim;  // threads along D: one per pair when rotating
  return one_launch(rotate ? KernelFamily::rope_to_heads : KernelFamily::rows_to_heads, dtype,
                    {ceil_div(width, 32), u32(heads), u32(rows)}, {32, 1, 1}, a, {DECODER_SLOT_IN, DECODER_SLOT_OUT});
}

Plan plan_qkv_to_heads(DType dtype, int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                       int64_t capacity, int64_t seq_offset, int64_t start_pos, float rope_base, bool freqs) {
  DecoderOpArgs a = heads_write_args(rows, q_heads, head_dim, capacity, seq_offset, start_pos, rope_base);
  a.kv_heads = u32(kv_heads);
  const Dim3 grid = {ceil_div(head_dim / 2, 32), u32(q_heads + 2 * kv_heads), u32(rows)};
  if (freqs) {
    return one_launch(KernelFamily::qkv_to_heads_freqs, dtype, grid, {32, 1, 1}, a,
                      {DECODER_SLOT_IN, DECODER_SLOT_OUT, DECODER_SLOT_OUT_K, DECODER_SLOT_OUT_V, DECODER_SLOT_FREQS});
  }
  return one_launch(KernelFamily::qkv_to_heads, dtype, grid, {32, 1, 1}, a,
                    {DECODER_SLOT_IN, DECODER_SLOT_OUT, DECODER_SLOT_OUT_K, DECODER_SLOT_OUT_V});
}

Plan plan_heads_to_rows(DType dtype, int64_t rows, int64_t heads, int64_t head_dim) {
  DecoderOpArgs a{};
  a.rows = u32(rows);
  a.heads = u32(heads);
  a.head_dim = u32(head_dim);
  return one_launch(KernelFamily::heads_to_rows, dtype, {ceil_div(head_dim, 32), u32(heads), u32(rows)}, {32, 1, 1}, a,
                    {DECODER_SLOT_IN, DECODER_SLOT_OUT});
}

Plan plan_gather_rows(DType dtype, int64_t rows, int64_t vocab, int64_t dim) {
  DecoderOpArgs a{};
  a.rows = u32(rows);
  a.vocab = u32(vocab);
  a.head_dim = u32(dim);
  return one_launch(KernelFamily::gather_rows, dtype, {ceil_div(dim, 64), u32(rows), 1}, {64, 1, 1}, a,
                    {DECODER_SLOT_IN, DECODER_SLOT_IN2, DECODER_SLOT_OUT});
}

}  // namespace mtlinv
