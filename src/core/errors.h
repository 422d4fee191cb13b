// The error hierarchy of the C++ core. pyx/errors.pxi turns each into an mtlinv.MtlinvError subclass that also
// derives from the fitting Python builtin. Messages carry the offending values:
//   throw InvalidArgument("gemv: x has K=", 4095, " but w has K=", 4096);
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mtlinv {

template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define MTLINV_DEFINE_ERROR(Name)                                                    \
  struct Name : Error {                                                              \
    template <class... Parts>                                                        \
    explicit Name(Parts&&... parts) : Error(concat(std::forward<Parts>(parts)...)) {} \
  };

MTLINV_DEFINE_ERROR(InvalidArgument)  // ValueError: bad shape, value, limit
MTLINV_DEFINE_ERROR(DTypeError)       // TypeError: unsupported or mixed dtypes
MTLINV_DEFINE_ERROR(DeviceError)      // RuntimeError: no device, backend not built, command failure
MTLINV_DEFINE_ERROR(KernelError)      // RuntimeError: a kernel faulted (emulator checks, CUDA errors)
MTLINV_DEFINE_ERROR(OutOfMemory)      // MemoryError
#undef MTLINV_DEFINE_ERROR

}  // namespace mtlinv
