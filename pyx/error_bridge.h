// Turns the C++ exception in flight into the matching mtlinv Python exception (pyx/_native.pyx registers the
// classes at import). Used as Cython's `except +raise_py_error` handler, so every native call has one error idiom.
#pragma once
#include <Python.h>

#include <new>
#include <stdexcept>

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

inline void raise_py_error() {
  ErrorClasses& c = error_classes();
  try {
    throw;
  } catch (const mtlinv::InvalidArgument& e) {
    PyErr_SetString(c.invalid_argument, e.what());
  } catch (const mtlinv::DTypeError& e) {
    PyErr_SetString(c.dtype, e.what());
  } catch (const mtlinv::DeviceError& e) {
    PyErr_SetString(c.device, e.what());
  } catch (const mtlinv::KernelError& e) {
    PyErr_SetString(c.kernel, e.what());
  } catch (const mtlinv::OutOfMemory& e) {
    PyErr_SetString(c.memory, e.what());
  } catch (const mtlinv::ChecksPassed&) {
    PyErr_SetString(c.checks_passed, "the op's checks passed");
  } catch (const std::bad_alloc&) {
    PyErr_SetString(c.memory, "out of host memory");
  } catch (const std::exception& e) {
    PyErr_SetString(c.base, e.what());
  } catch (...) {
    PyErr_SetString(c.base, "unknown C++ exception");
  }
}

}  // namespace mtlinv_py
