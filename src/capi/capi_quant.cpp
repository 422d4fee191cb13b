// The C API's quantisation (mtlinv.h, "MLX's affine quantisation"): the core's src/core/quant.h, which checks the
// shapes and pointers; here only the dtype enum and the status.
#include "../../include/mtlinv/mtlinv.h"
#include "../core/errors.h"
#include "../core/quant.h"
#include "capi_internal.h"

using mtlinv::capi::run;

extern "C" {

mtlinv_status mtlinv_quant_row_words(int64_t k, int group_size, int bits, int64_t* words) {
  return run([&] {
    const char* fn = "mtlinv_quant_row_words";
    mtlinv::capi::require(words, fn, "words");
    *words = mtlinv::quant_row_words(fn, 1, k, group_size, bits);
  });
}

mtlinv_status mtlinv_quantize(const void* w, mtlinv_dtype dtype, int64_t rows, int64_t k, int group_size, int bits,
                              uint32_t* wq, void* scales, void* biases) {
  return run([&] {
    const mtlinv::DType dt = mtlinv::capi::dtype(dtype, "mtlinv_quantize", "dtype");
    mtlinv::quantize(w, dt, rows, k, group_size, bits, wq, scales, biases);
  });
}

mtlinv_status mtlinv_dequantize(const uint32_t* wq, const void* scales, const void* biases, mtlinv_dtype dtype,
                                int64_t rows, int64_t k, int group_size, int bits, void* out) {
  return run([&] {
    const mtlinv::DType dt = mtlinv::capi::dtype(dtype, "mtlinv_dequantize", "dtype");
    mtlinv::dequantize(wq, scales, biases, dt, rows, k, group_size, bits, out);
  });
}

mtlinv_status mtlinv_dequantize_float32(const uint32_t* wq, const void* scales, const void* biases,
                                        mtlinv_dtype dtype, int64_t rows, int64_t k, int group_size, int bits,
                                        float* out) {
  return run([&] {
    const mtlinv::DType dt = mtlinv::capi::dtype(dtype, "mtlinv_dequantize_float32", "dtype");
    mtlinv::dequantize_float32(wq, scales, biases, dt, rows, k, group_size, bits, out);
  });
}

}  // extern "C"
