// The primitives' GPU evaluation, where MLX is built with Metal (_METAL_, from MLX's CMake config): mtlinv's op
// runs on a Backend whose dispatches are encoded on MLX's command encoder for the primitive's stream, so the same
// plan (kernels, grids, threadgroups, argument bytes, buffers) joins MLX's command buffer, after the work that
// made the inputs and before the work that reads the output, with no copy and no wait. The kernels come from
// mtlinv's metallib (built with fast math off by setup.py on macOS). It mirrors the Metal backend's encoding
// (objc/metal_backend.mm, CommandStream::encode) through MLX's metal-cpp encoder.
//
// Never run: no Mac is available to this project. Compiled for arm64 macOS against the macOS mlx-metal wheel's
// headers and metal-cpp by tests/compile/test_macos_build.py (which also checks that the wheel's libmlx.dylib
// exports every MLX symbol used here); with MLX's CPU build eval_gpu is never called, and says so if it is.
#include <string>

#include "primitives.h"
#include "src/core/errors.h"

namespace mtlinv_mlx {

namespace {
std::string& metallib() {
  static std::string path;
  return path;
}
}  // namespace

void set_metallib(const std::string& path) { metallib() = path; }

}  // namespace mtlinv_mlx

#ifndef _METAL_

void mtlinv_mlx::Op::eval_gpu(const std::vector<mx::array>&, mx::array&) {
  throw mtlinv::DeviceError(name(), ": this MLX has no Metal backend; its arrays are evaluated on the CPU");
}

#else

#include <memory>
#include <vector>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "src/core/backend.h"
#include "src/core/kernel_id.h"
#include "src/core/limit.h"

namespace mtlinv_mlx {

namespace {

// An MLX array as mtlinv's ops see device memory: `host` its first byte in the buffer's contents (unified
// memory), `device` the MTL::Buffer. `written` arrays (the result, the plan's scratch) are bound as outputs, so
// that MLX's encoder orders later readers after the kernel.
struct ArrayStorage : mtlinv::Storage {
  explicit ArrayStorage(const mx::array& a, bool written_) : array(a), written(written_) {
    host = const_cast<void*>(a.data<void>());
    device = const_cast<void*>(a.buffer().ptr());
    bytes = a.nbytes();
  }
  mx::array array;
  bool written;
};

mtlinv::Tensor device_tensor(const mx::array& a, bool written) {
  mtlinv::Tensor t;
  t.dtype = dtype_of("mtlinv.mlx", "an operand", a.dtype());
  t.shape = mtlinv::Shape(a.shape().begin(), a.shape().end());
  t.strides = mtlinv::contiguous_strides(t.shape);
  t.storage = std::make_shared<ArrayStorage>(a, written);
  return t;
}

// The backend of one eval_gpu call: what mtlinv's op dispatches goes to MLX's encoder; the device's capabilities,
// which the plans depend on, are those of mtlinv's own Metal backend on the same (the system's default) GPU, so the
// plan, hence the bits, are those of mtlinv's own ops there.
class EncoderBackend : public mtlinv::Backend {
 public:
  EncoderBackend(mx::metal::Device& device, mx::metal::CommandEncoder& encoder, MTL::Library* library,
                 const mtlinv::DeviceCaps& caps)
      : device_(device), encoder_(encoder), library_(library), caps_(caps) {}

  const mtlinv::DeviceCaps& caps() const override { return caps_; }

  // A plan's scratch buffer: MLX memory the encoder holds until its command buffer completes.
  mtlinv::StoragePtr allocate(size_t bytes) override {
    mx::array scratch(mx::allocator::malloc(bytes), {static_cast<int>(bytes)}, mx::uint8);
    encoder_.add_temporary(scratch);
    return std::make_shared<ArrayStorage>(scratch, true);
  }
  mtlinv::StoragePtr wrap_host(void*, size_t) override { return nullptr; }
  void upload(mtlinv::Storage&, size_t, const void*, size_t) override { refuse("upload"); }
  void download(const mtlinv::Storage&, size_t, void*, size_t) override { refuse("download"); }
  bool has_kernel(mtlinv::KernelId) const override { return true; }  // get_kernel says which the metallib lacks

  void dispatch(const mtlinv::Dispatch& d) override {
    const mtlinv::Dim3& grid = d.threadgroups;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // an empty grid runs nothing
    encoder_.set_compute_pipeline_state(device_.get_kernel(mtlinv::kernel_name(d.kernel), library_));
    for (size_t i = 0; i < d.bindings.size(); ++i) {
      const mtlinv::Binding& b = d.bindings[i];
      const int slot = static_cast<int>(i);
      if (b.storage) {
        auto* s = static_cast<const ArrayStorage*>(b.storage);
        mx::array a = s->array;
        if (s->written) {
          encoder_.set_output_array(a, slot, static_cast<int64_t>(b.offset));
        } else {
          encoder_.set_input_array(a, slot, static_cast<int64_t>(b.offset));
        }
      } else if (!b.bytes.empty()) {
        encoder_.set_bytes(b.bytes.data(), static_cast<int>(b.bytes.size()), slot);
      } else {
        encoder_.set_buffer(nullptr, slot);  // a slot the plan leaves empty
      }
    }
    const mtlinv::Dim3& group = d.threads_per_threadgroup;
    encoder_.dispatch_threadgroups(MTL::Size(grid.x, grid.y, grid.z), MTL::Size(group.x, group.y, group.z));
    // The plan's next kernel reads what this one wrote (a scratch buffer the encoder does not see as an input).
    encoder_.barrier();
  }

  void synchronize() override {}    // MLX commits the command buffer and waits for it
  void op_dispatched() override {}  // the kernels stay in MLX's command buffer

 private:
  [[noreturn]] static void refuse(const char* what) {
    throw mtlinv::DeviceError("mtlinv.mlx: ", what, " inside an MLX primitive's GPU evaluation");
  }

  mx::metal::Device& device_;
  mx::metal::CommandEncoder& encoder_;
  MTL::Library* library_;
  mtlinv::DeviceCaps caps_;
};

// The capabilities of mtlinv's Metal backend: the plans of mtlinv's own ops on this GPU.
const mtlinv::DeviceCaps& metal_caps() {
  const mtlinv::DeviceCaps& caps = mtlinv::active_backend().caps();
  if (caps.backend != "metal") {
    throw mtlinv::DeviceError("mtlinv.mlx: MLX evaluates on the GPU, but mtlinv runs on its '", caps.backend,
                              "' backend (MTLINV_DEVICE); the GPU evaluation plans as mtlinv's Metal backend does");
  }
  return caps;
}

}  // namespace

void Op::eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) {
  if (metallib().empty()) {
    throw mtlinv::DeviceError(name(), ": no mtlinv.metallib (setup.py builds it on macOS where Apple's Metal "
                              "toolchain is installed); without it mtlinv.mlx takes its DLPack route");
  }
  const mx::Stream& s = stream();
  out.set_data(mx::allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  auto& device = mx::metal::device(s.device);
  auto& encoder = mx::metal::get_command_encoder(s);
  EncoderBackend backend(device, encoder, device.get_library("mtlinv", metallib()), metal_caps());
  mtlinv::BackendScope scope(backend);
  mtlinv::LimitScope limit(limit_);
  std::vector<mtlinv::Tensor> tensors;
  for (const mx::array& a : inputs) tensors.push_back(device_tensor(a, false));
  const mtlinv::Tensor y = device_tensor(out, true);
  run(tensors, &y);
}

}  // namespace mtlinv_mlx

#endif
