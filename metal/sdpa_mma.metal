// Canonical attention on the matrix units: pass 1 of the canonical sdpa (metal/sdpa.metal) for 16-bit q, k, v and
// head dims 64 and 128, on targets whose plans say DeviceCaps::matrix_units (CUDA). It writes the same partials as
// sdpa_blocks, one (m, l, o) per query and chunk of S keys at absolute positions, and sdpa_combine merges them; a
// call of one chunk writes the output instead (sdpa_single_chunk_output in metal/sdpa_out.h).
//
// Why: sdpa_blocks does a query's arithmetic with scalar fmas, so a verification block of Lq = 8 queries with GQA 4
// (32 queries per kv head) costs 5-6 times one decoding step on an H200 (docs/decisions.md, "sdpa: scalar kernels").
// Here the 16 queries of a tile are the A rows of simd_mma_16x8x32 (metal/mma.h): q k^T takes 8 keys per call as B
// rows, and p v takes 32 keys per call as the builtin's K, so a tile costs one read of K and V and the same
// instructions whether it holds 1 query or 16. (Lq = 8 with GQA 4 is two tiles: 1.2x a decoding step at 1K-4K keys,
// 1.4-1.5x at 16K-64K, where the cores pass over the keys once per tile, though HBM is read once. A threadgroup
// taking both tiles, each K and V load serving both, needs their 128 accumulator registers a lane: nvcc then spills,
// and it was 30-38% slower at 16K-64K keys, twice as slow at 1K-4K; docs/decisions.md, "sdpa: the second query
// tile".)
//
// A threadgroup takes one chunk of one kv head and a tile of 16 of its G * Lq queries; its 4 simdgroups take a
// quarter of the chunk each (64 keys for a chunk of 256: two steps of 32). Per query and step, in this order:
//   scores   s = (q . k) * scale_log2 for the 32 keys: D / 32 builtin calls per 8 keys, dims in ascending order
//   softmax  online: m' = max(m, visible scores), p = T(2^(s - m')) (0 for keys the query does not see),
//            l = l * 2^(m - m') + (sum of p), the sum over the lane's 8 keys then a quad ladder (each weight
//            2^x is sdpa_weight's, metal/sdpa_keys.h)
//   p v      acc = acc * 2^(m - m') + p v: one builtin call per output dim column, 32 keys as its K
// then the 4 simdgroups' (m, l, acc) are merged in simdgroup order, as sdpa_combine merges chunks.
//
// Invariance (design.md §2): the builtin sums a (query, key) or (query, dim) pair the same way whatever the other
// rows hold, so a query's bits depend only on the keys it sees. Its last step may be partial: it sees the first c
// keys, and alone (Lq = 1, the keys past it beyond kv_len and read as the last valid key) its p v call has V zeroed
// past c. In a block, queries of one tile see different counts (the causal diagonal). p is 0 past c, and a product
// that is exactly zero changes no sum of the builtin (metal/mma.h), so where that step's V and p are finite one
// call over the unzeroed V gives every query its own bits. Otherwise (a NaN or infinity, which 0 times would not
// make 0) the call runs once per distinct count c, with V zeroed past c, and each query keeps the run of its own
// count; that took up to 8 calls on the diagonal, which made verifying 8 queries at 1K-4K keys 8-9% slower on an
// H200 (docs/decisions.md, "sdpa: the causal diagonal"). Steps a query sees nothing of leave its state untouched.
//
// Arithmetic change from sdpa_blocks, documented: p is rounded to T before p v, as in FlashAttention, and l sums
// the rounded p, so the weights that multiply V are exactly those that normalise the output.
#include "common.h"
#include "sdpa_args.h"  // SdpaArgs; SDPA_MMA_QUERIES, SDPA_MMA_SIMDGROUPS, SDPA_MMA_STEP
#include "sdpa_keys.h"
#include "sdpa_out.h"
#include "load.h"
#include "mma.h"
#include "pair16.h"

constant constexpr uint SDPA_MMA_MAX_D = 128;

// Keys of the step at `a0` a query sees when it sees the keys before `end`: 0..32.
inline uint sdpa_mma_count(uint end, uint a0) {
  return end > a0 ? min(end - a0, SDPA_MMA_STEP) : 0u;
}

// One past the last key row r of the tile sees (0 for rows past the tile's queries).
inline uint sdpa_mma_end(constant SdpaArgs& args, uint j0, uint r, uint nq) {
  if (r >= nq) {
    return 0;
  }
  return sdpa_last_key(args, (j0 + r) % args.q_len) + 1;
}

