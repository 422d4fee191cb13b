// User-space execution contexts (fibers) for the emulator: one per GPU thread.
//
// Every fiber starts in the floating-point modes its FpMode names (IEEE defaults: round to nearest, no flush to
// zero), whatever the host thread's: a fiber once inherited the creating thread's, so a caller that turned on
// flush-to-zero after the worker pool started (a -ffast-math library, torch.set_flush_denormal) flushed subnormals
// in the threadgroups it ran itself and not in the pool's, and a row's bits depended on M.
//
// x86-64 and arm64 switch with a few lines of assembly (callee-saved registers and FP control, no syscall), on
// Linux and other ELF systems and on macOS (Mach-O) alike: one instruction sequence, only the assembler directives
// differ. Anything else, or a build with -DEMU_PORTABLE_FIBERS=1, uses ucontext, which is correct but does a
// syscall per switch (and is deprecated on macOS, though it still works there).
// Under AddressSanitizer every switch is announced to ASan, which otherwise reports stack accesses on a
// foreign stack as errors.
#pragma once
#include <cstddef>

#if !defined(EMU_PORTABLE_FIBERS)
#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(__ELF__) || defined(__APPLE__))
#define EMU_PORTABLE_FIBERS 0
#else
#define EMU_PORTABLE_FIBERS 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif

namespace emu::detail {

// ASan's instrumented frames are several times larger, so its fibers get more room.
constexpr size_t kFiberStackBytes = EMU_ASAN ? 256 * 1024 : 64 * 1024;

#if EMU_PORTABLE_FIBERS
// Room for a ucontext_t, which this header keeps opaque: macOS declares the ucontext routines only to code that
// defines _XOPEN_SOURCE before its first system header, and only fiber.cpp can promise that (its includers cannot).
// fiber.cpp checks that the real type fits (glibc's arm64 ucontext_t, the largest known, is 4560 bytes).
constexpr size_t kUcontextBytes = 4608;
#endif

// A fiber stack: [lo, lo + size) is usable; the page below lo is a guard page, so an overflow faults at once.
struct Stack {
  char* lo = nullptr;
  size_t size = 0;
};
Stack stack_alloc(size_t size);
void stack_free(Stack s);
// Forgets ASan's poisoning of a stack whose frames were abandoned (a fiber that never returned), before reuse.
void stack_forget_frames(Stack s);

struct Context {
#if EMU_PORTABLE_FIBERS
  alignas(16) unsigned char uc[kUcontextBytes];  // a ucontext_t (fiber.cpp)
#else
  void* sp = nullptr;  // the suspended context's registers are saved on its own stack, below sp
#endif
  // Bounds of the stack this context runs on, for ASan (a thread's native stack learns them on first switch).
  const void* stack_lo = nullptr;
  size_t stack_size = 0;
#if EMU_ASAN
  // ASan's fake stack (for detect_stack_use_after_return) of the fiber that last ran on this Context, kept
  // for the next one: creating one per fiber maps megabytes and made launches 30 times slower.
  void* asan_fake_stack = nullptr;
#endif
};

using FiberEntry = void (*)(void* arg);

// The floating-point modes a fiber starts in. kFlushSubnormals: float (and double) subnormals are flushed to zero
// as operands and as results, keeping their sign (x86-64: MXCSR's DAZ and FTZ; arm64: FPCR.FZ), as a GPU that
// flushes them computes (the emulator's MTLINV_EMU_FTZ mode, emu::set_flush_subnormals).
enum class FpMode { kIeee, kFlushSubnormals };
// Whether this CPU has those modes to set (anywhere else the runtime refuses to launch in kFlushSubnormals).
#if defined(__x86_64__) || defined(__aarch64__)
constexpr bool kFlushSubnormalsSupported = true;
#else
constexpr bool kFlushSubnormalsSupported = false;
#endif

// Prepares `c` so that the first switch to it calls entry(arg) on `stack`, in the modes `fp`. entry must call
// context_started(c) first and must never return: it ends with context_exit(c, ...).
void context_make(Context& c, Stack stack, FiberEntry entry, void* arg, FpMode fp);

#if EMU_PORTABLE_FIBERS
void portable_switch(Context& from, Context& to);
#else
extern "C" void emu_fiber_switch(void** save_sp, void* new_sp);
#endif
#if EMU_ASAN
// The same switch, announced to ASan (out of line: speed does not matter there).
void asan_switch(Context& from, Context& to);
#endif

// Suspends the running context into `from` and resumes `to`; returns when something switches back to `from`.
inline void context_switch(Context& from, Context& to) {
#if EMU_ASAN
  asan_switch(from, to);
#elif EMU_PORTABLE_FIBERS
  portable_switch(from, to);
#else
  emu_fiber_switch(&from.sp, to.sp);
#endif
}

// First statement of a fiber entry function; `self` is the Context it was made in.
void context_started(Context& self);
// Last statement of a fiber entry function: leaves the fiber for good (its stack may then be reused).
[[noreturn]] void context_exit(Context& from, Context& to);

}  // namespace emu::detail
