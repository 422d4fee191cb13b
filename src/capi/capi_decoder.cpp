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

const mtlinv::Tensor& tensor(const mtlinv_tensor* t, const char* fn, const std::string& name) {
  require(t, fn, name.c_str());
  return t->t;
}

// An optional tensor: NULL is none (no storage).
mtlinv::Tensor optional(const mtlinv_tensor* t) { return t ? t->t : mtlinv::Tensor(); }

// supers: the super-block form's factors (NULL: the affine format).
mtlinv::QuantLinear linear(const mtlinv_quant_linear& l, const char* fn, const std::string& name,
                           const mtlinv_tensor* supers = nullptr) {
  mtlinv::QuantLinear out;
  out.wq = tensor(l.wq, fn, name + ".wq");
  out.scales = tensor(l.scales, fn, name + ".scales");
  out.biases = tensor(l.biases, fn, name + ".biases");
  out.group_size = l.group_size;
  out.bits = l.bits;
  out.supers = optional(supers);
  return out;
}

// mtlinv_decoder_create, _ext and _super: extras, supers and output_supers may be NULL, rope_freqs NULL when
// n_rope_freqs is 0.
mtlinv_status create(const char* fn, const mtlinv_decoder_config* config, const float* rope_freqs,
                     size_t n_rope_freqs, const mtlinv_tensor* embedding, const mtlinv_decoder_layer* layers,
                     const mtlinv_decoder_layer_extras* extras, const mtlinv_decoder_layer_supers* supers,
                     size_t n_layers, const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                     const mtlinv_tensor* output_supers, mtlinv_decoder** out) {
  return run([&] {
    require(config, fn, "config");
    require(output, fn, "output");
    require(out, fn, "out");
    if (n_layers > 0) require(layers, fn, "layers");
    if (n_rope_freqs > 0) require(rope_freqs, fn, "rope_freqs");
    if (rope_freqs != nullptr && n_rope_freqs == 0) {  // an empty table is no table: say so rather than drop it
      throw mtlinv::InvalidArgument(fn, ": rope_freqs is given with n_rope_freqs=0; pass NULL for no table, or the ",
                                    "D / 2 pair frequencies");
    }
    mtlinv::DecoderConfig c;
    c.n_heads = config->n_heads;
    c.rope_theta = config->rope_theta;
    c.rms_eps = config->rms_eps;
    if (n_rope_freqs > 0) c.rope_freqs.assign(rope_freqs, rope_freqs + n_rope_freqs);
    std::vector<mtlinv::DecoderLayer> built;
    const mtlinv_decoder_layer_supers affine = {nullptr, nullptr, nullptr, nullptr};  // no layer has supers
    for (size_t i = 0; i < n_layers; ++i) {
      const mtlinv_decoder_layer& l = layers[i];
      const std::string where = "layers[" + std::to_string(i) + "].";
      mtlinv::DecoderLayer layer;
      layer.attn_norm = tensor(l.attn_norm, fn, where + "attn_norm");
      layer.ffn_norm = tensor(l.ffn_norm, fn, where + "ffn_norm");
      const mtlinv_decoder_layer_supers& f = supers ? supers[i] : affine;
      layer.qkv = linear(l.qkv, fn, where + "qkv", f.qkv);
      layer.o = linear(l.o, fn, where + "o", f.o);
      layer.gate_up = linear(l.gate_up, fn, where + "gate_up", f.gate_up);
      layer.down = linear(l.down, fn, where + "down", f.down);
      layer.k_cache = tensor(l.k_cache, fn, where + "k_cache");
      layer.v_cache = tensor(l.v_cache, fn, where + "v_cache");
      if (extras != nullptr) {
        layer.qkv.bias = optional(extras[i].qkv_bias);
        layer.q_norm = optional(extras[i].q_norm);
        layer.k_norm = optional(extras[i].k_norm);
      }
      built.push_back(std::move(layer));
    }
    *out = new mtlinv_decoder{mtlinv::Decoder(c, tensor(embedding, fn, "embedding"), std::move(built),
                                              tensor(output_norm, fn, "output_norm"),
                                              linear(*output, fn, "output", output_supers))};
  });
}

}  // namespace

extern "C" {

mtlinv_status mtlinv_decoder_create(const mtlinv_decoder_config* config, const mtlinv_tensor* embedding,
                                    const mtlinv_decoder_layer* layers, size_t n_layers,
                                    const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                    mtlinv_decoder** out) {
  return create("mtlinv_decoder_create", config, nullptr, 0, embedding, layers, nullptr, nullptr, n_layers,
                output_norm, output, nullptr, out);
}

mtlinv_status mtlinv_decoder_create_ext(const mtlinv_decoder_config* config, const float* rope_freqs,
                                        size_t n_rope_freqs, const mtlinv_tensor* embedding,
                                        const mtlinv_decoder_layer* layers,
                                        const mtlinv_decoder_layer_extras* extras, size_t n_layers,
                                        const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                        mtlinv_decoder** out) {
  return create("mtlinv_decoder_create_ext", config, rope_freqs, n_rope_freqs, embedding, layers, extras, nullptr,
                n_layers, output_norm, output, nullptr, out);
}

mtlinv_status mtlinv_decoder_create_super(const mtlinv_decoder_config* config, const float* rope_freqs,
                                          size_t n_rope_freqs, const mtlinv_tensor* embedding,
                                          const mtlinv_decoder_layer* layers,
                                          const mtlinv_decoder_layer_extras* extras,
                                          const mtlinv_decoder_layer_supers* supers, size_t n_layers,
                                          const mtlinv_tensor* output_norm, const mtlinv_quant_linear* output,
                                          const mtlinv_tensor* output_supers, mtlinv_decoder** out) {
  return create("mtlinv_decoder_create_super", config, rope_freqs, n_rope_freqs, embedding, layers, extras, supers,
                n_layers, output_norm, output, output_supers, out);
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
