// Element types of tensors and their names (the suffix of kernel names: rms_norm_f16, ...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtlinv {

enum class DType : uint8_t { f32, f16, bf16, u32, i32, u8, i8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);        // "float32", "float16", "bfloat16", "uint32", "int32", "uint8", "int8"
const char* dtype_suffix(DType t);      // "f32", "f16", "bf16", "u32", "i32", "u8", "i8"
DType dtype_from_name(const std::string& name);  // throws DTypeError
bool is_float(DType t);

}  // namespace mtlinv
