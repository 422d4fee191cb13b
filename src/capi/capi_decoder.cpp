// The C API's decoder (mtlinv.h, "A llama decoder's forward pass"): mtlinv::Decoder behind an opaque handle. The
// handle holds copies of the tensors it was built from (sharing their storage), so the caller may free its
// handles once the decoder exists.
#include <memory>
#include <string>
#include <vector>

#include "../../include/mtlinv/mtlinv.h"
#include "../core/errors.h"
#include "../core/model/decoder.h"
#include "capi_internal.h"

using mtlinv::capi::require;
using mtlinv::capi::run;

struct mtlinv_decoder {
  mtlinv::Decoder d;
};

namespace {

constexpr const char* kCreate = "mtlinv_decoder_create";

const mtlinv::Tensor& tensor(const mtlinv_tensor* t, const std::string& name) {
  require(t, kCreate, name.c_str());
  return t->t;
}

mtlinv::QuantLinear linear(const mtlinv_quant_linear& l, const std::string& name) {
  mtlinv::QuantLinear out;
  out.wq = tensor(l.wq, name + ".wq");
  out.scales = tensor(l.scales, name + ".scales");
  out.biases = tensor(l.biases, name + ".biases");
  out.group_size = l.group_size;
  out.bits = l.bits;
  return out;
}

}  // namespace

extern "C" {

mtlinv_status mtlinv_decoder_create(const mtlinv_decoder_config* config, const mtlinv_tensor* embedding,
                                    const mtlinv_decoder_layer* layers, size_t n_layers,
                                    const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                    mtlinv_decoder** out) {
  return run([&] {
    require(config, kCreate, "config");
    require(output, kCreate, "output");
    require(out, kCreate, "out");
    if (n_layers > 0) require(layers, kCreate, "layers");
    mtlinv::DecoderConfig c;
    c.n_heads = config->n_heads;
    c.rope_theta = config->rope_theta;
    c.rms_eps = config->rms_eps;
    std::vector<mtlinv::DecoderLayer> built;
    for (size_t i = 0; i < n_layers; ++i) {
      const mtlinv_decoder_layer& l = layers[i];
      const std::string where = "layers[" + std::to_string(i) + "].";
      mtlinv::DecoderLayer layer;
      layer.attn_norm = tensor(l.attn_norm, where + "attn_norm");
      layer.ffn_norm = tensor(l.ffn_norm, where + "ffn_norm");
      layer.qkv = linear(l.qkv, where + "qkv");
      layer.o = linear(l.o, where + "o");
      layer.gate_up = linear(l.gate_up, where + "gate_up");
      layer.down = linear(l.down, where + "down");
      layer.k_cache = tensor(l.k_cache, where + "k_cache");
      layer.v_cache = tensor(l.v_cache, where + "v_cache");
      built.push_back(std::move(layer));
    }
    *out = new mtlinv_decoder{mtlinv::Decoder(c, tensor(embedding, "embedding"), std::move(built),
                                              tensor(output_norm, "output_norm"), linear(*output, "output"))};
  });
}

mtlinv_status mtlinv_decoder_forward(const mtlinv_decoder* decoder, const int64_t* ids, size_t n_ids, int64_t start,
                                     mtlinv_tensor** logits) {
  return run([&] {
    const char* fn = "mtlinv_decoder_forward";
    require(decoder, fn, "decoder");
    require(logits, fn, "logits");
    if (n_ids > 0) require(ids, fn, "ids");
    *logits = mtlinv::capi::wrap(decoder->d.forward(std::vector<int64_t>(ids, ids + n_ids), start));
  });
}

int64_t mtlinv_decoder_capacity(const mtlinv_decoder* decoder) { return decoder ? decoder->d.capacity() : -1; }

void mtlinv_decoder_free(mtlinv_decoder* decoder) { delete decoder; }

}  // extern "C"
