// The unit both quantized GEMVs (metal/qgemv.metal, metal/qgemv_mma.metal) load and unpack: a run of 32
// consecutive values of one weight row, starting at a multiple of 32. That is exactly BITS whole words (32 * BITS
// bits) for every width. At group sizes 32, 64 and 128 a run lies inside one group (32 divides them), so it has one
// scale and one bias; at group size 16 (the exact import of GGUF's Q6_K) its halves lie in two groups: the kernels'
// RUN_GROUPS (1 or 2) says which, at compile time, so that the one-group kernels keep their loads and registers. At
// 4 and 8 bits a run is one or two 16-byte groups, loaded as such where the plan proved wq 16-byte aligned; the
// other widths, and unaligned weights, load the same words one by one. Either way the same words reach the same
// arithmetic: the load path never changes a result.
#pragma once
#include "common.h"
#include "load.h"
#include "pair16.h"
#include "qgemv_args.h"  // QGEMV_RUN: K positions (and BITS packed words) of a run
#include "quant.h"       // QuantGroups: a group's scale and bias

constant constexpr uint QGEMV_SUB = 8;  // values unpacked at once

// log2 of the runs of a group: 1, 2 or 4 runs (group sizes 32, 64, 128, which the op checks), so run j lies in
// group j >> shift; 0 at group size 16. A division by a runtime value takes about a dozen instructions on CUDA; both
// GEMVs find a run's group this way (qgemv_run_group).
inline uint qgemv_group_shift(uint group_size) {
  return group_size / QGEMV_RUN / 2;
}

// The first group of run j: j >> shift with RUN_GROUPS 1, 2 j with RUN_GROUPS 2 (group size 16, shift 0), whose
// values [0, 16) lie in group 2 j and [16, 32) in 2 j + 1. With j the runs of a row: the groups of a row.
template <uint RUN_GROUPS>
inline uint qgemv_run_group(uint j, uint shift) {
  static_assert(RUN_GROUPS == 1 || RUN_GROUPS == 2, "a run lies in one group or, at group size 16, in two");
  return (j * RUN_GROUPS) >> shift;
}

// Which of the run's RUN_GROUPS groups holds values [8 s, 8 s + 8): 0, or s / 2 with two groups of 16 values.
template <uint RUN_GROUPS>
inline uint qgemv_sub_group(uint s) {
  return s * RUN_GROUPS / (QGEMV_RUN / QGEMV_SUB);
}

// The values [8 s, 8 s + 8) of a run held in registers (`words`: the run's BITS words): bits [8 s BITS,
// 8 s BITS + 8 BITS) of them, which start on a byte boundary and span at most two words; each half of 4 values
// (4 * BITS <= 32 bits) is cut from them as one window. s is a constant once the caller's loop is unrolled, so
// the word choice and the shifts fold away.
template <uint BITS>
inline void qgemv_unpack(thread const uint* words, uint s, thread uint* q) {
  const uint bit = s * QGEMV_SUB * BITS;
  const uint word = bit / 32;
  const uint shift = bit % 32;
  const uint lo = words[word];
  const uint hi = shift + QGEMV_SUB * BITS > 32 ? words[word + 1] : 0u;
  for (uint h = 0; h < QGEMV_SUB; h += 4) {
    const uint at = shift + h * BITS;
    uint window = at == 0 ? lo : (at >= 32 ? hi >> (at - 32) : (lo >> at) | (hi << (32 - at)));
    for (uint i = 0; i < 4; ++i) {
      q[h + i] = window & ((1u << BITS) - 1u);
      window >>= BITS;
    }
  }
}

// 4 bits: the 8 values are the nibbles of word s. Even and odd nibbles are masked apart once, then each value is
// one byte of either (a byte extract, which GPUs do in one instruction).
template <>
inline void qgemv_unpack<4>(thread const uint* words, uint s, thread uint* q) {
  const uint w = words[s];
  const uint even = w & 0x0F0F0F0Fu;
  const uint odd = (w >> 4) & 0x0F0F0F0Fu;
  for (uint i = 0; i < 4; ++i) {
    q[2 * i] = (even >> (8 * i)) & 0xFFu;
    q[2 * i + 1] = (odd >> (8 * i)) & 0xFFu;
  }
}

// 8 bits: the bytes of words 2 s and 2 s + 1.
template <>
inline void qgemv_unpack<8>(thread const uint* words, uint s, thread uint* q) {
  for (uint i = 0; i < 4; ++i) {
    q[i] = (words[2 * s] >> (8 * i)) & 0xFFu;
    q[4 + i] = (words[2 * s + 1] >> (8 * i)) & 0xFFu;
  }
}