// The B operands of p v for output columns 2 e2 and 2 e2 + 1 of a 64-dim half: word i holds that column's dim of
// key 8 i + 2 t (low 16 bits) and of key 8 i + 2 t + 1 (high 16 bits), taken from v0[i] and v1[i], which hold 8
// dims of those keys. One byte permute per word (pair16_interleave) builds both columns' words.
inline void sdpa_mma_v_operands(thread const uint4* v0, thread const uint4* v1, uint e2, thread uint4& even,
                                thread uint4& odd) {
  for (uint i = 0; i < 4; ++i) {
    const uint2 w = pair16_interleave(v0[i][e2], v1[i][e2]);
    even[i] = w.x;
    odd[i] = w.y;
  }
}

// The mask of sdpa_mma_v_operands' words that keeps the first `count` keys of the step.
inline uint4 sdpa_mma_key_mask(uint t, uint count) {
  uint4 mask;
  for (uint i = 0; i < 4; ++i) {
    mask[i] = (8 * i + 2 * t < count ? 0xffffu : 0u) | (8 * i + 2 * t + 1 < count ? 0xffff0000u : 0u);
  }
  return mask;
}

// Whether any lane holds an infinity or a NaN among the 16-bit values packed in words[0 .. n): their exponent field is
// all ones, and the field alone, plus its lowest bit, reaches the half's sign bit only then (no carry crosses into
// the other half). Uniform. All lanes call it.
template <typename T>
inline bool sdpa_mma_any_nonfinite(thread const uint4* words, uint n) {
  const uint inf = uint(as_type<ushort>(T(INFINITY)));  // the exponent field: 0x7c00 (half), 0x7f80 (bfloat)
  const uint field = inf * 0x10001u;
  const uint unit = (inf & (0u - inf)) * 0x10001u;      // its lowest bit, in both halves
  uint hit = 0;
  for (uint i = 0; i < n; ++i) {
    for (uint j = 0; j < 4; ++j) {
      hit |= (words[i][j] & field) + unit;
    }
  }
  return simd_any((hit & 0x80008000u) != 0);
}

// The merge (sdpa_mma's end): simdgroup s merges output columns [s OUT / 4, (s + 1) OUT / 4), whose dims of a row
// lie side by side (sdpa_mma_store_sums). Where simdgroup `writer` leaves column o (of OUT per lane) for the
// simdgroup that merges it: each writer has the 3 of every 4 columns it does not merge itself.
inline uint sdpa_mma_owner(uint o, uint out) {
  return o / (out / SDPA_MMA_SIMDGROUPS);
}
inline uint sdpa_mma_merge_slot(uint writer, uint o, uint out) {
  const uint owner = sdpa_mma_owner(o, out);
  return writer * (out / SDPA_MMA_SIMDGROUPS) * (SDPA_MMA_SIMDGROUPS - 1) +
         o % (out / SDPA_MMA_SIMDGROUPS) * (SDPA_MMA_SIMDGROUPS - 1) + (owner < writer ? owner : owner - 1);
}

// A simdgroup's PER = D / 32 merged columns o0 .. o0 + PER - 1 (sums[i]: dims d and d + 8 of query g, then of
// query g + 8, with d = 64 (o / 8) + 16 t + o % 8) into the chunk's partials of the lane's queries that exist. For
// o0 a multiple of PER the PER columns' dims are consecutive, so each lands in one 16-byte (D = 128) or 8-byte
// (D = 64) store: with a store per float, verifying 8 queries at 64K keys took 16% longer on an H200
// (docs/decisions.md, "sdpa: loads, stores and prefetches").
template <uint D>
inline void sdpa_mma_store_sums(device float* part_o, thread const float4* sums, ulong row0, uint n_blocks,
                                uint block, uint o0, uint g, uint t, uint nq) {
  constexpr uint PER = D / 32;
  const uint d = 64 * (o0 / 8) + 16 * t + o0 % 8;
  for (uint h = 0; h < 2; ++h) {  // query g, then g + 8
    if (g + 8 * h >= nq) {
      continue;
    }
    device float* row = part_o + ((row0 + g + 8 * h) * n_blocks + block) * D + d;
    for (uint e = 0; e < 2; ++e) {  // dims d .., then d + 8 ..
      const uint c = 2 * h + e;
      if (PER == 4) {
        *(device float4*)(row + 8 * e) = float4(sums[0][c], sums[1][c], sums[2][c], sums[3][c]);
      } else {
        *(device float2*)(row + 8 * e) = float2(sums[0][c], sums[1][c]);
      }
    }
  }
}

