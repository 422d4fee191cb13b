#include "sdpa.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

#include "../errors.h"
#include "../kernel_args.h"
#include "../kernels.h"
#include "../limit.h"
#include "../../../metal/sdpa_args.h"

namespace mtlinv {

static_assert(sizeof(SdpaArgs) == 56, "SdpaArgs layout must match metal/sdpa_args.h on every target");

// The kernels' geometry (SDPA_*, FLASH_*) is metal/sdpa_args.h's; these are the plan's own choices.
namespace {
constexpr uint32_t kMmaChunkKeys = 256;   // sdpa_mma's chunks in tier 0 (docs/decisions.md, "sdpa: chunks")
constexpr uint32_t kMmaTierKeys = 4096;   // where sdpa_mma's tier 0 ends
constexpr int64_t kSplitMinKeys = 32;     // split blocks shorter than this cost more in pass 2 than they gain
constexpr int64_t kSplitWavesPerCore = 4; // threadgroups per compute unit the split path aims for
// sdpa_mma's simdgroups take a share of a chunk each, in whole steps; its threadgroup is sdpa_blocks' size.
static_assert(kMmaChunkKeys % (SDPA_MMA_SIMDGROUPS * SDPA_MMA_STEP) == 0, "sdpa_mma needs chunks of whole steps");
static_assert(SDPA_MMA_SIMDGROUPS * 32 == SDPA_THREADS, "sdpa_mma and sdpa_blocks launch as many threads");
static_assert(kMmaTierKeys % (4 * kMmaChunkKeys) == 0, "tiers need tier_keys a multiple of 4 block_keys");

// The op's operands: q, k, v, out.
void bind_operands(PlanLaunch& l) {
  l.bind(SDPA_SLOT_Q, PlanBuffer::op(0));
  l.bind(SDPA_SLOT_K, PlanBuffer::op(1));
  l.bind(SDPA_SLOT_V, PlanBuffer::op(2));
  l.bind(SDPA_SLOT_OUT, PlanBuffer::op(3));
}

// The partials pass 1 writes and pass 2 reads: the plan's scratch buffers 0 and 1.
void bind_partials(PlanLaunch& l) {
  l.bind(SDPA_SLOT_PART_O, PlanBuffer::tmp(0));
  l.bind(SDPA_SLOT_PART_ML, PlanBuffer::tmp(1));
}

}  // namespace

bool sdpa_head_dim_supported(int64_t head_dim) {
  return std::find(std::begin(kSdpaHeadDims), std::end(kSdpaHeadDims), head_dim) != std::end(kSdpaHeadDims);
}

std::string sdpa_head_dims_str() {
  std::string s;
  for (int64_t d : kSdpaHeadDims) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}

// sdpa_blocks: chunks of 256 keys, the most its threadgroup arrays hold (within 32 KiB at D = 256 too), which keeps
// pass 2 short. sdpa_mma: chunks that grow with the position (metal/sdpa_args.h): 256 keys below 4096, 512 up to
// 16K, 1024 up to 64K, ... One size for every length had to trade short contexts, where a few chunks leave most
// cores idle, against long ones, where small chunks mean more threadgroups, partials and merging. On an H200 (Hq =
// 32, Hkv = 8, D = 128, bf16), against 512 throughout: decoding 1K / 2K / 4K keys 19 / 14 / 8% faster, verifying 8
// queries 16 / 13 / 8%; 8K and 16K keys 4-8% slower; 32K equal; 64K decoding equal, verifying 5% faster
// (docs/decisions.md, "sdpa: chunks"). What must never enter is a count of the call (Lq, kv_len).
SdpaChunking sdpa_chunking(int64_t head_dim, DType dtype, const DeviceCaps& caps) {
  if (sdpa_mma_applies(head_dim, dtype, caps)) {
    return {kMmaChunkKeys, kMmaTierKeys};
  }
  return {SDPA_BLOCK_KEYS, 0};
}

// A query's arithmetic is the same in either tile (design.md §2): the tile only decides which queries of a kv head
// share the K and V loads. 4 when they fit (decoding with GQA groups of up to 4), which halves the accumulator
// registers; 8 otherwise.
uint32_t sdpa_query_tile(const SdpaShape& s) {
  return s.q_len * (s.q_heads / s.kv_heads) <= 4 ? 4 : SDPA_QUERIES;
}

bool sdpa_mma_applies(int64_t head_dim, DType dtype, const DeviceCaps& caps) {
  return caps.matrix_units && dtype != DType::f32 && (head_dim == 64 || head_dim == 128);
}

uint32_t sdpa_split_blocks(const SdpaShape& s, const DeviceCaps& caps) {
  const int64_t groups_per_block =
      s.batch * s.kv_heads * ceil_div(s.q_len * (s.q_heads / s.kv_heads), sdpa_query_tile(s));
  const int64_t fill = (kSplitWavesPerCore * caps.compute_units + groups_per_block - 1) / groups_per_block;
  const int64_t most = std::max<int64_t>(1, s.kv_len / kSplitMinKeys);
  const int64_t least = ceil_div(s.kv_len, SDPA_BLOCK_KEYS);
  return static_cast<uint32_t>(std::max(least, std::min(fill, most)));
}

void check_sdpa_shape(const SdpaShape& s) {
  if (s.kv_len < 1 || s.kv_len > INT32_MAX) {
    throw InvalidArgument("sdpa: kv_len=", s.kv_len, " must be in [1, 2^31)");
  }
  if (s.batch < 1 || s.q_len < 1 || s.kv_heads < 1 || s.q_heads < 1 || s.q_heads % s.kv_heads != 0) {
    throw InvalidArgument("sdpa: a plan needs B, Lq, Hkv >= 1 and Hq a positive multiple of Hkv; got B=", s.batch,
                          ", Lq=", s.q_len, ", Hq=", s.q_heads, ", Hkv=", s.kv_heads);
  }
  if (!sdpa_head_dim_supported(s.head_dim)) {
    throw InvalidArgument("sdpa: head dim D=", s.head_dim, " is not supported (supported: ", sdpa_head_dims_str(), ")");
  }
}

std::vector<std::pair<uint32_t, uint32_t>> sdpa_chunks(uint32_t block_keys, uint32_t tier_keys, uint32_t kv_len) {
  std::vector<std::pair<uint32_t, uint32_t>> chunks;
  const uint32_t n = sdpa_chunk_of(block_keys, tier_keys, kv_len - 1) + 1;
  for (uint32_t i = 0; i < n; ++i) {
    const SdpaChunk c = sdpa_chunk_range(block_keys, tier_keys, i);
    chunks.emplace_back(c.first, c.keys);
  }
  return chunks;
}

Plan plan_sdpa(const SdpaShape& s, int limit, const DeviceCaps& caps) {
  Plan plan;
  plan.canonical = use_canonical(s.q_len, limit);

  SdpaArgs args{};
  args.q_heads = static_cast<uint32_t>(s.q_heads);
  args.kv_heads = static_cast<uint32_t>(s.kv_heads);
  args.group = static_cast<uint32_t>(s.q_heads / s.kv_heads);
  args.q_len = static_cast<uint32_t>(s.q_len);
  args.kv_len = static_cast<uint32_t>(s.kv_len);
  args.kv_capacity = static_cast<uint32_t>(s.capacity);
  args.head_dim = static_cast<uint32_t>(s.head_dim);
  args.causal = s.causal ? 1 : 0;
  args.scale_log2 = static_cast<float>(static_cast<double>(s.scale) * kLog2e);
  args.rows_out = s.rows_out ? 1 : 0;
  // Vector loads need every row 16-byte aligned: the base pointers, and rows of D elements (true for every D).
  const bool vector_loads = s.aligned && (s.head_dim * static_cast<int64_t>(dtype_size(s.dtype))) % 16 == 0;
  const uint32_t batch = static_cast<uint32_t>(s.batch);
  const uint32_t q_heads = static_cast<uint32_t>(s.q_heads);

  if (!plan.canonical && s.q_len > kSdpaSplitMaxQueries) {
    PlanLaunch flash;
    flash.kernel = kernel_id(KernelFamily::sdpa_flash, s.dtype, vector_loads, s.head_dim);
    flash.threadgroups = {ceil_div(s.q_len, FLASH_QUERIES), q_heads, batch};
    flash.threads_per_threadgroup = {FLASH_QUERIES * FLASH_LANES, 1, 1};
    flash.set_args(args);
    bind_operands(flash);
    plan.launches.push_back(std::move(flash));
    return plan;
  }

  if (plan.canonical) {
    const SdpaChunking chunking = sdpa_chunking(s.head_dim, s.dtype, caps);
    args.block_keys = chunking.block_keys;
    args.tier_keys = chunking.tier_keys;
  } else {
    args.block_keys = ceil_div(s.kv_len, sdpa_split_blocks(s, caps));
  }
  args.n_blocks = sdpa_chunk_of(args.block_keys, args.tier_keys, static_cast<uint32_t>(s.kv_len - 1)) + 1;
  const int64_t rows = s.batch * s.q_heads * s.q_len;
  plan.scratch_bytes = {static_cast<size_t>(rows * args.n_blocks * s.head_dim) * sizeof(float),
                        static_cast<size_t>(rows * args.n_blocks) * 2 * sizeof(float)};

  PlanLaunch partials;
  const bool matrix_units = plan.canonical && sdpa_mma_applies(s.head_dim, s.dtype, caps);
  const uint32_t tile = matrix_units ? SDPA_MMA_QUERIES : sdpa_query_tile(s);
  partials.kernel = matrix_units ? kernel_id(KernelFamily::sdpa_mma, s.dtype, vector_loads, s.head_dim)
                                 : kernel_id(KernelFamily::sdpa_blocks, s.dtype, vector_loads, tile);
  const uint32_t query_tiles = ceil_div(s.q_len * args.group, tile);
  const uint32_t kv_heads = static_cast<uint32_t>(s.batch * s.kv_heads);
  // sdpa_mma takes the chunks as the grid's slowest dimension, the last (the largest) first.
  partials.threadgroups = matrix_units ? Dim3{query_tiles, kv_heads, args.n_blocks}
                                       : Dim3{query_tiles, args.n_blocks, kv_heads};
  partials.threads_per_threadgroup = {SDPA_THREADS, 1, 1};
  // L2 prefetches (sdpa_mma_prefetch) pay where one tile's grid is at most one threadgroup per two cores: on an H200
  // (132 cores) with 8 kv heads and chunks of 512 keys, 5-7% less time for decoding at 1K-4K keys (64 threadgroups
  // at 4K), 4% more at 8K (128) and 10% more at 16K-64K (docs/decisions.md, "sdpa: loads, stores and prefetches").
  // With the growing chunks, up to 2K keys (at 4K, 128 threadgroups, 2-6% more on an H100). A hint, so a call's
  // bits do not depend on it.
  args.prefetch = matrix_units && 2 * args.n_blocks * s.batch * s.kv_heads <= caps.compute_units ? 1 : 0;
  partials.set_args(args);
  bind_operands(partials);
  bind_partials(partials);
  // Keys in one chunk (every decoding step up to 256 keys): pass 1 writes the output, with the bits pass 2 would
  // write (metal/sdpa_out.h), and the call is one launch. The launch count depends on kv_len, the bits do not: a
  // query of a longer call whose keys lie in one chunk gets the same value from sdpa_combine.
  // The partials' scratch is then bound but never touched: none is allocated for it.
  if (args.n_blocks == 1) {
    plan.scratch_bytes = {0, 0};
    plan.launches.push_back(std::move(partials));
    return plan;
  }

  PlanLaunch combine;
  combine.kernel = kernel_id(KernelFamily::sdpa_combine, s.dtype);
  combine.threadgroups = {static_cast<uint32_t>(s.q_len) * ceil_div(s.head_dim / 4, SDPA_COMBINE_COLUMNS), q_heads, batch};
  combine.threads_per_threadgroup = {SDPA_COMBINE_GROUPS * SDPA_COMBINE_COLUMNS, 1, 1};
  combine.bindings = partials.bindings;
  bind_partials(combine);
  combine.bind(SDPA_SLOT_OUT, PlanBuffer::op(3));

  plan.launches.push_back(std::move(partials));
  plan.launches.push_back(std::move(combine));
  return plan;
}

}  // namespace mtlinv
