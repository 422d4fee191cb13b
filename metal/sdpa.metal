// Scaled dot-product attention: out = softmax(scale * q k^T, causal mask) v, float32 softmax and accumulation.
//
// Two-pass kernels (decode, verification, short blocks): pass 1 (sdpa_blocks; on the canonical path of a device
// with matrix units, for 16-bit dtypes and head dims 64 and 128, sdpa_mma of metal/sdpa_mma.metal) splits the keys
// into blocks of consecutive keys (sdpa_chunk_range in metal/sdpa_args.h: block_keys each, or growing with the
// position past tier_keys), and writes per (query, block) the block's float32 max score m, sum of exponentials l
// and unnormalised output o[D]; pass 2 (sdpa_combine) merges the blocks of each query in index order and
// normalises. A call of one block has pass 1 write the output itself, with the bits pass 2 would give
// (sdpa_single_chunk_output in metal/sdpa_out.h). The plan picks the blocks:
//   * canonical path: chunks at absolute positions, placed by a function of D, dtype and device only. Within a
//     chunk every reduction order is fixed by its size and D, and a query at position p reads the chunks up to the
//     one holding p, each over the keys <= p it holds: exactly what a single-query call over the first p+1 keys
//     computes, so the query's bits cannot depend on Lq, kv_len beyond p, or other queries (design.md §2).
//   * small-Lq throughput path: a block count chosen from Lq and kv_len to fill the device, as engines do today
//     (MLX's sdpa_vector_2pass); the bits then depend on Lq.
// Single-pass kernel (prefill): sdpa_flash_*, a tiled flash attention with an online softmax per query.
// The kernels that read q, k and v come in two builds: vector loads (rows 16-byte aligned, the usual case) and
// element loads (*_unaligned_*); both compute the same bits.
//
// Scores are kept in base 2 (scale * log2(e) folded into the scale), so every exponential is an exp2: the weights of
// sdpa_weight (metal/sdpa_keys.h).
#include "common.h"
#include "sdpa_args.h"  // SdpaArgs; SDPA_THREADS, SDPA_QUERIES, SDPA_BLOCK_KEYS, SDPA_COMBINE_*, FLASH_*
#include "sdpa_keys.h"
#include "sdpa_out.h"
#include "load.h"

constant constexpr uint SDPA_COMBINE_LOADS = 8;    // blocks whose partials one sdpa_combine thread loads together
constant constexpr uint SDPA_MAX_D = 256;          // head_dim at most
constant constexpr uint SDPA_MAX_D4 = SDPA_MAX_D / 4;
// The softmax of a block gives each query SDPA_SLICES threads, each over SDPA_SLICE_KEYS consecutive keys: 16
// slices in either query tile, so a query's sums do not depend on the tile (with Q = 4, half the threads idle).
constant constexpr uint SDPA_SLICES = SDPA_THREADS / SDPA_QUERIES;
constant constexpr uint SDPA_SLICE_KEYS = SDPA_BLOCK_KEYS / SDPA_SLICES;

constant constexpr uint FLASH_TILE = 768;    // float4 slots of one staged K or V tile: 12 KiB each

// Keys of the block starting at key `first` that query jj of the tile starting at query j0 sees (0 past nq).
inline uint sdpa_visible_keys(constant SdpaArgs& args, uint j0, uint jj, uint nq, uint first) {
  if (jj >= nq) {
    return 0;
  }
  const uint last = sdpa_last_key(args, (j0 + jj) % args.q_len);
  return last >= first ? min(args.block_keys, last - first + 1) : 0;
}

// Four consecutive elements as floats: one vector load in the kernels the plan picks when q, k and v are 16-byte
// aligned (VEC), else element by element. Both hand the same floats on, converted by the same vector conversion
// (metal/load.h says why). VEC is a template parameter, not a runtime flag: a compiler may execute both sides of a
// runtime choice and keep one, and a speculated aligned vector load from a misaligned row faults (the emulator's
// fast build does exactly that).
template <bool VEC, typename T>
inline float4 sdpa_load4(device const T* p) {
  if (VEC) {
    return float4(*((device const vec<T, 4>*)p));
  }
  return float4(vec<T, 4>(p[0], p[1], p[2], p[3]));
}

// The four lanes of a dot-product accumulator, added in a fixed order.
inline float sdpa_hsum(float4 a) {
  return (a.x + a.y) + (a.z + a.w);
}

// Pass 1 works on 16-byte units of the K and V rows: E = 16 / sizeof(T) elements each, U = D / E per row. The
// head dim is a template parameter of its two loops (sdpa_block_scores, sdpa_block_pv), so their unit loops have
// constant trip counts: a thread issues a chunk of loads before the arithmetic that uses them, instead of waiting
// for each load in turn. sdpa_blocks picks the instance from D at run time.