// The same columns as the queries' output, for a call of one chunk (n_blocks = 1): the tile's queries are j0 .. of
// kv head z, and l_lo and l_hi are the sums of queries g and g + 8. PER elements of T per store (8 or 4 bytes; the
// op allocates out, so its rows are aligned).
template <typename T, uint D>
inline void sdpa_mma_store_output(constant SdpaArgs& args, device T* out, thread const float4* sums, uint z, uint j0,
                                  float l_lo, float l_hi, uint o0, uint g, uint t, uint nq) {
  constexpr uint PER = D / 32;
  const uint d = 64 * (o0 / 8) + 16 * t + o0 % 8;
  for (uint h = 0; h < 2; ++h) {
    if (g + 8 * h >= nq) {
      continue;
    }
    device T* row = out + sdpa_out_row_of(args, z, j0 + g + 8 * h) * D + d;
    const float l = h == 0 ? l_lo : l_hi;
    for (uint e = 0; e < 2; ++e) {
      const uint c = 2 * h + e;
      const uint lo = pair16_pack<T>(sdpa_single_chunk_output(sums[0][c], l),
                                     sdpa_single_chunk_output(sums[1][c], l));
      if (PER == 4) {
        *(device uint2*)(row + 8 * e) = uint2(lo, pair16_pack<T>(sdpa_single_chunk_output(sums[2][c], l),
                                                                 sdpa_single_chunk_output(sums[3][c], l)));
      } else {
        *(device uint*)(row + 8 * e) = lo;
      }
    }
  }
}

// The K rows of the step at a0 for q k^T: k_raw[KS b + s] holds dims 32 s + 8 t .. + 7 of key a0 + 8 b + g. Keys
// past kv_len are read as the last valid key: never seen by a query, never a fault. A step inside the keys (every
// step but the last) reads from one pointer at constant offsets, which spares the address arithmetic per row: the
// clamped rows alone (one loop, here and in sdpa_mma_load_v) took 254 registers instead of 240, and pass 1 was no
// faster anywhere and 0.3-2% slower at 16K-64K keys on an H200 (docs/decisions.md, "sdpa: loads, stores and
// prefetches").
template <typename T, bool VEC, uint D>
inline void sdpa_mma_load_k(device const T* k, uint a0, uint kv_len, uint g, uint t, thread uint4* k_raw) {
  constexpr uint KS = D / 32;
  if (a0 + SDPA_MMA_STEP <= kv_len) {
    device const T* rows = k + ulong(a0 + g) * D + 8 * t;
    for (uint b = 0; b < 4; ++b) {
      for (uint s = 0; s < KS; ++s) {
        k_raw[KS * b + s] = load16_unit<T, VEC>(rows + 8 * b * D + 32 * s);
      }
    }
  } else {
    for (uint b = 0; b < 4; ++b) {
      device const T* row = k + ulong(min(a0 + 8 * b + g, kv_len - 1)) * D + 8 * t;
      for (uint s = 0; s < KS; ++s) {
        k_raw[KS * b + s] = load16_unit<T, VEC>(row + 32 * s);
      }
    }
  }
}

// The V rows of the step at a0 for p v: v_raw[8 h + 4 e + b] holds dims 64 h + 8 g .. + 7 of key a0 + 8 b + 2 t + e,
// read as sdpa_mma_load_k reads K.
template <typename T, bool VEC, uint D>
inline void sdpa_mma_load_v(device const T* v, uint a0, uint kv_len, uint g, uint t, thread uint4* v_raw) {
  constexpr uint VH = D / 64;
  if (a0 + SDPA_MMA_STEP <= kv_len) {
    device const T* rows = v + ulong(a0 + 2 * t) * D + 8 * g;
    for (uint b = 0; b < 4; ++b) {
      for (uint e = 0; e < 2; ++e) {
        for (uint h = 0; h < VH; ++h) {
          v_raw[8 * h + 4 * e + b] = load16_unit<T, VEC>(rows + (8 * b + e) * D + 64 * h);
        }
      }
    }
  } else {
    for (uint b = 0; b < 4; ++b) {
      for (uint e = 0; e < 2; ++e) {
        device const T* row = v + ulong(min(a0 + 8 * b + 2 * t + e, kv_len - 1)) * D + 8 * g;
        for (uint h = 0; h < VH; ++h) {
          v_raw[8 * h + 4 * e + b] = load16_unit<T, VEC>(row + 64 * h);
        }
      }
    }
  }
}

