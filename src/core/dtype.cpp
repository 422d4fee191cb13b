#include "dtype.h"

#include "errors.h"

namespace mtlinv {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  const char* name;
  const char* suffix;
};
constexpr DTypeInfo kInfo[] = {
    {DType::f32, 4, "float32", "f32"}, {DType::f16, 2, "float16", "f16"}, {DType::bf16, 2, "bfloat16", "bf16"},
    {DType::u32, 4, "uint32", "u32"},  {DType::i32, 4, "int32", "i32"},   {DType::u8, 1, "uint8", "u8"},
    {DType::i8, 1, "int8", "i8"},
};
const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_suffix(DType t) { return info(t).suffix; }
bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

DType dtype_from_name(const std::string& name) {
  for (const auto& i : kInfo) {
    if (name == i.name) return i.type;
  }
  throw DTypeError("unsupported dtype '", name, "' (supported: float32, float16, bfloat16, uint32, int32, uint8, int8)");
}

}  // namespace mtlinv
