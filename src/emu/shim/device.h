// Kernel-side bindings: device pointers (raw, or bounds-checked in the checked build), the bind_* functions the
// pre-pass emits for a kernel's parameters, and MTLINV_KERNEL, which registers a kernel with the runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../runtime.h"
#include "vec.h"

// Which build of the kernels this translation unit is: 0 = fast (raw pointers), 1 = checked.
#ifndef EMU_CHECKED
#define EMU_CHECKED 0
#endif

namespace emu {

// A device pointer that knows its buffer: every dereference checks that the sizeof(T) bytes it touches lie
// inside the buffer and are aligned for T, and throws emu::Fault naming the kernel, the buffer and the offset
// otherwise. Arithmetic is unchecked, as on a GPU: a pointer may wander outside its buffer and come back.
// The position is kept as a byte offset from the buffer start, so wandering pointers are plain integers.
template <class T>
class checked_ptr {
 public:
  checked_ptr() = default;
  checked_ptr(T* base, std::size_t bytes, int index, const char* kernel, const char* name = nullptr)
      : base_(const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(base))),
        bytes_(bytes), index_(index), kernel_(kernel), name_(name) {}

  // Adding const is implicit; any other change of element type is a cast, `(EMU_DPTR(const half4))(p)`, and
  // keeps the buffer and the position.
  template <class U, std::enable_if_t<std::is_same<const U, T>::value && !std::is_same<U, T>::value, int> = 0>
  checked_ptr(const checked_ptr<U>& o)
      : base_(o.base_), off_(o.off_), bytes_(o.bytes_), index_(o.index_), kernel_(o.kernel_), name_(o.name_) {}
  template <class U, std::enable_if_t<!std::is_same<const U, T>::value, int> = 0>
  explicit checked_ptr(const checked_ptr<U>& o)
      : base_(o.base_), off_(o.off_), bytes_(o.bytes_), index_(o.index_), kernel_(o.kernel_), name_(o.name_) {}

  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  T& operator[](I i) const {
    std::ptrdiff_t delta = 0;
    std::ptrdiff_t at = 0;
    if (__builtin_mul_overflow(i, static_cast<std::ptrdiff_t>(sizeof(T)), &delta) ||
        __builtin_add_overflow(off_, delta, &at)) {
      fault_index(i);
    }
    return access(at);
  }
  T& operator*() const { return access(off_); }
  T* operator->() const { return &access(off_); }

  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  checked_ptr& operator+=(I n) {
    off_ += scaled(n);
    return *this;
  }
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  checked_ptr& operator-=(I n) {
    off_ -= scaled(n);
    return *this;
  }
  checked_ptr& operator++() { return *this += 1; }
  checked_ptr& operator--() { return *this -= 1; }
  checked_ptr operator++(int) {
    checked_ptr old = *this;
    *this += 1;
    return old;
  }
  checked_ptr operator--(int) {
    checked_ptr old = *this;
    *this -= 1;
    return old;
  }
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  friend checked_ptr operator+(checked_ptr p, I n) {
    return p += n;
  }
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  friend checked_ptr operator+(I n, checked_ptr p) {
    return p += n;
  }
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  friend checked_ptr operator-(checked_ptr p, I n) {
    return p -= n;
  }
  // Elements between two pointers into the same buffer.
  friend std::ptrdiff_t operator-(const checked_ptr& a, const checked_ptr& b) {
    if (a.base_ != b.base_) {
      throw Fault(a.prefix() + "pointer difference with a pointer into another buffer (" + std::to_string(b.index_) +
                  ")");
    }
    return (a.off_ - b.off_) / static_cast<std::ptrdiff_t>(sizeof(T));
  }
  friend bool operator==(const checked_ptr& a, const checked_ptr& b) { return a.address() == b.address(); }
  friend bool operator!=(const checked_ptr& a, const checked_ptr& b) { return a.address() != b.address(); }
  friend bool operator<(const checked_ptr& a, const checked_ptr& b) { return a.address() < b.address(); }
  friend bool operator<=(const checked_ptr& a, const checked_ptr& b) { return a.address() <= b.address(); }
  friend bool operator>(const checked_ptr& a, const checked_ptr& b) { return a.address() > b.address(); }
  friend bool operator>=(const checked_ptr& a, const checked_ptr& b) { return a.address() >= b.address(); }

 private:
  template <class>
  friend class checked_ptr;

  // n elements in bytes, wrapping like pointer arithmetic would (no undefined overflow).
  template <class I>
  static std::ptrdiff_t scaled(I n) {
    return static_cast<std::ptrdiff_t>(static_cast<uint64_t>(static_cast<int64_t>(n)) * sizeof(T));
  }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(base_) + static_cast<std::uintptr_t>(off_); }

  T& access(std::ptrdiff_t at) const {
    if (at < 0 || static_cast<std::size_t>(at) > bytes_ || bytes_ - static_cast<std::size_t>(at) < sizeof(T)) {
      fault_range(at);
    }
    if ((reinterpret_cast<std::uintptr_t>(base_) + static_cast<std::uintptr_t>(at)) % alignof(T) != 0) {
      fault_alignment(at);
    }
    return *reinterpret_cast<T*>(base_ + at);
  }

  // "kernel K: buffer 2 (x): "; the name only when the binding supplied one.
  std::string prefix() const {
    std::string s = "kernel ";
    s += kernel_ ? kernel_ : "?";
    s += ": buffer " + std::to_string(index_);
    if (name_) s += std::string(" (") + name_ + ")";
    return s + ": ";
  }
  // A const element can only be read; otherwise the reference may be read or written.
  static const char* what() { return std::is_const<T>::value ? "load" : "access"; }

  [[noreturn]] void fault_range(std::ptrdiff_t at) const {
    throw Fault(prefix() + what() + " of " + std::to_string(sizeof(T)) + " bytes at byte offset " +
                std::to_string(at) + " outside [0, " + std::to_string(bytes_) + ")");
  }
  [[noreturn]] void fault_alignment(std::ptrdiff_t at) const {
    throw Fault(prefix() + "misaligned " + what() + " of " + std::to_string(sizeof(T)) + " bytes at byte offset " +
                std::to_string(at) + " (needs alignment " + std::to_string(alignof(T)) + ")");
  }
  template <class I>
  [[noreturn]] void fault_index(I i) const {
    throw Fault(prefix() + what() + " at element index " + std::to_string(i) + " overflows the address space");
  }

  unsigned char* base_ = nullptr;  // buffer start
  std::ptrdiff_t off_ = 0;         // position, bytes from base_
  std::size_t bytes_ = 0;          // buffer size
  int index_ = -1;                 // [[buffer(index)]]
  const char* kernel_ = nullptr;
  const char* name_ = nullptr;     // parameter name, when known
};