// Where the plan asks for it (args.prefetch: grids of at most one threadgroup per two cores, which leave HBM idle
// part of the time), asks L2 for the V rows, and the K rows when `with_k`, of the simdgroup's step at a0 (its keys
// below `stop`) before they are loaded: each step otherwise waits for two trips to HBM, K's and then V's. On an
// H200, a step ahead: decoding 1K-4K keys 5-7% faster; at 8K keys (a threadgroup per core) 4% slower, at 16K-64K
// (several per core, HBM busy) 10%, so plans leave it off there (docs/decisions.md, "sdpa: loads, stores and
// prefetches").
template <typename T, uint D>
inline void sdpa_mma_prefetch(constant SdpaArgs& args, device const T* k, device const T* v, uint a0, uint stop,
                              bool with_k, ushort lane) {
  if (args.prefetch != 0 && lane == 0 && a0 < stop) {
    const uint n = min(stop - a0, SDPA_MMA_STEP) * D;
    if (with_k) {
      prefetch_l2(k + ulong(a0) * D, n);
    }
    prefetch_l2(v + ulong(a0) * D, n);
  }
}

// Reductions over the 16 rows of a tile when lane r and lane r + 16 hold row r's value (uniform results): an OR,
// and the least and most of (x, y) pairs.
inline uint sdpa_mma_rows_or(uint v) {
  for (ushort delta = 8; delta > 0; delta >>= 1) {
    v |= simd_shuffle_xor(v, delta);
  }
  return v;
}
inline uint2 sdpa_mma_rows_min_max(uint2 v) {
  for (ushort delta = 8; delta > 0; delta >>= 1) {
    v = uint2(min(v.x, simd_shuffle_xor(v.x, delta)), max(v.y, simd_shuffle_xor(v.y, delta)));
  }
  return v;
}

// The online softmax of one query (row g or g + 8 of the lane's quad) over one step: scores s of keys 8 b + 2 t + e
// at s[2 b + e], the first `count` of the step's keys visible (all of them when `whole`, a uniform flag that skips
// the masking). Returns p rounded to T (as the builtin's A operand reads it) and updates m and l; `factor`
// rescales the query's accumulators. A query that sees none of the step keeps m and l (its p, zeros or NaN, goes
// into no result it keeps). All lanes call it (quad shuffles).
template <typename T>
inline uint4 sdpa_mma_softmax(thread float* s, bool whole, uint count, uint t, thread float& m, thread float& l,
                              thread float& factor) {
  if (!whole) {
    for (uint i = 0; i < 8; ++i) {
      s[i] = 8 * (i / 2) + 2 * t + i % 2 < count ? s[i] : -INFINITY;  // weight 0: hidden keys add 0
    }
  }
  float m_step = sdpa_max(sdpa_max(sdpa_max(s[0], s[1]), sdpa_max(s[2], s[3])),
                          sdpa_max(sdpa_max(s[4], s[5]), sdpa_max(s[6], s[7])));
  m_step = sdpa_max(m_step, simd_shuffle_xor(m_step, ushort(1)));
  m_step = sdpa_max(m_step, simd_shuffle_xor(m_step, ushort(2)));
  const float m_new = sdpa_max(m, m_step);
  float p[8];
  for (uint i = 0; i < 8; ++i) {
    p[i] = sdpa_weight(s[i] - m_new);
  }
  const uint4 packed = narrow16<T>(p);
  widen16<T>(packed, p);
  float sum = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
  sum += simd_shuffle_xor(sum, ushort(1));
  sum += simd_shuffle_xor(sum, ushort(2));
  factor = 1.0f;
  if (count > 0) {
    factor = sdpa_weight(m - m_new);
    l = fma(l, factor, sum);
    m = m_new;
  }
  return packed;
}