// Units of one row loaded together: the largest of 8, 6, 5, 4, 2 that divides the unit count and is at most
// `most` (else 1).
constexpr uint sdpa_chunk(uint units, uint most) {
  return most >= 8 && units % 8 == 0   ? 8
         : most >= 6 && units % 6 == 0 ? 6
         : most >= 5 && units % 5 == 0 ? 5
         : most >= 4 && units % 4 == 0 ? 4
         : units % 2 == 0              ? 2
                                       : 1;
}

// Scores of one block: thread tid owns keys tid, tid + 128 of the block. Per key and query, one float4 fma
// chain over the row in ascending order (the query loop innermost, so a query's chain is the same whatever the
// other queries of the tile are), then a fixed horizontal sum.
template <typename T, bool VEC, uint D, uint Q>
inline void sdpa_block_scores(constant SdpaArgs& args, device const T* k, threadgroup const float4* q_tile,
                              threadgroup float* scores, uint nq, uint n_keys, uint first, uint tid) {
  constexpr uint E = 16 / sizeof(T);
  constexpr uint U = D / E;
  // Keys a thread computes together: 2 in the 4-query tile, so each q value read from threadgroup memory serves
  // both (half the reads), with half as many units per key in flight (the same 128 bytes per thread).
  constexpr uint KEYS = Q == 4 ? 2 : 1;
  constexpr uint CHUNK = sdpa_chunk(U, 8 / KEYS);
  for (uint t0 = tid; t0 < n_keys; t0 += KEYS * SDPA_THREADS) {
    device const T* kr[KEYS];
    float4 acc[KEYS][Q];
    for (uint kk = 0; kk < KEYS; ++kk) {
      // A key past the block's last is read as the last key, never stored.
      kr[kk] = k + ulong(first + min(t0 + kk * SDPA_THREADS, n_keys - 1)) * D;
      for (uint jj = 0; jj < Q; ++jj) {
        acc[kk][jj] = float4(0.0f);
      }
    }
    for (uint u0 = 0; u0 < U; u0 += CHUNK) {
      uint4 raw[KEYS][CHUNK];
      for (uint kk = 0; kk < KEYS; ++kk) {
        for (uint c = 0; c < CHUNK; ++c) {
          raw[kk][c] = load16_unit<T, VEC>(kr[kk] + (u0 + c) * E);
        }
      }
      for (uint c = 0; c < CHUNK; ++c) {
        float kf[KEYS][E];
        for (uint kk = 0; kk < KEYS; ++kk) {
          widen16<T>(raw[kk][c], kf[kk]);
        }
        for (uint h = 0; h < E / 4; ++h) {
          const uint d4 = (u0 + c) * (E / 4) + h;
          // A constant trip count and a uniform test: GPU compilers unroll it and keep acc in registers.
          for (uint jj = 0; jj < Q; ++jj) {
            if (jj < nq) {
              const float4 q4 = q_tile[jj * SDPA_MAX_D4 + d4];
              for (uint kk = 0; kk < KEYS; ++kk) {
                const float4 k4 = float4(kf[kk][4 * h], kf[kk][4 * h + 1], kf[kk][4 * h + 2], kf[kk][4 * h + 3]);
                acc[kk][jj] = fma(q4, k4, acc[kk][jj]);
              }
            }
          }
        }
      }
    }
    for (uint kk = 0; kk < KEYS; ++kk) {
      const uint t = t0 + kk * SDPA_THREADS;
      for (uint jj = 0; jj < Q; ++jj) {
        if (jj < nq && t < n_keys) {
          scores[jj * SDPA_BLOCK_KEYS + t] = sdpa_hsum(acc[kk][jj]) * args.scale_log2;
        }
      }
    }
  }
}

