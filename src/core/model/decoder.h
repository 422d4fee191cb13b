// A llama decoder's forward pass on mtlinv ops, in C++: the loop mtlinv.model.DeviceModel runs. A decoding step of
// a small model on a GPU is bound by the host, which spends a few us issuing each op while the GPU waits; one call
// from Python a step, instead of ten a layer, took a step 1.3-1.4x less time on an H200 (docs/decisions.md,
// "Decoder step: host side").
// The ops are the public ones, called in the order and with the arguments the Python decoder used, so the logits
// have those bits; with set_limit(L) and M <= L tokens a step, every op is row-invariant, so a position's logits do
// not depend on how many positions share its call (what greedy speculative decoding needs).
#pragma once
#include <cstdint>
#include <vector>

#include "../tensor.h"

namespace mtlinv {

// y = x @ W.T (+ bias) with W [N, K] in the affine quantized format qgemv takes.
struct QuantLinear {
  Tensor wq, scales, biases;
  int group_size = 32;
  int bits = 4;
  Tensor bias;                          // [N] in x's dtype, or none (no storage): Qwen 2's q|k|v have one
  Tensor supers;                        // the super-block form's factors (int8 scales: GGUF's K-quants), or none

  // qgemv with constant_weights (ops/qgemv.h): for Decoder::forward, whose kernels never write weights.
  Tensor operator()(const Tensor& x) const;
};

struct DecoderLayer {
  Tensor attn_norm, ffn_norm;           // [H]
  QuantLinear qkv;                      // q, k and v stacked by rows: [(Hq + 2 Hkv) D, H]
  QuantLinear o;                        // [H, Hq D]
  QuantLinear gate_up;                  // gate and up stacked by rows: [2 F, H]
  QuantLinear down;                     // [H, F]
  Tensor k_cache, v_cache;              // [Hkv, C, D]: this decoder's cache of the layer, written in place
  // Qwen 3's per-head RMS norms of the queries and keys before RoPE ([D] each, qk_rms_norm), or none (no storage).
  Tensor q_norm, k_norm;
};

struct DecoderConfig {
  int64_t n_heads = 0;                  // query heads; Hkv and D are the caches'
  double rope_theta = 10000.0;          // RoPE base, in [1, FLT_MAX] (rope_base, ops/decoder_ops.h)
  double rms_eps = 1e-5;
  // Pair j's RoPE frequency, [D / 2] values in (0, 1], for a scaled RoPE (Llama 3's, computed by the caller);
  // empty: rope_theta^(-2j/D), computed by the kernel.
  std::vector<float> rope_freqs;
};

class Decoder {
 public:
  // Checks what the ops cannot name (the caches' shapes, the head counts); the ops check the rest at the first
  // forward. `layers` are the ones this decoder runs (a draft may leave some of a model's out), and errors number
  // them as given (layers[i]); it may be empty.
  Decoder(DecoderConfig config, Tensor embedding, std::vector<DecoderLayer> layers, Tensor output_norm,
          QuantLinear output);

  // The logits [M, V] (the embedding's dtype) of tokens ids (M >= 1) at positions start .. start + M - 1; writes
  // their keys and values into the caches there, and attends over cache positions 0 .. start + M - 1, so the caller
  // keeps positions before `start` valid. On CUDA it returns once the kernels are queued, each layer's as one
  // graph (src/core/launch_batch.h); its first step, the upload of the ids (cudaMemcpy from pageable memory),
  // waits for the work queued before it.
  Tensor forward(const std::vector<int64_t>& ids, int64_t start) const;
  // forward's check of m tokens at `start` against the caches, on its own: callers that must copy the ids first
  // (a strided or broadcast array of them) check before the copy.
  void check_positions(int64_t m, int64_t start) const;

  int64_t capacity() const { return capacity_; }  // cache positions per layer

 private:
  Tensor attention(const DecoderLayer& layer, const Tensor& h, int64_t start, int64_t m) const;
  uint64_t batch_key(int64_t m, size_t layer) const;

  DecoderConfig config_;
  Tensor embedding_;                    // [V, H]
  std::vector<DecoderLayer> layers_;
  Tensor output_norm_;                  // [H]
  QuantLinear output_;                  // [V, H]
  Tensor rope_freqs_;                   // config_.rope_freqs on the device, or none
  int64_t capacity_ = 0;
};

}  // namespace mtlinv
