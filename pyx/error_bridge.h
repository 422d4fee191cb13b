// Turns the C++ exception in flight into the matching mtlinv Python exception (pyx/_native.pyx registers the
// classes at import). Used as Cython's `except +raise_py_error` handler, so every native call has one error idiom.
#pragma once
#include <Python.h>

#include "../src/core/checks_only.h"
#include "../src/core/errors.h"

namespace mtlinv_py {

struct ErrorClasses {
  PyObject* invalid_argument = nullptr;  // mtlinv.InvalidArgumentError(MtlinvError, ValueError)
  PyObject* dtype = nullptr;             // mtlinv.DTypeError(MtlinvError, TypeError)
  PyObject* device = nullptr;            // mtlinv.DeviceError(MtlinvError, RuntimeError)
  PyObject* kernel = nullptr;            // mtlinv.KernelError(MtlinvError, RuntimeError)
  PyObject* memory = nullptr;            // mtlinv.OutOfMemoryError(MtlinvError, MemoryError)
  PyObject* base = nullptr;              // mtlinv.MtlinvError
  PyObject* checks_passed = nullptr;     // _native._ChecksPassed (src/core/checks_only.h), caught by the ops
};

inline ErrorClasses& error_classes() {
  static ErrorClasses classes;
  return classes;
}

// The exception's kind comes from the core (classify_current_exception); an internal error is the base class.
inline PyObject* error_class(mtlinv::ErrorKind kind) {
  const ErrorClasses& c = error_classes();
  switch (kind) {
    case mtlinv::ErrorKind::invalid_argument: return c.invalid_argument;
    case mtlinv::ErrorKind::dtype: return c.dtype;
    case mtlinv::ErrorKind::device: return c.device;
    case mtlinv::ErrorKind::kernel: return c.kernel;
    case mtlinv::ErrorKind::out_of_memory: return c.memory;
    case mtlinv::ErrorKind::internal: break;
  }
  return c.base;
}

// ChecksPassed is no error: the end of an op's checks-only run (src/core/checks_only.h), for _checks_first.
inline void raise_py_error() {
  try {
    throw;
  } catch (const mtlinv::ChecksPassed&) {
    PyErr_SetString(error_classes().checks_passed, "the op's checks passed");
  } catch (...) {
    const mtlinv::CaughtError error = mtlinv::classify_current_exception();
    PyErr_SetString(error_class(error.kind), error.message.c_str());
  }
}

}  // namespace mtlinv_py
