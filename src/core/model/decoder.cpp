#include "decoder.h"

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "../errors.h"
#include "../launch_batch.h"
#include "../ops.h"
#include "../ops/checks.h"
#include "../plans/qgemv.h"

namespace mtlinv {

// The projections run inside Decoder::forward, each queued right after one of the forward's own kernels, none of
// which writes weights, and nothing else writes a decoder's weights: constant_weights holds.
Tensor QuantLinear::operator()(const Tensor& x) const {
  return qgemv(x, wq, scales, biases, bias.storage ? &bias : nullptr, group_size, bits, nullptr,
               supers.storage ? &supers : nullptr, /*constant_weights=*/true);
}

namespace {

// The ops check shapes and dtypes at the first forward; a projection's format is checked here, where the error
// can name the layer.
void check_format(const QuantLinear& w, const std::string& where) {
  const bool codes = w.scales.dtype == DType::i8;
  if (codes && !w.supers.storage) {
    throw InvalidArgument("Decoder: ", where, " has int8 scale codes but no supers; the super-block form needs both");
  }
  if (!codes && w.supers.storage) {
    throw InvalidArgument("Decoder: ", where, " has supers with ", dtype_name(w.scales.dtype),
                          " scales; supers go with int8 scale codes (the super-block form)");
  }
  if (codes) {
    if (!qgemv_super_format(w.bits, w.group_size)) {
      throw InvalidArgument("Decoder: ", where, " has int8 scale codes at bits=", w.bits, ", group_size=",
                            w.group_size, "; qgemv takes them at bits 4 or 5 and group_size 32, or bits 6 and 16");
    }
    return;
  }
  if (!qgemv_supported_format(w.bits, w.group_size)) {
    throw InvalidArgument("Decoder: ", where, " has bits=", w.bits, ", group_size=", w.group_size,
                          "; qgemv takes bits 2, 3, 4, 5, 6 or 8 and group_size 32, 64 or 128, or 16 at bits 8");
  }
}

// Whether two tensors' bytes meet: within one storage, or, in host-visible memory, anywhere (two Tensors made from
// views of one array have storages of their own over the same bytes).
bool overlap(const Tensor& a, const Tensor& b) {
  const auto meet = [](uintptr_t a0, size_t an, uintptr_t b0, size_t bn) { return a0 < b0 + bn && b0 < a0 + an; };
  if (a.storage == b.storage) return meet(a.offset, a.nbytes(), b.offset, b.nbytes());
  const void* ha = a.host_address();
  const void* hb = b.host_address();
  return ha != nullptr && hb != nullptr &&
         meet(reinterpret_cast<uintptr_t>(ha), a.nbytes(), reinterpret_cast<uintptr_t>(hb), b.nbytes());
}

}  // namespace

Decoder::Decoder(DecoderConfig config, Tensor embedding, std::vector<DecoderLayer> layers, Tensor output_norm,
                 QuantLinear output)
    : config_(config),
      embedding_(std::move(embedding)),
      layers_(std::move(layers)),
      output_norm_(std::move(output_norm)),
      output_(std::move(output)),
      capacity_(std::numeric_limits<int64_t>::max()) {
  if (config_.n_heads < 1) throw InvalidArgument("Decoder: n_heads=", config_.n_heads, " must be positive");
  rope_base("Decoder", "rope_theta", config_.rope_theta);  // here, not at the first forward, and by their names
  check_eps("Decoder", "rms_eps", config_.rms_eps);
  check_format(output_, "output");
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& l = layers_[i];
    const std::pair<const QuantLinear*, const char*> projections[] = {
        {&l.qkv, "qkv"}, {&l.o, "o"}, {&l.gate_up, "gate_up"}, {&l.down, "down"}};
    for (const auto& [w, name] : projections) check_format(*w, concat("layers[", i, "]'s ", name));
  }
  // The table's values are checked here, with or without layers; its length below, against the caches' head dim.
  if (!config_.rope_freqs.empty()) rope_freqs_ = rope_freqs("Decoder", "rope_freqs", config_.rope_freqs);
  if (layers_.empty()) return;
  const Shape& cache = layers_[0].k_cache.shape;
  if (cache.size() != 3 || cache[0] < 1 || cache[2] < 1) {
    throw InvalidArgument("Decoder: layers[0]'s k_cache must be [Hkv, C, D] with Hkv, D >= 1, got ", shape_str(cache));
  }
  struct Cache {
    const Tensor* tensor;
    size_t layer;
    const char* name;
  };
  std::vector<Cache> caches;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DecoderLayer& l = layers_[i];
    if (l.k_cache.shape != cache || l.v_cache.shape != cache) {
      throw InvalidArgument("Decoder: layers[", i, "]'s caches are ", shape_str(l.k_cache.shape), " and ",
                            shape_str(l.v_cache.shape), "; every layer's must be layers[0]'s ", shape_str(cache));
    }
    for (const Cache& c : {Cache{&l.k_cache, i, "k_cache"}, Cache{&l.v_cache, i, "v_cache"}}) {
      c.tensor->require_dense("Decoder", c.name);
      // Written in place at every forward: two caches in one range would overwrite each other's positions.
      for (const Cache& other : caches) {
        if (overlap(*c.tensor, *other.tensor)) {
          throw InvalidArgument("Decoder: layers[", i, "]'s ", c.name, " overlaps layers[", other.layer, "]'s ",
                                other.name, "; each cache needs memory of its own");
        }
      }
      caches.push_back(c);
    }
  }
  if (config_.n_heads % cache[0] != 0) {
    throw InvalidArgument("Decoder: n_heads=", config_.n_heads, " is not a multiple of the caches' Hkv=", cache[0]);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!layers_[i].q_norm.storage != !layers_[i].k_norm.storage) {
      throw InvalidArgument("Decoder: layers[", i, "] has ", layers_[i].q_norm.storage ? "q_norm" : "k_norm",
                            " without ", layers_[i].q_norm.storage ? "k_norm" : "q_norm", "; give both or neither");
    }
  }
  if (!config_.rope_freqs.empty() && static_cast<int64_t>(config_.rope_freqs.size()) * 2 != cache[2]) {
    throw InvalidArgument("Decoder: rope_freqs has ", config_.rope_freqs.size(), " values; the caches' head dim ",
                          cache[2], " needs ", cache[2] / 2);
  }
  capacity_ = cache[1];
}

