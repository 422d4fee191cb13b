// mtlinv._mlx_ext: the primitives' functions for Python, taking and returning mlx.core arrays. Built with the
// nanobind whose ABI mlx.core's was built with, in MLX's nanobind domain, so that an mx.array crosses as itself.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <exception>

#include "graph_ops.h"
#include "primitives.h"
#include "pyx/error_bridge.h"
#include "src/core/run_plan.h"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_mlx_ext, m) {
  nb::module_::import_("mlx.core");  // mx.array's type, shared through the domain
  // mtlinv's errors as mtlinv's Python classes, as mtlinv._native raises them.
  nb::module_ mtlinv = nb::module_::import_("mtlinv");
  mtlinv_py::ErrorClasses& classes = mtlinv_py::error_classes();
  const auto cls = [&](const char* name) { return mtlinv.attr(name).inc_ref().ptr(); };
  classes.invalid_argument = cls("InvalidArgumentError");
  classes.dtype = cls("DTypeError");
  classes.device = cls("DeviceError");
  classes.kernel = cls("KernelError");
  classes.memory = cls("OutOfMemoryError");
  classes.base = cls("MtlinvError");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const mtlinv::Error&) {
      mtlinv_py::raise_py_error();
    }
  });

  m.def("gemv", &mtlinv_mlx::gemv, "x"_a, "w"_a, "bias"_a = nb::none(), nb::kw_only(), "limit"_a,
        "x @ w.T (+ bias), w [N, K]: mtlinv.gemv as a lazy MLX array.");
  m.def("qgemv", &mtlinv_mlx::qgemv, "x"_a, "wq"_a, "scales"_a, "biases"_a, nb::kw_only(), "bias"_a = nb::none(),
        "group_size"_a, "bits"_a, "limit"_a,
        "x @ W.T (+ bias), W in MLX's affine format: mtlinv.qgemv as a lazy MLX array.");
  m.def("sdpa", &mtlinv_mlx::sdpa, "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a = nb::none(), "causal"_a = true,
        "limit"_a, "softmax(scale q k^T) v: mtlinv.sdpa as a lazy MLX array.");
  m.def("set_metallib", &mtlinv_mlx::set_metallib, "path"_a,
        "Where the GPU evaluation finds mtlinv's kernels (mtlinv.metallib).");
  m.def("plans_run", [] { return mtlinv::run_counts().plans; },
        "Plans this extension's copy of mtlinv has run: what evaluating its arrays did, and when.");
}