// The BITS words of run j of the weight row starting at word `row`: 16-byte loads where the plan proved wq 16-byte
// aligned (`vector`; runs of 4 and 8 bits are whole 16-byte groups, and a row's K / 32 * BITS words a multiple of
// 4), else word loads; the same words either way. Weights stream past once (load16_streaming).
template <uint BITS>
inline void qgemv_load_words(device const uint* wq, uint row, uint j, bool vector, thread uint* words) {
  device const uint* p = wq + row + j * BITS;
  if (BITS % 4 == 0 && vector) {
    for (uint v = 0; 4 * v < BITS; ++v) {
      const uint4 raw = load16_streaming(p + 4 * v);
      words[4 * v] = raw.x;
      words[4 * v + 1] = raw.y;
      words[4 * v + 2] = raw.z;
      words[4 * v + 3] = raw.w;
    }
  } else {
    for (uint i = 0; i < BITS; ++i) {
      words[i] = p[i];
    }
  }
}

// log2 of the groups of a super-block (QGEMV_SUPER values): group i of a row lies in its super-block
// i >> qgemv_super_shift. 16 groups at group size 16 (RUN_GROUPS 2), else 8 >> shift (group sizes 32, 64, 128).
template <uint RUN_GROUPS>
inline uint qgemv_super_shift(uint group_shift) {
  return RUN_GROUPS == 2 ? 4u : 3u - group_shift;
}

// The words of run j (qgemv_load_words), and the scales and biases of its RUN_GROUPS groups as floats: groups g,
// g + 1, .. of the row's groups starting at `groups_at` (QuantGroups: as stored, or from codes and `supers`).
template <uint BITS, uint RUN_GROUPS, typename S>
inline void qgemv_load_run(device const uint* wq, device const S* scales, device const S* biases,
                           device const float* supers, uint super_shift, uint row, uint groups_at, uint j, uint g,
                           bool vector, thread uint* words, thread float* scale, thread float* bias) {
  qgemv_load_words<BITS>(wq, row, j, vector, words);
  for (uint h = 0; h < RUN_GROUPS; ++h) {
    const uint i = groups_at + g + h;
    scale[h] = float(QuantGroups<S>::scale(scales, supers, i, i >> super_shift));
    bias[h] = float(QuantGroups<S>::bias(biases, supers, i, i >> super_shift));
  }
}

// The values [8 s, 8 s + 8) of a run as four pairs of 16-bit codes, for kernels that dequantise two values per
// instruction (metal/pair16.h): word i holds its pair's codes in bits [0, BITS) and [16, 16 + BITS), and possibly
// other bits above each (quant_code_mask removes them; the dequantisation masks anyway, in the same instruction
// that sets the exponent). The pairs hold the values in the order of qgemv_pair_order: values i and i + 4 of a 4-bit
// word, or i and i + 2 of an 8-bit one, are one shift away from such a pair, where adjacent values would need more.
// Other widths pair adjacent values.
template <uint BITS>
inline uint4 qgemv_code_pairs(thread const uint* words, uint s) {
  uint q[QGEMV_SUB];
  qgemv_unpack<BITS>(words, s, q);
  return uint4(q[0] | (q[1] << 16), q[2] | (q[3] << 16), q[4] | (q[5] << 16), q[6] | (q[7] << 16));
}
// 4 bits: pair i holds values i and i + 4 (nibbles i and i + 4 of word s).
template <>
inline uint4 qgemv_code_pairs<4>(thread const uint* words, uint s) {
  const uint w = words[s];
  return uint4(w, w >> 4, w >> 8, w >> 12);
}
// 8 bits: pairs (0, 2), (1, 3), (4, 6), (5, 7): bytes 0 and 2, then 1 and 3, of words 2 s and 2 s + 1.
template <>
inline uint4 qgemv_code_pairs<8>(thread const uint* words, uint s) {
  const uint lo = words[2 * s];
  const uint hi = words[2 * s + 1];
  return uint4(lo, lo >> 8, hi, hi >> 8);
}

// Eight 16-bit values x_0 .. x_7 (loaded raw: word i holds x_2i, x_2i+1) put in the order of qgemv_code_pairs<BITS>,
// so that word i of both holds the same two K positions.
template <uint BITS>
inline uint4 qgemv_pair_order(uint4 x) {
  return x;
}
template <>
inline uint4 qgemv_pair_order<4>(uint4 x) {
  const uint2 even = pair16_interleave(x.x, x.z);  // (x0, x4), (x1, x5)
  const uint2 odd = pair16_interleave(x.y, x.w);   // (x2, x6), (x3, x7)
  return uint4(even.x, even.y, odd.x, odd.y);
}
template <>
inline uint4 qgemv_pair_order<8>(uint4 x) {
  const uint2 lo = pair16_interleave(x.x, x.y);  // (x0, x2), (x1, x3)
  const uint2 hi = pair16_interleave(x.z, x.w);  // (x4, x6), (x5, x7)
  return uint4(lo.x, lo.y, hi.x, hi.y);
}