// One step of a simdgroup: the scores of the 32 keys from a0 (K in k_raw, loaded by the caller), the softmax, and
// p v, on the state of queries g and g + 8 (m, l, acc). `first` is the simdgroup's first step.
template <typename T, bool VEC, uint D>
inline void sdpa_mma_step(constant SdpaArgs& args, device const T* v, threadgroup const uint4* q_frags,
                          thread const uint4* k_raw, uint a0, uint first, uint end_row, uint end_lo, uint end_hi,
                          uint end_min, ushort lane, thread float* m, thread float* l, thread float4* acc) {
  constexpr uint KS = D / 32;  // q k^T: builtin calls per 8 keys
  constexpr uint VH = D / 64;  // p v: 64-dim halves, 8 builtin calls each (lane group g loads dims 8 g .. 8 g + 7)
  constexpr uint OUT = VH * 8;
  const uint g = lane / 4;
  const uint t = lane % 4;

  float scores[2][8];  // [query g, g + 8][2 b + e]
  for (uint b = 0; b < 4; ++b) {
    float4 dot = float4(0.0f);
    for (uint s = 0; s < KS; ++s) {
      const uint4 x = q_frags[(2 * s) * SIMD_WIDTH + lane];
      const uint4 y = q_frags[(2 * s + 1) * SIMD_WIDTH + lane];
      dot = simd_mma_16x8x32<T>(dot, uint4(x.x, x.z, y.x, y.z), uint4(x.y, x.w, y.y, y.w), k_raw[KS * b + s], lane);
    }
    scores[0][2 * b] = dot.x * args.scale_log2;
    scores[0][2 * b + 1] = dot.y * args.scale_log2;
    scores[1][2 * b] = dot.z * args.scale_log2;
    scores[1][2 * b + 1] = dot.w * args.scale_log2;
  }
  // Loaded after the scores, so that the K and V units of a step are not all held at once.
  uint4 v_raw[8 * VH];
  sdpa_mma_load_v<T, VEC, D>(v, a0, args.kv_len, g, t, v_raw);
  const uint count_lo = sdpa_mma_count(end_lo, a0);
  const uint count_hi = sdpa_mma_count(end_hi, a0);
  const bool whole = end_min >= a0 + SDPA_MMA_STEP;  // every query of the tile sees the whole step
  float factor_lo, factor_hi;
  const uint4 p_lo = sdpa_mma_softmax<T>(scores[0], whole, count_lo, t, m[0], l[0], factor_lo);
  const uint4 p_hi = sdpa_mma_softmax<T>(scores[1], whole, count_hi, t, m[1], l[1], factor_hi);
  // On a simdgroup's first step its accumulators are still 0, which the factor (0, or 1 for a query that sees
  // none of the step) would leave 0: skipped, at every Lq alike. (A NaN factor comes only with a NaN p, which
  // makes the query's output NaN either way.)
  if (a0 != first) {
    for (uint o = 0; o < OUT; ++o) {
      acc[o] *= float4(factor_lo, factor_lo, factor_hi, factor_hi);
    }
  }

  if (whole) {
    for (uint h = 0; h < VH; ++h) {
      for (uint e2 = 0; e2 < 4; ++e2) {
        uint4 even, odd;
        sdpa_mma_v_operands(v_raw + 8 * h, v_raw + 8 * h + 4, e2, even, odd);
        acc[8 * h + 2 * e2] = simd_mma_16x8x32<T>(acc[8 * h + 2 * e2], p_lo, p_hi, even, lane);
        acc[8 * h + 2 * e2 + 1] = simd_mma_16x8x32<T>(acc[8 * h + 2 * e2 + 1], p_lo, p_hi, odd, lane);
      }
    }
  } else {
    // Counts differ (the causal diagonal, or the end of the keys). A query must take exactly what it takes alone,
    // where a step it sees in part is one call with V's keys from its count c on zeroed. Its p is 0 for those
    // keys, so with a finite V (and a finite p) one call over the unzeroed V gives it the same sums: the hidden
    // keys' products are zeros, which change no sum (metal/mma.h). Otherwise (an infinity or a NaN, as in a
    // cache's unwritten keys) 0 times it would not be 0, so there is one call per distinct count c, bit c - 1
    // of `runs`, with V zeroed from c on. Either way a query keeps only the call made for it, and one that sees
    // none of the step keeps its state. Each query matches one call, so a call may start from the current
    // accumulators: those of its queries still hold the step's starting values.
    const uint count_row = sdpa_mma_count(end_row, a0);
    uint runs = sdpa_mma_rows_or(count_row > 0 ? 1u << (count_row - 1) : 0u);
    // A query that sees none of the step keeps its state whatever its p (NaN while it has seen no key): zeroed,
    // so that it does not send the step to the calls per count.
    uint4 p_seen[2] = {p_lo, p_hi};
    if (count_lo == 0) {
      p_seen[0] = uint4(0);
    }
    if (count_hi == 0) {
      p_seen[1] = uint4(0);
    }
    const bool one = (runs & (runs - 1)) != 0 && !sdpa_mma_any_nonfinite<T>(v_raw, 8 * VH) &&
                     !sdpa_mma_any_nonfinite<T>(p_seen, 2);
    if (one) {
      runs = 1u << (SDPA_MMA_STEP - 1);  // one call, as if every key were seen
    }
    for (uint c = 1; c <= SDPA_MMA_STEP; ++c) {
      if (((runs >> (c - 1)) & 1u) == 0) {
        continue;
      }
      const uint4 mask = sdpa_mma_key_mask(t, c);
      const bool lo = one ? count_lo > 0 : count_lo == c;
      const bool hi = one ? count_hi > 0 : count_hi == c;
      for (uint h = 0; h < VH; ++h) {
        for (uint e2 = 0; e2 < 4; ++e2) {
          uint4 vb[2];
          sdpa_mma_v_operands(v_raw + 8 * h, v_raw + 8 * h + 4, e2, vb[0], vb[1]);
          for (uint e = 0; e < 2; ++e) {
            const uint o = 8 * h + 2 * e2 + e;
            const float4 run = simd_mma_16x8x32<T>(acc[o], p_seen[0], p_seen[1], vb[e] & mask, lane);
            const float4 kept = acc[o];
            acc[o] = float4(lo ? run.x : kept.x, lo ? run.y : kept.y, hi ? run.z : kept.z, hi ? run.w : kept.w);
          }
        }
      }
    }
  }
}

