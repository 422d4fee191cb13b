// mtlinv's ops as MLX Primitives: an MLX array made by gemv, qgemv or sdpa here is a node of MLX's lazy graph, and
// evaluating it runs mtlinv's plan for the call (its checks, kernels, grids and arguments: src/core/ops) over the
// MLX arrays' own memory, the output included, under the limit the primitive carries.
//   eval_cpu: on mtlinv's active backend (the emulator on Linux), over the arrays' host memory, as a task of MLX's
//             CPU stream.
//   eval_gpu: (MLX built with Metal) the same plan's launches encoded on MLX's command encoder for the stream.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx/primitives.h"
#include "mlx/utils.h"
#include "src/core/ops.h"

namespace mtlinv_mlx {

namespace mx = mlx::core;

class Op : public mx::UnaryPrimitive {
 public:
  Op(mx::Stream stream, int limit) : mx::UnaryPrimitive(stream), limit_(limit) {}

  // The mtlinv op over tensors of the inputs' memory, writing `out`; `out` null: only the op's checks run
  // (checks-only mode, shape-only tensors), as when the graph is built.
  virtual void run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const = 0;
  // The result's shape for inputs that passed the checks.
  virtual mx::Shape out_shape(const std::vector<mx::array>& inputs) const = 0;

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override;
  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override;  // eval_gpu.cpp
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {out_shape(inputs)};
  }
  int limit() const { return limit_; }

 protected:
  // Whether `other` is an Op of this type with this limit (each subclass compares its own parameters too).
  bool same_op(const mx::Primitive& other) const;

 private:
  int limit_;
};

class Gemv : public Op {
 public:
  Gemv(mx::Stream stream, int limit, bool has_bias) : Op(stream, limit), has_bias_(has_bias) {}
  void run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const override;
  mx::Shape out_shape(const std::vector<mx::array>& inputs) const override;
  const char* name() const override { return "MtlinvGemv"; }
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  bool has_bias_;
};

class QGemv : public Op {
 public:
  QGemv(mx::Stream stream, int limit, bool has_bias, int group_size, int bits)
      : Op(stream, limit), has_bias_(has_bias), group_size_(group_size), bits_(bits) {}
  void run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const override;
  mx::Shape out_shape(const std::vector<mx::array>& inputs) const override;
  const char* name() const override { return "MtlinvQGemv"; }
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  bool has_bias_;
  int group_size_, bits_;
};

class Sdpa : public Op {
 public:
  Sdpa(mx::Stream stream, int limit, const mtlinv::SdpaOptions& options) : Op(stream, limit), options_(options) {}
  void run(const std::vector<mtlinv::Tensor>& in, const mtlinv::Tensor* out) const override;
  mx::Shape out_shape(const std::vector<mx::array>& inputs) const override { return inputs[0].shape(); }
  const char* name() const override { return "MtlinvSdpa"; }
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  mtlinv::SdpaOptions options_;
};

// The lazy result of `op` on `inputs` (made row-contiguous first: the kernels index densely), once the op's checks
// pass on their shapes and dtypes (else mtlinv's exception, naming `op_name` and the argument, as the graph is
// built). arg_names[i] names inputs[i].
mx::array make(std::unique_ptr<Op> op, std::vector<mx::array> inputs, const char* op_name,
               const std::vector<const char*>& arg_names);

// Where eval_gpu finds mtlinv's kernels: the package's mtlinv.metallib ("" where there is none).
void set_metallib(const std::string& path);

// An MLX dtype as mtlinv's: throws DTypeError naming `op`, the argument and the dtype where mtlinv has none.
mtlinv::DType dtype_of(const char* op, const char* arg, mx::Dtype dtype);

}  // namespace mtlinv_mlx
