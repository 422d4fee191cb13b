// Where and how the sdpa kernels write a query's output (metal/sdpa.metal, metal/sdpa_mma.metal).
#pragma once
#include "common.h"
#include "sdpa_args.h"

// The row of `out` (D elements) that query i of head h in batch b writes. With rows_out, a decoder's output
// projection reads it as it is: no copy between attention and the projection (SdpaOptions::rows_out).
inline ulong sdpa_out_row(constant SdpaArgs& args, uint b, uint h, uint i) {
  return args.rows_out != 0 ? (ulong(b) * args.q_len + i) * args.q_heads + h
                            : (ulong(b) * args.q_heads + h) * args.q_len + i;
}

// The same for query j (numbered g Lq + i, g the query head's index in its group) of kv head z (numbered b Hkv + the
// kv head), as the two-pass kernels' grids number them. 32-bit divisions: a 64-bit one is a long subroutine on a GPU.
inline ulong sdpa_out_row_of(constant SdpaArgs& args, uint z, uint j) {
  return sdpa_out_row(args, z / args.kv_heads, z % args.kv_heads * args.group + j / args.q_len, j % args.q_len);
}

template <typename T>
inline void sdpa_store4(device T* p, float4 y) {
  p[0] = T(y.x);
  p[1] = T(y.y);
  p[2] = T(y.z);
  p[3] = T(y.w);
}

// A query's output from its merged o and l, one division per element (scalar divisions on every target, for
// sdpa_combine and a single chunk's writer alike).
inline float sdpa_output(float o, float l) {
  return o / l;
}
inline float4 sdpa_output4(float4 o, float l) {
  return float4(sdpa_output(o.x, l), sdpa_output(o.y, l), sdpa_output(o.z, l), sdpa_output(o.w, l));
}

// A call whose keys all lie in one chunk (n_blocks = 1) has pass 1 write the output, and no pass 2: one launch
// instead of two, as in every decoding step of a context up to 256 keys. The value must be the one sdpa_combine
// writes from that chunk's partials (m, l, o), which a query of another call, whose keys reach a second chunk, gets
// for the same keys. sdpa_combine merges a single chunk with the weight sdpa_weight(m - m) = 1 as fma(o, 1, 0), then
// adds its empty ranges' zeros, and divides: (o + 0) / (l + 0), where + 0 changes nothing but -0 into +0. So do the
// same.
inline float sdpa_single_chunk_output(float o, float l) {
  return sdpa_output(o + 0.0f, l + 0.0f);
}