// Pass 1 on the matrix units. Grid: (ceil(G * Lq / 16), B * Hkv, n_blocks); SDPA_MMA_SIMDGROUPS simdgroups. The
// chunks are the grid's slowest dimension and run last first: NVIDIA GPUs start threadgroups in the order of the
// grid (Apple's order is not documented), and the chunks grow with the position (metal/sdpa_args.h), so the largest
// start first and the small ones fill in where the grid is more than the cores hold at once (longest first, the
// greedy for balanced loads). With the chunks as grid y instead, 8K-32K keys took 8-28% longer on an H200.
// Lane 4 g + t holds queries g and g + 8 of the tile: their q (dims 32 s + 8 t .. + 7 of each 32), scores of keys
// 8 b + 2 t, 8 b + 2 t + 1 of each 8, and output dims 64 h + 16 t + c, 64 h + 16 t + 8 + c (c = 0..7) of each 64.
template <typename T, bool VEC, uint D>
[[kernel]] void sdpa_mma(
    constant SdpaArgs& args [[buffer(SDPA_SLOT_ARGS)]],
    device const T* q [[buffer(SDPA_SLOT_Q)]],
    device const T* k [[buffer(SDPA_SLOT_K)]],
    device const T* v [[buffer(SDPA_SLOT_V)]],
    device float* part_o [[buffer(SDPA_SLOT_PART_O)]],
    device float2* part_ml [[buffer(SDPA_SLOT_PART_ML)]],
    device T* out [[buffer(SDPA_SLOT_OUT)]],
    uint3 tile [[threadgroup_position_in_grid]],
    ushort lane [[thread_index_in_simdgroup]],
    ushort sg [[simdgroup_index_in_threadgroup]]) {
  constexpr uint KS = D / 32;  // q k^T: builtin calls per 8 keys
  constexpr uint VH = D / 64;  // p v: 64-dim halves, 8 builtin calls each (lane group g loads dims 8 g .. 8 g + 7)
  constexpr uint OUT = VH * 8;
  // The merge's exchange: each simdgroup's output columns that others merge ([sdpa_mma_merge_slot][lane]) and its
  // (m, l) pairs ([simdgroup][lane]).
  threadgroup float4 merge_o[SDPA_MMA_SIMDGROUPS * (SDPA_MMA_SIMDGROUPS - 1) * (SDPA_MMA_MAX_D / 32) * SIMD_WIDTH];
  threadgroup float4 merge_ml[SDPA_MMA_SIMDGROUPS * SIMD_WIDTH];
  threadgroup uint4 q_frags[2 * (SDPA_MMA_MAX_D / 32) * SIMD_WIDTH];

  const uint g = lane / 4;
  const uint t = lane % 4;
  const uint per_head = args.group * args.q_len;  // queries served by one kv head
  const uint j0 = tile.x * SDPA_MMA_QUERIES;      // first query of the tile, numbered g * Lq + i
  const uint nq = min(SDPA_MMA_QUERIES, per_head - j0);
  const uint block = args.n_blocks - 1 - tile.z;
  const ulong row0 = ulong(tile.y) * per_head + j0;  // q [B, Hq, Lq, D] is [B, Hkv, G * Lq, D]
  q += row0 * D;
  k += ulong(tile.y) * args.kv_capacity * D;
  v += ulong(tile.y) * args.kv_capacity * D;

  // Where each query's keys end: lanes r and r + 16 work out row r's, the lane's own rows g and g + 8 and the least
  // and most over the tile (uniform) follow by shuffles.
  const uint end_row = sdpa_mma_end(args, j0, lane % 16, nq);
  const uint end_lo = simd_shuffle(end_row, ushort(g));
  const uint end_hi = simd_shuffle(end_row, ushort(g + 8));
  const uint2 end_range = sdpa_mma_rows_min_max(uint2(lane % 16 < nq ? end_row : 0xffffffffu, end_row));
  const uint end_min = end_range.x;
  const uint end_max = end_range.y;

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float4 acc[OUT];
  for (uint o = 0; o < OUT; ++o) {
    acc[o] = float4(0.0f);
  }

  const SdpaChunk chunk = sdpa_chunk_range(args.block_keys, args.tier_keys, block);
  const uint quarter = chunk.keys / SDPA_MMA_SIMDGROUPS;
  const uint first = chunk.first + sg * quarter;
  const uint stop = min(first + quarter, end_max);
  // The first step's K is on its way while q is staged: a threadgroup lives for a few steps (four at 512 keys), and
  // its first wait on memory came after the staging's. On an H200: 0.7-2.1 us less at 64K keys, every Lq (0.9-1.9%),
  // within 0.4 us at 1K-16K; nvcc gives the kernel 252 registers, 238 before (docs/decisions.md, "sdpa: loads,
  // stores and prefetches").
  uint4 k_first[4 * KS];
  if (first < stop) {
    sdpa_mma_load_k<T, VEC, D>(k, first, args.kv_len, g, t, k_first);
  }
  sdpa_mma_prefetch<T, D>(args, k, v, first, stop, false, lane);  // V of the first step: its K is on its way
  sdpa_mma_prefetch<T, D>(args, k, v, first + SDPA_MMA_STEP, stop, true, lane);
  // The q operands, staged once for the four simdgroups (read again every step: registers are what limits how many
  // simdgroups a core holds). A lane's rows g and g + 8 (dims 32 s + 8 t .. + 7 of each) are stored interleaved a
  // word at a time, [32-dim block s][half j][lane] = (lo[2 j], hi[2 j], lo[2 j + 1], hi[2 j + 1]): the order in
  // which the CUDA tensor cores read the A operand, so that a 16-byte load lands in the registers the instruction
  // reads. Rows past the tile's queries repeat its last one: computed, never stored.
  for (uint i = sg * SIMD_WIDTH + lane; i < KS * SIMD_WIDTH; i += SDPA_MMA_SIMDGROUPS * SIMD_WIDTH) {
    const uint s = i / SIMD_WIDTH;
    const uint qg = (i % SIMD_WIDTH) / 4;
    device const T* dims = q + 32 * s + 8 * (i % 4);
    const uint4 lo = load16_unit<T, VEC>(dims + ulong(min(qg, nq - 1)) * D);
    const uint4 hi = load16_unit<T, VEC>(dims + ulong(min(qg + 8, nq - 1)) * D);
    q_frags[2 * i - i % SIMD_WIDTH] = uint4(lo.x, hi.x, lo.y, hi.y);
    q_frags[2 * i - i % SIMD_WIDTH + SIMD_WIDTH] = uint4(lo.z, hi.z, lo.w, hi.w);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (first < stop) {
    sdpa_mma_step<T, VEC, D>(args, v, q_frags, k_first, first, first, end_row, end_lo, end_hi, end_min, lane, m, l,
                             acc);
  }
  for (uint a0 = first + SDPA_MMA_STEP; a0 < stop; a0 += SDPA_MMA_STEP) {
    sdpa_mma_prefetch<T, D>(args, k, v, a0 + SDPA_MMA_STEP, stop, true, lane);
    uint4 k_raw[4 * KS];
    sdpa_mma_load_k<T, VEC, D>(k, a0, args.kv_len, g, t, k_raw);
    sdpa_mma_step<T, VEC, D>(args, v, q_frags, k_raw, a0, first, end_row, end_lo, end_hi, end_min, lane, m, l, acc);
  }

  // The merge of the four quarters, in simdgroup order: weights 2^(m_s - M) over M = max of the m_s, 0 for a
  // quarter the query sees nothing of; a query that sees no key of the chunk writes m = -inf, l = 0, o = 0. Each
  // simdgroup merges its own OUT / 4 output columns (sdpa_mma_owner), so it leaves (m, l) and the other columns here.
  merge_ml[sg * SIMD_WIDTH + lane] = float4(m[0], l[0], m[1], l[1]);
  for (uint o = 0; o < OUT; ++o) {
    if (sdpa_mma_owner(o, OUT) != sg) {
      merge_o[sdpa_mma_merge_slot(sg, o, OUT) * SIMD_WIDTH + lane] = acc[o];
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float4 ml[SDPA_MMA_SIMDGROUPS];
  float4 most = float4(-INFINITY);
  for (uint s = 0; s < SDPA_MMA_SIMDGROUPS; ++s) {
    ml[s] = merge_ml[s * SIMD_WIDTH + lane];
    most = max(most, ml[s]);
  }
  float4 w[SDPA_MMA_SIMDGROUPS];  // (weight of query g, -, weight of query g + 8, -)
  for (uint s = 0; s < SDPA_MMA_SIMDGROUPS; ++s) {
    w[s] = float4(ml[s].x == -INFINITY ? 0.0f : sdpa_weight(ml[s].x - most.x), 0.0f,
                  ml[s].z == -INFINITY ? 0.0f : sdpa_weight(ml[s].z - most.z), 0.0f);
  }
  const uint row_lo = g;
  const uint row_hi = g + 8;
  float l_lo = ml[0].y * w[0].x;
  float l_hi = ml[0].w * w[0].z;
  for (uint s = 1; s < SDPA_MMA_SIMDGROUPS; ++s) {
    l_lo = fma(ml[s].y, w[s].x, l_lo);
    l_hi = fma(ml[s].w, w[s].z, l_hi);
  }
  const bool single = args.n_blocks == 1;
  if (!single && sg == 0 && t == 0) {
    if (row_lo < nq) {
      part_ml[(row0 + row_lo) * args.n_blocks + block] = float2(most.x, l_lo);
    }
    if (row_hi < nq) {
      part_ml[(row0 + row_hi) * args.n_blocks + block] = float2(most.z, l_hi);
    }
  }
  constexpr uint PER = OUT / SDPA_MMA_SIMDGROUPS;
  float4 sums[PER];
  for (uint o = 0; o < OUT; ++o) {
    if (sdpa_mma_owner(o, OUT) != sg) {
      continue;
    }
    float4 sum = float4(0.0f);
    for (uint s = 0; s < SDPA_MMA_SIMDGROUPS; ++s) {
      float4 part = acc[o];
      if (s != sg) {
        part = merge_o[sdpa_mma_merge_slot(s, o, OUT) * SIMD_WIDTH + lane];
      }
      const float4 weight = float4(w[s].x, w[s].x, w[s].z, w[s].z);
      sum = s == 0 ? part * weight : fma(part, weight, sum);
    }
    sums[o % PER] = sum;
  }
  if (single) {
    sdpa_mma_store_output<T, D>(args, out, sums, tile.y, j0, l_lo, l_hi, sg * PER, g, t, nq);
  } else {
    sdpa_mma_store_sums<D>(part_o, sums, row0, args.n_blocks, block, sg * PER, g, t, nq);
  }
}

MTLINV_KERNEL(sdpa_mma_d64_f16, sdpa_mma, half, true, 64)
MTLINV_KERNEL(sdpa_mma_d128_f16, sdpa_mma, half, true, 128)
MTLINV_KERNEL(sdpa_mma_d64_bf16, sdpa_mma, bfloat, true, 64)
MTLINV_KERNEL(sdpa_mma_d128_bf16, sdpa_mma, bfloat, true, 128)
MTLINV_KERNEL(sdpa_mma_d64_unaligned_f16, sdpa_mma, half, false, 64)
MTLINV_KERNEL(sdpa_mma_d128_unaligned_f16, sdpa_mma, half, false, 128)
MTLINV_KERNEL(sdpa_mma_d64_unaligned_bf16, sdpa_mma, bfloat, false, 64)
MTLINV_KERNEL(sdpa_mma_d128_unaligned_bf16, sdpa_mma, bfloat, false, 128)