// The mode-dependent names live in an inline namespace per mode, so the fast and checked builds of a kernel file
// link into one library without two different definitions of one entity.
#if EMU_CHECKED
inline namespace checked_build {
template <class T>
using dptr = checked_ptr<T>;
#else
inline namespace fast_build {
template <class T>
using dptr = T*;
#endif

// [[buffer(i)]] as a device pointer. `name`, when the caller passes it, appears in fault messages.
template <class T>
dptr<T> bind_device(const KernelCtx& ctx, int i, const char* name = nullptr) {
  if (i < 0 || i >= ctx.num_buffers) {
    throw Fault(std::string("kernel ") + ctx.kernel_name + ": buffer " + std::to_string(i) + (name ? " (" : "") +
                (name ? name : "") + (name ? ")" : "") + " is not bound (the dispatch binds " +
                std::to_string(ctx.num_buffers) + " buffers)");
  }
#if EMU_CHECKED
  return checked_ptr<T>(static_cast<T*>(ctx.buffers[i]), ctx.buffer_bytes[i], i, ctx.kernel_name, name);
#else
  return static_cast<T*>(ctx.buffers[i]);
#endif
}

}  // inline namespace checked_build / fast_build

// [[buffer(i)]] as the kernel's argument struct; the buffer must hold at least sizeof(S) bytes.
template <class S>
const S& bind_constant(const KernelCtx& ctx, int i) {
  if (i < 0 || i >= ctx.num_buffers) {
    throw Fault(std::string("kernel ") + ctx.kernel_name + ": argument buffer " + std::to_string(i) +
                " is not bound (the dispatch binds " + std::to_string(ctx.num_buffers) + " buffers)");
  }
  if (ctx.buffer_bytes[i] < sizeof(S)) {
    throw Fault(std::string("kernel ") + ctx.kernel_name + ": argument buffer " + std::to_string(i) + " holds " +
                std::to_string(ctx.buffer_bytes[i]) + " bytes, the argument struct needs " +
                std::to_string(sizeof(S)));
  }
  return *static_cast<const S*>(ctx.buffers[i]);
}

// A thread-position attribute in the parameter's declared type: uint/ushort (the x component of a dim3),
// uint2/uint3/ushort2/... (its leading components), or uint/ushort from a scalar index.
template <class T>
T attr(const dim3& d) {
  if constexpr (metal::is_vec<T>::value) {
    using E = typename T::value_type;
    const uint32_t c[3] = {d.x, d.y, d.z};
    T r{};
    for (int i = 0; i < T::size; ++i) r[i] = static_cast<E>(c[i]);
    return r;
  } else {
    static_assert(std::is_integral<T>::value, "position attributes are integers or integer vectors");
    return static_cast<T>(d.x);
  }
}
template <class T>
T attr(uint32_t v) {
  static_assert(std::is_integral<T>::value, "index attributes are integers");
  return static_cast<T>(v);
}

}  // namespace emu

namespace metal {
// load_streaming (an mtlinv builtin beside MSL's, see metal/common.h): a plain load here, bounds-checked in the
// checked build like every other.
template <class P>
auto load_streaming(const P& p) -> std::remove_cv_t<std::remove_reference_t<decltype(*p)>> {
  return *p;
}
// prefetch_l2 (metal/common.h): a hint, so nothing in the fast build; the checked build reads the range's first and
// last elements, so that a range outside its buffer faults as a load of it would.
template <class T>
void prefetch_l2(T*, uint32_t) {}
template <class T>
void prefetch_l2(const ::emu::checked_ptr<T>& p, uint32_t n) {
  if (n > 0) {
    (void)p[0];
    (void)p[n - 1];
  }
}
// wait_for_previous_kernels (metal/common.h): the emulator runs a dispatch after the one before it has finished.
inline void wait_for_previous_kernels() {}
}  // namespace metal

#define EMU_DPTR(...) ::emu::dptr<__VA_ARGS__>

// One registration per kernel instantiation and build; the variable's name comes from the kernel's host name,
// which is unique, and the template arguments may contain commas (fn<half, 8>).
#define MTLINV_KERNEL(name, fn, ...) \
  static const ::emu::Registrar mtlinv_registrar_##name(#name, &fn<__VA_ARGS__>, (EMU_CHECKED) != 0);
// A kernel that waits itself (metal/common.h) is registered alike: here its wait does nothing.
#define MTLINV_KERNEL_WAITS(name, fn, ...) MTLINV_KERNEL(name, fn, __VA_ARGS__)