void Decoder::check_positions(int64_t m, int64_t start) const {
  // start > capacity - m, not start + m > capacity: a huge start would wrap the sum.
  if (m < 1 || start < 0 || start > capacity_ - m) {
    throw InvalidArgument("Decoder.forward: ", m, " tokens at position ", start, " do not fit the cache capacity ",
                          capacity_);
  }
}

Tensor Decoder::forward(const std::vector<int64_t>& ids, int64_t start) const {
  const int64_t m = static_cast<int64_t>(ids.size());
  check_positions(m, start);
  // Each residual add runs in one launch with the norm after it (add_rms_norm): x is the residual stream, h its
  // normed copy for the next block. The ids are uploaded first, outside any launch batch.
  Tensor x = embedding(embedding_, ids);
  if (layers_.empty()) return output_(rms_norm(x, output_norm_, config_.rms_eps));
  Tensor h, logits;
  // One launch batch a layer (src/core/launch_batch.h): on CUDA a layer's kernels go out as one graph launch, and
  // the GPU runs it while the host records the next layer's. The first batch also norms the embeddings; the last
  // one also projects to the logits.
  for (size_t i = 0; i < layers_.size(); ++i) {
    LaunchBatch batch(batch_key(m, i));
    const DecoderLayer& layer = layers_[i];
    const bool last = i + 1 == layers_.size();
    if (i == 0) h = rms_norm(x, layer.attn_norm, config_.rms_eps);
    std::tie(x, h) = add_rms_norm(x, attention(layer, h, start, m), layer.ffn_norm, config_.rms_eps);
    std::tie(x, h) = add_rms_norm(x, layer.down(swiglu_halves(layer.gate_up(h))),
                                  last ? output_norm_ : layers_[i + 1].attn_norm, config_.rms_eps);
    if (last) logits = output_(h);
    batch.run();
  }
  return logits;
}

// A batch's key names what repeats from step to step: this decoder's layer i at m rows. Keys that meet (two
// decoders, one freed and another made at its address) only cost a graph more updates, never a wrong result.
uint64_t Decoder::batch_key(int64_t m, size_t layer) const {
  return (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(this)) * 0x9E3779B97F4A7C15ull) ^
         (static_cast<uint64_t>(m) << 24) ^ layer;
}

Tensor Decoder::attention(const DecoderLayer& layer, const Tensor& h, int64_t start, int64_t m) const {
  // qkv_to_heads takes the projection's [m, (Hq + 2 Hkv) D] as it is and writes k and v into the caches at
  // `start`; sdpa reads the [Hkv, C, D] caches up to start + m and the [Hq, m, D] queries as one sequence.
  Tensor qkv = layer.qkv(h);
  if (layer.q_norm.storage) {
    qkv = qk_rms_norm(qkv, config_.n_heads, layer.k_cache.dim(0), layer.q_norm, layer.k_norm, config_.rms_eps);
  }
  const Tensor q = qkv_to_heads(qkv, config_.n_heads, layer.k_cache, layer.v_cache, start, start, config_.rope_theta,
                                rope_freqs_.storage ? &rope_freqs_ : nullptr);
  SdpaOptions options;
  options.causal = true;
  options.has_kv_len = true;
  options.kv_len = start + m;
  // The output projection takes rows [m, Hq D], which attention writes directly (rows_out): the bits of
  // heads_to_rows after it, without that copy's launch a layer (multi-row steps had it; one row's [Hq, 1, D]
  // always lay in row order).
  options.rows_out = true;
  return layer.o(sdpa(q, layer.k_cache, layer.v_cache, options));
}

}  // namespace mtlinv
