#include "graph_ops.h"

#include <memory>
#include <utility>
#include <vector>

#include "mlx/utils.h"
#include "primitives.h"
#include "src/core/errors.h"
#include "src/core/limit.h"
#include "src/core/tensor.h"

namespace mtlinv_mlx {

namespace {

// The primitives run on the default stream of the default device, as MLX's ops called without a stream do (inside
// `with mx.stream(s)`, that is s).
mx::Stream stream() { return mx::to_stream({}); }

// The limit's range is the core's (limit.h): checked here, as the graph is built, by opening a scope with it.
int checked_limit(int limit) {
  mtlinv::LimitScope check(limit);
  return limit;
}

// Only the row layout of a weight: its rows are the result's last dimension (mtlinv's tile layouts and batched
// weights are not a model's arrays).
void require_rows(const char* op, const char* arg, const mx::array& w, const char* layout) {
  if (w.ndim() != 2) {
    throw mtlinv::InvalidArgument(op, ": ", arg, " must be ", layout, ", got shape ",
                                  mtlinv::shape_str(mtlinv::Shape(w.shape().begin(), w.shape().end())));
  }
}

}  // namespace

mx::array gemv(const mx::array& x, const mx::array& w, const std::optional<mx::array>& bias, int limit) {
  require_rows("gemv", "w", w, "[N, K] (a linear layer's weight)");
  std::vector<mx::array> inputs{x, w};
  if (bias) inputs.push_back(*bias);
  return make(std::make_unique<Gemv>(stream(), checked_limit(limit), bias.has_value()), std::move(inputs), "gemv",
              {"x", "w", "bias"});
}

mx::array qgemv(const mx::array& x, const mx::array& wq, const mx::array& scales, const mx::array& biases,
                const std::optional<mx::array>& bias, int group_size, int bits, int limit) {
  require_rows("qgemv", "wq", wq, "[N, K*bits/32] (MLX's affine format, as mx.quantize returns it)");
  std::vector<mx::array> inputs{x, wq, scales, biases};
  if (bias) inputs.push_back(*bias);
  return make(std::make_unique<QGemv>(stream(), checked_limit(limit), bias.has_value(), group_size, bits),
              std::move(inputs), "qgemv", {"x", "wq", "scales", "biases", "bias"});
}

mx::array sdpa(const mx::array& q, const mx::array& k, const mx::array& v, std::optional<double> scale, bool causal,
               int limit) {
  mtlinv::SdpaOptions options;
  options.causal = causal;
  options.has_scale = scale.has_value();
  options.scale = scale.value_or(1.0);
  return make(std::make_unique<Sdpa>(stream(), checked_limit(limit), options), {q, k, v}, "sdpa", {"q", "k", "v"});
}

}  // namespace mtlinv_mlx
