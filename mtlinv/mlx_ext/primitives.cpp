// The primitives' graph side (checks and shapes as the graph is built, equivalence) and their CPU evaluation.
#include "primitives.h"

#include <sstream>
#include <typeinfo>
#include <utility>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "src/core/checks_only.h"
#include "src/core/errors.h"
#include "src/core/limit.h"

namespace mtlinv_mlx {

namespace {

mtlinv::Shape shape_of(const mx::array& a) { return mtlinv::Shape(a.shape().begin(), a.shape().end()); }

// x [..., K] times a weight of N rows: [..., N].
mx::Shape rows_of(const mx::array& x, int n) {
  mx::Shape shape = x.shape();
  shape.back() = n;
  return shape;
}

// A tensor over an evaluated row-contiguous array's host memory: zero-copy where the active backend wraps host
// memory, which the emulator always does (Metal: page-aligned memory only; else a copy, see eval_cpu).
mtlinv::Tensor host_tensor(const mx::array& a) {
  const mtlinv::Shape shape = shape_of(a);
  return mtlinv::Tensor::from_host(const_cast<void*>(a.data<void>()), shape, mtlinv::contiguous_strides(shape),
                                   dtype_of("mtlinv.mlx", "an operand", a.dtype()));
}

}  // namespace

mtlinv::DType dtype_of(const char* op, const char* arg, mx::Dtype dtype) {
  if (dtype == mx::float32) return mtlinv::DType::f32;
  if (dtype == mx::float16) return mtlinv::DType::f16;
  if (dtype == mx::bfloat16) return mtlinv::DType::bf16;
  if (dtype == mx::uint32) return mtlinv::DType::u32;
  if (dtype == mx::int32) return mtlinv::DType::i32;
  if (dtype == mx::uint8) return mtlinv::DType::u8;
  std::ostringstream name;
  name << dtype;
  throw mtlinv::DTypeError(op, ": ", arg, " has dtype ", name.str(), " (an MLX array); expected float32, float16 or ",
                           "bfloat16 (uint32 for qgemv's packed weights): convert it first (x.astype(mx.float32))");
}

mx::array make(std::unique_ptr<Op> op, std::vector<mx::array> inputs, const char* op_name,
               const std::vector<const char*>& arg_names) {
  const mx::Stream stream = op->stream();
  std::vector<mtlinv::Tensor> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A no-op on a row-contiguous array; a copy of a strided view (a KV cache's keys), as MLX's own ops make.
    inputs[i] = mx::contiguous(inputs[i], false, stream);
    shapes.push_back(mtlinv::Tensor::shape_only(shape_of(inputs[i]), dtype_of(op_name, arg_names[i],
                                                                              inputs[i].dtype())));
  }
  try {
    mtlinv::ChecksOnlyScope checks;
    op->run(shapes, nullptr);
  } catch (const mtlinv::ChecksPassed&) {
  }
  mx::Shape shape = op->out_shape(inputs);
  const mx::Dtype dtype = inputs[0].dtype();
  return mx::array(std::move(shape), dtype, std::shared_ptr<mx::Primitive>(std::move(op)), std::move(inputs));
}

// The op runs as a task of the stream, in order with MLX's own CPU work, on the thread MLX runs the stream on: the
// limit is that thread's scope for the task's length. MLX keeps the inputs' memory alive until the task has run;
// the output is allocated here, before, as MLX's own CPU primitives do.
void Op::eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) {
  out.set_data(mx::allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  auto& encoder = mx::cpu::get_command_encoder(stream());
  std::vector<mx::array> in;
  for (const mx::array& a : inputs) {
    encoder.set_input_array(a);
    in.push_back(mx::array::unsafe_weak_copy(a));
  }
  encoder.set_output_array(out);
  encoder.dispatch([op = std::static_pointer_cast<Op>(out.primitive_ptr()), in = std::move(in),
                    out = mx::array::unsafe_weak_copy(out)]() mutable {
    mtlinv::LimitScope limit(op->limit());
    std::vector<mtlinv::Tensor> tensors;
    for (const mx::array& a : in) tensors.push_back(host_tensor(a));
    const mtlinv::Tensor y = host_tensor(out);
    op->run(tensors, &y);
    // A backend that could not wrap the output's memory wrote a copy (Metal, memory not page-aligned): it comes
    // back. Either way the host waits for the op's kernels here, and a failed kernel throws.
    if (y.host_address() != out.data<void>()) {
      y.download(out.data<void>(), out.nbytes(), "mtlinv.mlx");
    } else {
      y.host_data();
    }
  });
}

bool Op::same_op(const mx::Primitive& other) const {
  return typeid(*this) == typeid(other) && static_cast<const Op&>(other).limit_ == limit_;
}

void Gemv::run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const {
  mtlinv::gemv(in[0], in[1], has_bias_ ? &in[2] : nullptr, true, mtlinv::GemvNames{}, out);
}

mx::Shape Gemv::out_shape(const std::vector<mx::array>& inputs) const {
  return rows_of(inputs[0], inputs[1].shape(0));
}

bool Gemv::is_equivalent(const mx::Primitive& other) const {
  return same_op(other) && static_cast<const Gemv&>(other).has_bias_ == has_bias_;
}

void QGemv::run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const {
  mtlinv::qgemv(in[0], in[1], in[2], in[3], has_bias_ ? &in[4] : nullptr, group_size_, bits_, out);
}

mx::Shape QGemv::out_shape(const std::vector<mx::array>& inputs) const {
  return rows_of(inputs[0], inputs[1].shape(0));
}

bool QGemv::is_equivalent(const mx::Primitive& other) const {
  const auto* o = static_cast<const QGemv*>(&other);
  return same_op(other) && o->has_bias_ == has_bias_ && o->group_size_ == group_size_ && o->bits_ == bits_;
}

void Sdpa::run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const {
  mtlinv::sdpa(in[0], in[1], in[2], options_, out);
}

bool Sdpa::is_equivalent(const mx::Primitive& other) const {
  if (!same_op(other)) return false;
  const mtlinv::SdpaOptions& o = static_cast<const Sdpa&>(other).options_;
  return o.causal == options_.causal && o.has_scale == options_.has_scale && o.scale == options_.scale;
}

}  // namespace mtlinv_mlx
