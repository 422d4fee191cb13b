// The library's kernel table (generated from metal/*.metal by tools/kernel_table.py, build/gen/kernel_table.h) and
// the lookup plans pick their kernels with: by family and template arguments, the very arguments of the kernel's
// MTLINV_KERNEL line, so that a kernel's name is written once, there.
//
//   kernel_id(KernelFamily::gemv_nk, DType::f16, 8)   // MTLINV_KERNEL(gemv_nk_r8_f16, gemv_nk, half, 8)
//
// Arguments: a DType for float / half / bfloat, a bool for true / false, an integer for a number; all of them, in
// the template's order. An instantiation that does not exist is a compile error where the arguments are constants,
// else a KernelError naming the family and arguments when the plan runs (tests/runtime/test_kernel_table.py plans every
// kernel every plan can pick).
#pragma once
#include <cstdint>
#include <type_traits>

#include "dtype.h"
#include "kernel_id.h"
#include "kernel_table.h"  // generated

namespace mtlinv {

namespace kernel_lookup {

constexpr int32_t encode(DType t) { return static_cast<int32_t>(t); }
constexpr int32_t encode(bool b) { return b ? 1 : 0; }
template <class T, class = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
constexpr int32_t encode(T v) {
  return static_cast<int32_t>(v);
}

// Throws KernelError: the plan asked for an instantiation metal/ does not have.
[[noreturn]] void missing(KernelFamily family, const int32_t* args, int arity);

}  // namespace kernel_lookup

template <class... Args>
constexpr KernelId kernel_id(KernelFamily family, Args... args) {
  constexpr int arity = sizeof...(Args);
  static_assert(arity <= kernel_table::kMaxArgs, "more template arguments than any kernel has");
  const int32_t key[arity + 1] = {kernel_lookup::encode(args)..., 0};
  const auto f = static_cast<size_t>(family);
  for (int id = kernel_table::kFamilyFirst[f]; id < kernel_table::kFamilyFirst[f + 1]; ++id) {
    const kernel_table::Entry& e = kernel_table::kEntries[id];
    bool same = e.arity == arity;
    for (int i = 0; same && i < arity; ++i) same = e.args[i] == key[i];
    if (same) return kernel_at(static_cast<size_t>(id));
  }
  kernel_lookup::missing(family, key, arity);
}

const char* kernel_family_name(KernelFamily family);

}  // namespace mtlinv
