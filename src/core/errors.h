// The error hierarchy of the C++ core, and the one mapping of C++ exceptions to the kinds of error the boundaries
// report (classify_current_exception): the C API as a status, Python (pyx/error_bridge.h) as an mtlinv.MtlinvError
// subclass that also derives from the fitting Python builtin. Messages carry the offending values:
//   throw InvalidArgument("gemv: x has K=", 4095, " but w has K=", 4096);
#pragma once
#include <exception>
#include <new>
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

// The kinds of error, numbered as the C API's mtlinv_status (include/mtlinv/mtlinv.h; src/capi asserts it).
enum class ErrorKind : int { invalid_argument = 1, dtype = 2, device = 3, kernel = 4, out_of_memory = 5, internal = 6 };

struct CaughtError {
  ErrorKind kind;
  std::string message;
};

// The exception in flight, classified; call it inside a catch block. An exception that is not an mtlinv::Error is
// internal, except std::bad_alloc, which is out_of_memory.
inline CaughtError classify_current_exception() {
  try {
    throw;
  } catch (const InvalidArgument& e) {
    return {ErrorKind::invalid_argument, e.what()};
  } catch (const DTypeError& e) {
    return {ErrorKind::dtype, e.what()};
  } catch (const DeviceError& e) {
    return {ErrorKind::device, e.what()};
  } catch (const KernelError& e) {
    return {ErrorKind::kernel, e.what()};
  } catch (const OutOfMemory& e) {
    return {ErrorKind::out_of_memory, e.what()};
  } catch (const std::bad_alloc&) {
    return {ErrorKind::out_of_memory, "out of host memory"};
  } catch (const std::exception& e) {
    return {ErrorKind::internal, e.what()};
  } catch (...) {
    return {ErrorKind::internal, "unknown C++ exception"};
  }
}

}  // namespace mtlinv