// p @ v of one block: thread tid owns unit u = tid % U of the V rows (output elements [u E, u E + E)) over the
// split tid / U of the block's keys; 128 / U splits of ceil(block_keys / splits) consecutive keys. Each split sums
// its weighted V rows in ascending key order, the splits are added in index order through `running`, and the last
// one writes the block's o: to part_o, or, where the call has one block, to `running` for sdpa_blocks to write the
// output from. The split count is a function of D and the dtype alone.
template <typename T, bool VEC, uint D, uint Q>
inline void sdpa_block_pv(constant SdpaArgs& args, device const T* v, threadgroup const float* scores,
                          threadgroup float* running, device float* part_o, thread const uint* visible, uint nq,
                          uint n_keys, uint first, ulong out_row0, uint block, uint tid) {
  constexpr uint E = 16 / sizeof(T);
  constexpr uint U = D / E;
  constexpr uint SPLITS = SDPA_THREADS / U;
  constexpr uint KEYS_PER_LOAD = 8;  // V rows loaded together
  const uint split = tid / U;
  const uint u = tid % U;
  const uint split_keys = (args.block_keys + SPLITS - 1) / SPLITS;

  float acc[Q][E];
  for (uint jj = 0; jj < Q; ++jj) {
    for (uint i = 0; i < E; ++i) {
      acc[jj][i] = 0.0f;
    }
  }
  if (split < SPLITS) {
    const uint t_begin = split * split_keys;
    const uint t_stop = min(t_begin + split_keys, n_keys);
    for (uint t0 = t_begin; t0 < t_stop; t0 += KEYS_PER_LOAD) {
      uint4 raw[KEYS_PER_LOAD];
      for (uint c = 0; c < KEYS_PER_LOAD; ++c) {
        const uint t = min(t0 + c, t_stop - 1);  // rows past the split are loaded again, never used
        raw[c] = load16_unit<T, VEC>(v + ulong(first + t) * D + u * E);
      }
      for (uint c = 0; c < KEYS_PER_LOAD; ++c) {
        const uint t = t0 + c;
        if (t < t_stop) {
          float vf[E];
          widen16<T>(raw[c], vf);
          for (uint jj = 0; jj < Q; ++jj) {
            if (jj < nq && t < visible[jj]) {
              const float p = scores[jj * SDPA_BLOCK_KEYS + t];
              for (uint i = 0; i < E; ++i) {
                acc[jj][i] = fma(p, vf[i], acc[jj][i]);
              }
            }
          }
        }
      }
    }
  }
  // After round s, running holds ((split 0 + split 1) + ...) + split s.
  for (uint s = 0; s < SPLITS; ++s) {
    if (split == s) {
      for (uint jj = 0; jj < Q; ++jj) {
        if (jj < nq) {
          for (uint i = 0; i < E; ++i) {
            const uint d = u * E + i;
            const float total = s > 0 ? running[jj * SDPA_MAX_D + d] + acc[jj][i] : acc[jj][i];
            if (s + 1 < SPLITS || args.n_blocks == 1) {
              running[jj * SDPA_MAX_D + d] = total;
            } else {
              part_o[((out_row0 + jj) * args.n_blocks + block) * D + d] = total;
            }
          }
        }
      }
    }
    if (s + 1 < SPLITS) {
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
}

// Pass 1. Grid: (query tiles, n_blocks, B * Hkv); SDPA_THREADS threads. A threadgroup takes one block of keys of
// one kv head and up to Q of the group * Lq queries of that head (query heads h*G .. h*G+G-1, all positions), so
// each K and V row of the block is loaded once per tile of queries, not once per query. Q (4 or 8) is a template
// parameter the plan picks from G * Lq; a query's arithmetic is the same in either tile, and Q = 4 (a decoding
// step of GQA groups up to 4) needs half the accumulator registers, so more threadgroups fit on a core.
// Phases, each over fixed index sets:
//   scores   sdpa_block_scores
//   softmax  16 threads per query, 16 consecutive keys each: slice maxima, the block max (slices in order),
//            then the weights 2^(s - m) (sdpa_weight) and slice sums in key order
//   p @ v    sdpa_block_pv
// A query's results depend on the keys it sees in the block, block_keys, D and the dtype alone. Masked keys are
// skipped, never weighted by zero; a query that sees no key of the block writes m = -inf, l = 0, o = 0.
template <typename T, bool VEC, uint Q>
[[kernel]] void sdpa_blocks(
    constant SdpaArgs& args [[buffer(SDPA_SLOT_ARGS)]],
    device const T* q [[buffer(SDPA_SLOT_Q)]],
    device const T* k [[buffer(SDPA_SLOT_K)]],
    device const T* v [[buffer(SDPA_SLOT_V)]],
    device float* part_o [[buffer(SDPA_SLOT_PART_O)]],
    device float2* part_ml [[buffer(SDPA_SLOT_PART_ML)]],
    device T* out [[buffer(SDPA_SLOT_OUT)]],
    uint3 tile [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float4 q_tile[SDPA_QUERIES * SDPA_MAX_D4];
  threadgroup float scores[SDPA_QUERIES * SDPA_BLOCK_KEYS];
  threadgroup float running[SDPA_QUERIES * SDPA_MAX_D];
  threadgroup float slice_max[SDPA_QUERIES][SDPA_SLICES];
  threadgroup float slice_sum[SDPA_QUERIES][SDPA_SLICES];
  threadgroup float query_l[SDPA_QUERIES];  // a call of one block: each query's l, for its output

  const uint D = args.head_dim;
  const uint D4 = D / 4;
  const uint per_head = args.group * args.q_len;  // queries served by one kv head
  const uint j0 = tile.x * Q;                     // first query of the tile, numbered g * Lq + i
  const uint nq = min(Q, per_head - j0);
  const uint block = tile.y;
  // q [B, Hq, Lq, D] is [B, Hkv, G * Lq, D]: the tile's queries are consecutive rows, as are its scratch rows.
  const ulong row0 = ulong(tile.z) * per_head + j0;
  q += row0 * D;
  k += ulong(tile.z) * args.kv_capacity * D;
  v += ulong(tile.z) * args.kv_capacity * D;

  // Key t of the block is first + t.
  const uint first = block * args.block_keys;
  uint visible[SDPA_QUERIES];  // keys of the block each query sees: t < visible[jj]
  uint n_keys = 0;             // keys any query of the tile sees
  for (uint jj = 0; jj < SDPA_QUERIES; ++jj) {
    visible[jj] = sdpa_visible_keys(args, j0, jj, nq, first);
    n_keys = max(n_keys, visible[jj]);
  }

  for (uint idx = tid; idx < nq * D4; idx += SDPA_THREADS) {
    q_tile[(idx / D4) * SDPA_MAX_D4 + idx % D4] = sdpa_load4<VEC>(q + (idx / D4) * D + (idx % D4) * 4);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  switch (D) {
    case 64: sdpa_block_scores<T, VEC, 64, Q>(args, k, q_tile, scores, nq, n_keys, first, tid); break;
    case 80: sdpa_block_scores<T, VEC, 80, Q>(args, k, q_tile, scores, nq, n_keys, first, tid); break;
    case 96: sdpa_block_scores<T, VEC, 96, Q>(args, k, q_tile, scores, nq, n_keys, first, tid); break;
    case 128: sdpa_block_scores<T, VEC, 128, Q>(args, k, q_tile, scores, nq, n_keys, first, tid); break;
    default: sdpa_block_scores<T, VEC, 256, Q>(args, k, q_tile, scores, nq, n_keys, first, tid); break;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  // Softmax of the block: thread (sq, slice) covers keys [slice * 16, slice * 16 + 16) of query sq.
  const uint sq = tid / SDPA_SLICES;
  const uint slice = tid % SDPA_SLICES;
  const uint t_begin = slice * SDPA_SLICE_KEYS;
  // Computed again rather than read from visible[sq]: an array indexed by a variable would go to the stack.
  const uint t_end = min(t_begin + SDPA_SLICE_KEYS, sdpa_visible_keys(args, j0, sq, nq, first));
  float slice_m = -INFINITY;
  for (uint t = t_begin; t < t_end; ++t) {
    slice_m = sdpa_max(slice_m, scores[sq * SDPA_BLOCK_KEYS + t]);
  }
  slice_max[sq][slice] = slice_m;
  threadgroup_barrier(mem_flags::mem_threadgroup);

  float m = slice_max[sq][0];
  for (uint s = 1; s < SDPA_SLICES; ++s) {
    m = sdpa_max(m, slice_max[sq][s]);
  }
  float slice_l = 0.0f;
  for (uint t = t_begin; t < t_end; ++t) {
    const float e = sdpa_weight(scores[sq * SDPA_BLOCK_KEYS + t] - m);
    scores[sq * SDPA_BLOCK_KEYS + t] = e;
    slice_l += e;
  }
  slice_sum[sq][slice] = slice_l;
  threadgroup_barrier(mem_flags::mem_threadgroup);

  if (slice == 0 && sq < nq) {
    float l = slice_sum[sq][0];
    for (uint s = 1; s < SDPA_SLICES; ++s) {
      l += slice_sum[sq][s];
    }
    if (args.n_blocks == 1) {
      query_l[sq] = l;
    } else {
      part_ml[(row0 + sq) * args.n_blocks + block] = float2(m, l);
    }
  }

  switch (D) {
    case 64:
      sdpa_block_pv<T, VEC, 64, Q>(args, v, scores, running, part_o, visible, nq, n_keys, first, row0, block, tid);
      break;
    case 80:
      sdpa_block_pv<T, VEC, 80, Q>(args, v, scores, running, part_o, visible, nq, n_keys, first, row0, block, tid);
      break;
    case 96:
      sdpa_block_pv<T, VEC, 96, Q>(args, v, scores, running, part_o, visible, nq, n_keys, first, row0, block, tid);
      break;
    case 128:
      sdpa_block_pv<T, VEC, 128, Q>(args, v, scores, running, part_o, visible, nq, n_keys, first, row0, block, tid);
      break;
    default:
      sdpa_block_pv<T, VEC, 256, Q>(args, v, scores, running, part_o, visible, nq, n_keys, first, row0, block, tid);
      break;
  }

  // A call of one block: its o is in `running`, and this is the output (sdpa_single_chunk_output, metal/sdpa_out.h).
  if (args.n_blocks == 1) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint idx = tid; idx < nq * D; idx += SDPA_THREADS) {
      const uint jj = idx / D;
      const uint d = idx % D;
      out[sdpa_out_row_of(args, tile.z, j0 + jj) * D + d] =
          T(sdpa_single_chunk_output(running[jj * SDPA_MAX_D + d], query_l[jj]));
    }
  }
}

// The partials of blocks j0 .. j0 + SDPA_COMBINE_LOADS - 1 of sdpa_combine's range (ending at j_end) for one column:
// blocks past the range load the range's last block again, never used. (n >= 1, so j_end >= 1 even for an empty
// range, and every load is in bounds.)
inline void sdpa_combine_load(device const float2* part_ml, device const float4* part_o, uint D4, uint j0,
                              uint j_end, thread float2* ml, thread float4* po) {
  for (uint b = 0; b < SDPA_COMBINE_LOADS; ++b) {
    const uint j = min(j0 + b, j_end - 1);
    ml[b] = part_ml[j];
    po[b] = part_o[j * D4];
  }
}

// Pass 2. Grid: (Lq * ceil(D/4 / SDPA_COMBINE_COLUMNS), Hq, B); SDPA_COMBINE_GROUPS * SDPA_COMBINE_COLUMNS threads:
// thread (g, c) works on output elements [4 d4, 4 d4 + 4), d4 = SDPA_COMBINE_COLUMNS x + c for the threadgroup's
// column tile x, of one query, and the g-th of SDPA_COMBINE_GROUPS consecutive ranges of its blocks. Columns never
// meet, so splitting them over threadgroups changes no bits; it puts 4 threadgroups per query to work at D = 128
// where a decoding step has only Hq queries.
// Only the blocks holding a key the query sees are read: n = p/S + 1 of them on the canonical path, none empty;
// blocks past the query's position, present when it shares a call with later queries, are never touched.
// The merge is a function of n alone: the max over all n blocks, then per range the rescaled sums in block
// order, then the range sums in range order. Ranges are ceil(n / groups) blocks (the last ones may be short or
// empty), so a long context merges in parallel instead of one block after another: up to 128 blocks (32K keys in
// blocks of 256, 64K in sdpa_mma's growing chunks: 88; past 128, a range takes more rounds), each thread loads its
// range's partials in one round, and that round is loaded before the max, so such a query waits on memory once. 16
// ranges rather than 32 halve the threads: verifying 8 queries with Hq = 32 is 1024 threadgroups, which an H200
// holds at 7 per core (924; 8 since nvcc gives the kernel 64 registers, not 72) where it held 4 of 256 threads.
// There both passes took up to 7% less time, never more (at 16K keys 26.8 -> 26.0 us for one query, 42.3 -> 40.0
// for 8; docs/decisions.md, "sdpa: pass 2 (sdpa_combine)").
template <typename T>
[[kernel]] void sdpa_combine(
    constant SdpaArgs& args [[buffer(SDPA_SLOT_ARGS)]],
    device const float4* part_o [[buffer(SDPA_SLOT_PART_O)]],
    device const float2* part_ml [[buffer(SDPA_SLOT_PART_ML)]],
    device T* out [[buffer(SDPA_SLOT_OUT)]],
    uint3 pos [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  threadgroup float range_max[SDPA_COMBINE_GROUPS];
  threadgroup float range_l[SDPA_COMBINE_GROUPS];
  threadgroup float4 range_o[SDPA_COMBINE_GROUPS][SDPA_COMBINE_COLUMNS];

  const uint D4 = args.head_dim / 4;
  const uint column_tiles = (D4 + SDPA_COMBINE_COLUMNS - 1) / SDPA_COMBINE_COLUMNS;
  const uint g = tid / SDPA_COMBINE_COLUMNS;
  const uint c = tid % SDPA_COMBINE_COLUMNS;
  const uint d4 = pos.x % column_tiles * SDPA_COMBINE_COLUMNS + c;
  const bool column = d4 < D4;  // the last tile of D = 80 or 96 has idle threads; they join the barriers
  const uint i = pos.x / column_tiles;
  const ulong row = (ulong(pos.z) * args.q_heads + pos.y) * args.q_len + i;
  const uint last = sdpa_last_key(args, i);
  const uint n = min(args.n_blocks, sdpa_chunk_of(args.block_keys, args.tier_keys, last) + 1);
  const uint per_range = (n + SDPA_COMBINE_GROUPS - 1) / SDPA_COMBINE_GROUPS;
  const uint j_begin = min(n, g * per_range);
  const uint j_end = min(n, j_begin + per_range);
  part_ml += row * args.n_blocks;
  part_o += row * args.n_blocks * D4 + min(d4, D4 - 1);

  float2 ml[SDPA_COMBINE_LOADS];
  float4 po[SDPA_COMBINE_LOADS];
  sdpa_combine_load(part_ml, part_o, D4, j_begin, j_end, ml, po);
  float m = -INFINITY;
  for (uint b = 0; b < SDPA_COMBINE_LOADS; ++b) {
    m = j_begin + b < j_end ? sdpa_max(m, ml[b].x) : m;
  }
  for (uint j = j_begin + SDPA_COMBINE_LOADS; j < j_end; ++j) {
    m = sdpa_max(m, part_ml[j].x);
  }
  if (c == 0) {
    range_max[g] = m;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  m = range_max[0];
  for (uint r = 1; r < SDPA_COMBINE_GROUPS; ++r) {
    m = sdpa_max(m, range_max[r]);
  }

  float l = 0.0f;
  float4 o = float4(0.0f);
  // SDPA_COMBINE_LOADS blocks loaded together (the first round above), then merged one by one.
  for (uint j0 = j_begin; j0 < j_end; j0 += SDPA_COMBINE_LOADS) {
    if (j0 != j_begin) {
      sdpa_combine_load(part_ml, part_o, D4, j0, j_end, ml, po);
    }
    for (uint b = 0; b < SDPA_COMBINE_LOADS; ++b) {
      if (j0 + b < j_end) {
        const float w = sdpa_weight(ml[b].x - m);
        l = fma(ml[b].y, w, l);
        o = fma(po[b], float4(w), o);
      }
    }
  }
  range_o[g][c] = o;
  if (c == 0) {
    range_l[g] = l;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  if (g == 0 && column) {
    for (uint r = 1; r < SDPA_COMBINE_GROUPS; ++r) {
      o += range_o[r][c];
      l += range_l[r];
    }
    sdpa_store4(out + sdpa_out_row(args, pos.z, pos.y, i) * args.head_dim + d4 * 4, sdpa_output4(o, l));
  }
}

// Prefill: tiled flash attention in one pass. Grid: (ceil(Lq / FLASH_QUERIES), Hq, B); FLASH_LANES threads per
// query, adjacent in a simdgroup, each holding D / FLASH_LANES of the query and of its output accumulator (float4
// d4 = lane, lane + FLASH_LANES, ...) in registers: one thread per query held 2 D floats, and at D = 128 nvcc gave
// it 255 registers and spilled (docs/decisions.md, "sdpa_flash: lanes per query"). The threadgroup stages tiles of
// K and V rows as float in threadgroup memory (FLASH_TILE / (D/4) keys per tile) up to the last key its last query
// sees; each query runs an online softmax over the visible keys of each tile, rescaling its accumulator once per
// tile. A score is the lanes' partial dot products summed by an xor ladder, so each lane of a query holds the same
// bits; the score loop runs over the whole tile in every lane (the ladder needs converged lanes), a key past the
// query's last visible one taking no part. One instance per head dim D (the plan picks it): constant trip counts
// keep the arrays in registers (docs/kernel_guide.md). A query's scores of a tile, indexed by the key, are in
// threadgroup memory, written by its first lane.
template <typename T, bool VEC, uint D>
[[kernel]] void sdpa_flash(
    constant SdpaArgs& args [[buffer(SDPA_SLOT_ARGS)]],
    device const T* q [[buffer(SDPA_SLOT_Q)]],
    device const T* k [[buffer(SDPA_SLOT_K)]],
    device const T* v [[buffer(SDPA_SLOT_V)]],
    device T* out [[buffer(SDPA_SLOT_OUT)]],
    uint3 pos [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  constexpr uint D4 = D / 4;
  constexpr uint OWN = D4 / FLASH_LANES;  // float4 of q and of the accumulator per lane
  static_assert(OWN * FLASH_LANES == D4, "the lanes of a query split its head dim evenly");
  constexpr uint THREADS = FLASH_QUERIES * FLASH_LANES;
  constexpr uint TILE_KEYS = FLASH_TILE / D4;
  threadgroup float4 k_tile[FLASH_TILE];
  threadgroup float4 v_tile[FLASH_TILE];
  threadgroup float scores[TILE_KEYS * FLASH_QUERIES];  // key t of query qi at t * FLASH_QUERIES + qi

  const uint qi = tid / FLASH_LANES;   // the threadgroup's query this thread serves
  const uint lane = tid % FLASH_LANES;  // its part of the head dim
  const uint i = pos.x * FLASH_QUERIES + qi;
  const bool active = i < args.q_len;
  const ulong row = (ulong(pos.z) * args.q_heads + pos.y) * args.q_len + i;
  const ulong kv_head = ulong(pos.z) * args.kv_heads + pos.y / args.group;
  k += kv_head * args.kv_capacity * D;
  v += kv_head * args.kv_capacity * D;
  const uint end = sdpa_last_key(args, min(args.q_len, (pos.x + 1) * FLASH_QUERIES) - 1) + 1;
  const uint last = active ? sdpa_last_key(args, i) : 0;

  float4 qv[OWN];
  float4 acc[OWN];
  for (uint e = 0; e < OWN; ++e) {
    qv[e] = active ? sdpa_load4<VEC>(q + row * D + (lane + e * FLASH_LANES) * 4) : float4(0.0f);
    acc[e] = float4(0.0f);
  }
  float m = -INFINITY;
  float l = 0.0f;

  for (uint k0 = 0; k0 < end; k0 += TILE_KEYS) {
    const uint n = min(TILE_KEYS, end - k0);
    // The tile's rows are contiguous: slot idx holds elements [4 idx, 4 idx + 4) from key k0 on.
    for (uint idx = tid; idx < n * D4; idx += THREADS) {
      const ulong offset = ulong(k0) * D + idx * 4;
      k_tile[idx] = sdpa_load4<VEC>(k + offset);
      v_tile[idx] = sdpa_load4<VEC>(v + offset);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    const uint nv = active && last >= k0 ? min(n, last - k0 + 1) : 0;  // the query's visible keys in the tile
    float m_tile = -INFINITY;
    for (uint t = 0; t < n; ++t) {
      float4 dot4 = float4(0.0f);
      for (uint e = 0; e < OWN; ++e) {
        dot4 = fma(qv[e], k_tile[t * D4 + lane + e * FLASH_LANES], dot4);
      }
      float s = sdpa_hsum(dot4);
      for (ushort delta = 1; delta < FLASH_LANES; delta <<= 1) {
        s += simd_shuffle_xor(s, delta);  // a + b = b + a: every lane of the query gets the same bits
      }
      s *= args.scale_log2;
      if (t < nv) {
        if (lane == 0) {
          scores[t * FLASH_QUERIES + qi] = s;
        }
        m_tile = sdpa_max(m_tile, s);
      }
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);  // the first lane's scores, for the query's other lanes

    if (nv > 0) {
      const float m_new = sdpa_max(m, m_tile);
      const float factor = sdpa_weight(m - m_new);
      l *= factor;
      for (uint e = 0; e < OWN; ++e) {
        acc[e] *= factor;
      }
      for (uint t = 0; t < nv; ++t) {
        const float p = sdpa_weight(scores[t * FLASH_QUERIES + qi] - m_new);
        l += p;
        for (uint e = 0; e < OWN; ++e) {
          acc[e] = fma(float4(p), v_tile[t * D4 + lane + e * FLASH_LANES], acc[e]);
        }
      }
      m = m_new;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  if (active) {
    device T* out_row = out + sdpa_out_row(args, pos.z, pos.y, i) * D;
    for (uint e = 0; e < OWN; ++e) {
      sdpa_store4(out_row + (lane + e * FLASH_LANES) * 4, sdpa_output4(acc[e], l));
    }
  }
}

MTLINV_KERNEL(sdpa_blocks_q4_f32, sdpa_blocks, float, true, 4)
MTLINV_KERNEL(sdpa_blocks_q8_f32, sdpa_blocks, float, true, 8)
MTLINV_KERNEL(sdpa_blocks_q4_f16, sdpa_blocks, half, true, 4)
MTLINV_KERNEL(sdpa_blocks_q8_f16, sdpa_blocks, half, true, 8)
MTLINV_KERNEL(sdpa_blocks_q4_bf16, sdpa_blocks, bfloat, true, 4)
MTLINV_KERNEL(sdpa_blocks_q8_bf16, sdpa_blocks, bfloat, true, 8)
MTLINV_KERNEL(sdpa_blocks_q4_unaligned_f32, sdpa_blocks, float, false, 4)
MTLINV_KERNEL(sdpa_blocks_q8_unaligned_f32, sdpa_blocks, float, false, 8)
MTLINV_KERNEL(sdpa_blocks_q4_unaligned_f16, sdpa_blocks, half, false, 4)
MTLINV_KERNEL(sdpa_blocks_q8_unaligned_f16, sdpa_blocks, half, false, 8)
MTLINV_KERNEL(sdpa_blocks_q4_unaligned_bf16, sdpa_blocks, bfloat, false, 4)
MTLINV_KERNEL(sdpa_blocks_q8_unaligned_bf16, sdpa_blocks, bfloat, false, 8)
MTLINV_KERNEL(sdpa_combine_f32, sdpa_combine, float)
MTLINV_KERNEL(sdpa_combine_f16, sdpa_combine, half)
MTLINV_KERNEL(sdpa_combine_bf16, sdpa_combine, bfloat)
// sdpa_flash: one instance per head dim the op supports (src/core/plans/sdpa.h, kSdpaHeadDims).
MTLINV_KERNEL(sdpa_flash_d64_f32, sdpa_flash, float, true, 64)
MTLINV_KERNEL(sdpa_flash_d64_f16, sdpa_flash, half, true, 64)
MTLINV_KERNEL(sdpa_flash_d64_bf16, sdpa_flash, bfloat, true, 64)
MTLINV_KERNEL(sdpa_flash_d80_f32, sdpa_flash, float, true, 80)
MTLINV_KERNEL(sdpa_flash_d80_f16, sdpa_flash, half, true, 80)
MTLINV_KERNEL(sdpa_flash_d80_bf16, sdpa_flash, bfloat, true, 80)
MTLINV_KERNEL(sdpa_flash_d96_f32, sdpa_flash, float, true, 96)
MTLINV_KERNEL(sdpa_flash_d96_f16, sdpa_flash, half, true, 96)
MTLINV_KERNEL(sdpa_flash_d96_bf16, sdpa_flash, bfloat, true, 96)
MTLINV_KERNEL(sdpa_flash_d128_f32, sdpa_flash, float, true, 128)
MTLINV_KERNEL(sdpa_flash_d128_f16, sdpa_flash, half, true, 128)
MTLINV_KERNEL(sdpa_flash_d128_bf16, sdpa_flash, bfloat, true, 128)
MTLINV_KERNEL(sdpa_flash_d256_f32, sdpa_flash, float, true, 256)
MTLINV_KERNEL(sdpa_flash_d256_f16, sdpa_flash, half, true, 256)
MTLINV_KERNEL(sdpa_flash_d256_bf16, sdpa_flash, bfloat, true, 256)
MTLINV_KERNEL(sdpa_flash_d64_unaligned_f32, sdpa_flash, float, false, 64)
MTLINV_KERNEL(sdpa_flash_d64_unaligned_f16, sdpa_flash, half, false, 64)
MTLINV_KERNEL(sdpa_flash_d64_unaligned_bf16, sdpa_flash, bfloat, false, 64)
MTLINV_KERNEL(sdpa_flash_d80_unaligned_f32, sdpa_flash, float, false, 80)
MTLINV_KERNEL(sdpa_flash_d80_unaligned_f16, sdpa_flash, half, false, 80)
MTLINV_KERNEL(sdpa_flash_d80_unaligned_bf16, sdpa_flash, bfloat, false, 80)
MTLINV_KERNEL(sdpa_flash_d96_unaligned_f32, sdpa_flash, float, false, 96)
MTLINV_KERNEL(sdpa_flash_d96_unaligned_f16, sdpa_flash, half, false, 96)
MTLINV_KERNEL(sdpa_flash_d96_unaligned_bf16, sdpa_flash, bfloat, false, 96)
MTLINV_KERNEL(sdpa_flash_d128_unaligned_f32, sdpa_flash, float, false, 128)
MTLINV_KERNEL(sdpa_flash_d128_unaligned_f16, sdpa_flash, half, false, 128)
MTLINV_KERNEL(sdpa_flash_d128_unaligned_bf16, sdpa_flash, bfloat, false, 128)
MTLINV_KERNEL(sdpa_flash_d256_unaligned_f32, sdpa_flash, float, false, 256)
MTLINV_KERNEL(sdpa_flash_d256_unaligned_f16, sdpa_flash, half, false, 256)
MTLINV_KERNEL(sdpa_flash_d256_unaligned_bf16, sdpa_flash, bfloat, false, 256)
