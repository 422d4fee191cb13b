// Fiber stacks and context switching; see fiber.h.
#if defined(__APPLE__)
// macOS declares the ucontext routines only for X/Open code, which must say so before any system header; Darwin's
// own extensions (MAP_ANON, MAP_NORESERVE) then need _DARWIN_C_SOURCE to stay visible.
#define _XOPEN_SOURCE 700
#define _DARWIN_C_SOURCE 1
#endif
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cfenv>
#include <cstdint>
#include <new>
#include <system_error>

#if EMU_PORTABLE_FIBERS
#include <ucontext.h>
#endif

#if EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu::detail {

// The floating-point control words of FpMode (fiber.h). x86-64: MXCSR 0x1F80 is round to nearest with every
// exception masked; FTZ (bit 15) replaces a subnormal result by zero, DAZ (bit 6) reads a subnormal operand as zero.
// arm64: FPCR 0 is round to nearest, no flush to zero, no default NaN; FZ (bit 24) does both of those.
#if defined(__x86_64__)
constexpr uint32_t kMxcsrIeee = 0x1F80u;
constexpr uint32_t kMxcsrFlush = kMxcsrIeee | 0x8000u | 0x0040u;
#elif defined(__aarch64__)
[[maybe_unused]] constexpr uint64_t kFpcrIeee = 0;  // unused by the ucontext fibers, which start from FE_DFL_ENV
constexpr uint64_t kFpcrFlush = uint64_t{1} << 24;
#endif

// Switches without telling ASan.
static void raw_switch(Context& from, Context& to) {
#if EMU_PORTABLE_FIBERS
  portable_switch(from, to);
#else
  emu_fiber_switch(&from.sp, to.sp);
#endif
}

#if EMU_ASAN
// The context being left by the switch in progress on this thread: the resumed side records its stack bounds,
// which ASan reports only on arrival (a thread's native stack has no bounds in its Context until then).
static thread_local Context* tl_switching_from = nullptr;

void asan_switch(Context& from, Context& to) {
  void* fake_stack = nullptr;
  tl_switching_from = &from;
  __sanitizer_start_switch_fiber(&fake_stack, to.stack_lo, to.stack_size);
  raw_switch(from, to);
  Context* prev = tl_switching_from;
  __sanitizer_finish_switch_fiber(fake_stack, &prev->stack_lo, &prev->stack_size);
}
#endif

#ifdef MAP_STACK
constexpr int kMapStack = MAP_STACK;  // Linux, the BSDs: the mapping is a thread stack
#else
constexpr int kMapStack = 0;  // macOS has no such flag
#endif

static size_t page_bytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

Stack stack_alloc(size_t size) {
  const size_t page = page_bytes();
  size = (size + page - 1) / page * page;
  // MAP_NORESERVE: a fiber touches only the top page or two of its stack, so don't charge the rest up front.
  void* base = mmap(nullptr, size + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | kMapStack, -1, 0);
  // Each stack costs two memory mappings (stack and guard): many workers times 1024-thread threadgroups can
  // reach vm.max_map_count, hence the errno in the message.
  if (base == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap of a fiber stack");
  if (mprotect(base, page, PROT_NONE) != 0) {
    const int err = errno;
    munmap(base, size + page);
    throw std::system_error(err, std::generic_category(), "mprotect of a fiber stack's guard page");
  }
  return Stack{static_cast<char*>(base) + page, size};
}

void stack_free(Stack s) {
  if (s.lo) munmap(s.lo - page_bytes(), s.size + page_bytes());
}

void stack_forget_frames([[maybe_unused]] Stack s) {
#if EMU_ASAN
  __asan_unpoison_memory_region(s.lo, s.size);
#endif
}

void context_started([[maybe_unused]] Context& self) {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(self.asan_fake_stack, &tl_switching_from->stack_lo, &tl_switching_from->stack_size);
#endif
}

void context_exit(Context& from, Context& to) {
#if EMU_ASAN
  tl_switching_from = &from;
  __sanitizer_start_switch_fiber(&from.asan_fake_stack, to.stack_lo, to.stack_size);
#endif
  raw_switch(from, to);
  __builtin_unreachable();
}

#if EMU_PORTABLE_FIBERS

static_assert(sizeof(ucontext_t) <= kUcontextBytes && alignof(ucontext_t) <= 16,
              "fiber.h: Context::uc has no room for this system's ucontext_t; raise kUcontextBytes");

static ucontext_t& uc(Context& c) { return *reinterpret_cast<ucontext_t*>(c.uc); }

// macOS marks the ucontext routines deprecated; they still work there, and this path runs only where asked for.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// makecontext passes only int arguments, so the two pointers travel as 32-bit halves.
static void uc_trampoline(unsigned entry_hi, unsigned entry_lo, unsigned arg_hi, unsigned arg_lo, unsigned fp) {
  std::fesetenv(FE_DFL_ENV);  // IEEE defaults, not getcontext's copy of the creating thread's modes (fiber.h)
  if (static_cast<FpMode>(fp) == FpMode::kFlushSubnormals) {
#if defined(__x86_64__)
    __builtin_ia32_ldmxcsr(kMxcsrFlush);
#elif defined(__aarch64__)
    asm volatile("msr fpcr, %0" ::"r"(kFpcrFlush));
#endif
  }
  auto join = [](unsigned hi, unsigned lo) { return (static_cast<uintptr_t>(hi) << 16 << 16) | lo; };
  auto entry = reinterpret_cast<FiberEntry>(join(entry_hi, entry_lo));
  entry(reinterpret_cast<void*>(join(arg_hi, arg_lo)));
}

void context_make(Context& c, Stack stack, FiberEntry entry, void* arg, FpMode fp) {
  ucontext_t& u = *new (c.uc) ucontext_t;
  getcontext(&u);
  u.uc_stack.ss_sp = stack.lo;
  u.uc_stack.ss_size = stack.size;
  u.uc_link = nullptr;
  auto e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
  makecontext(&u, reinterpret_cast<void (*)()>(uc_trampoline), 5, static_cast<unsigned>(e >> 16 >> 16),
              static_cast<unsigned>(e), static_cast<unsigned>(a >> 16 >> 16), static_cast<unsigned>(a),
              static_cast<unsigned>(fp));
  c.stack_lo = stack.lo;
  c.stack_size = stack.size;
}

void portable_switch(Context& from, Context& to) { swapcontext(&uc(from), &uc(to)); }

#pragma GCC diagnostic pop

#else

// The switch's functions in the object format's own directives; the instructions between them are one text on
// every system. Mach-O (macOS) prefixes C symbols with an underscore, hides them with .private_extern and has no
// .type or .size; ELF has all three.
#if defined(__APPLE__)
#define EMU_ASM_BEGIN(name) ".globl _" #name "\n.private_extern _" #name "\n.p2align 4\n_" #name ":\n"
#define EMU_ASM_END(name) ""
#else
#define EMU_ASM_BEGIN(name) \
  ".globl " #name "\n.hidden " #name "\n.type " #name ", %function\n.p2align 4\n" #name ":\n"
#define EMU_ASM_END(name) ".size " #name ", .-" #name "\n"
#endif

#if defined(__x86_64__)

// emu_fiber_switch(rdi = where to save the old rsp, rsi = the new rsp). The frame it leaves on the old stack,
// from rsp up: MXCSR (4 bytes), x87 control word (2), pad (2), r15, r14, r13, r12, rbx, rbp, return address.
// The FP control words are reloaded only when they differ: fldcw serialises and would double the switch's cost,
// and fibers of one thread nearly always share them.
// A new fiber's frame returns into emu_fiber_trampoline, which calls r13(r12) = entry(arg).
asm(".text\n" EMU_ASM_BEGIN(emu_fiber_switch) R"(
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsp, %rax
  movq %rsi, %rsp
  movl (%rax), %ecx
  cmpl (%rsp), %ecx
  jne 1f
  movw 4(%rax), %cx
  cmpw 4(%rsp), %cx
  je 2f
1:
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
2:
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)" EMU_ASM_END(emu_fiber_switch) EMU_ASM_BEGIN(emu_fiber_trampoline) R"(
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
)" EMU_ASM_END(emu_fiber_trampoline));
extern "C" void emu_fiber_trampoline();

void context_make(Context& c, Stack stack, FiberEntry entry, void* arg, FpMode fp) {
  auto top = reinterpret_cast<uintptr_t>(stack.lo + stack.size) & ~uintptr_t{15};
  // After the switch's `ret`, rsp = top - 16: 16-byte aligned before the trampoline's call, as the ABI wants.
  auto* frame = reinterpret_cast<uint64_t*>(top - 80);
  // MXCSR as `fp` says, and the x87 control word's default 0x037F (x87 has no flush to zero; nothing uses it).
  frame[0] = (fp == FpMode::kFlushSubnormals ? kMxcsrFlush : kMxcsrIeee) | uint64_t{0x037F} << 32;
  frame[1] = 0;                                          // r15
  frame[2] = 0;                                          // r14
  frame[3] = reinterpret_cast<uint64_t>(entry);          // r13
  frame[4] = reinterpret_cast<uint64_t>(arg);            // r12
  frame[5] = 0;                                          // rbx
  frame[6] = 0;                                          // rbp: ends frame-pointer backtraces here
  frame[7] = reinterpret_cast<uint64_t>(&emu_fiber_trampoline);
  frame[8] = 0;
  frame[9] = 0;
  c.sp = frame;
  c.stack_lo = stack.lo;
  c.stack_size = stack.size;
}

#elif defined(__aarch64__)

// emu_fiber_switch(x0 = where to save the old sp, x1 = the new sp). The 176-byte frame it leaves on the old
// stack: x19..x30 at [sp, #0..#88], d8..d15 at [sp, #96..#152], FPCR at [sp, #160] (8 bytes of padding after).
// FPCR holds the rounding mode and flush-to-zero: each fiber keeps its own, as each GPU thread would and as the
// x86-64 switch keeps MXCSR and the x87 control word. Without it one fiber's fesetround reached every fiber of
// its worker thread and the thread itself (tests/emu/test_runtime.cpp, test_fp_modes, run under qemu-aarch64).
// It is written only when it differs: fibers of one thread nearly always share it, and msr fpcr is not cheap.
// A new fiber's frame "returns" (x30) into emu_fiber_trampoline, which calls x20(x19) = entry(arg).
asm(".text\n" EMU_ASM_BEGIN(emu_fiber_switch) R"(
  sub sp, sp, #176
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mrs x9, fpcr
  str x9, [sp, #160]
  mov x10, sp
  str x10, [x0]
  mov sp, x1
  ldr x10, [sp, #160]
  cmp x9, x10
  b.eq 1f
  msr fpcr, x10
1:
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #176
  ret
)" EMU_ASM_END(emu_fiber_switch) EMU_ASM_BEGIN(emu_fiber_trampoline) R"(
  .cfi_startproc
  .cfi_undefined x30
  mov x0, x19
  blr x20
  brk #0
  .cfi_endproc
)" EMU_ASM_END(emu_fiber_trampoline));
extern "C" void emu_fiber_trampoline();

void context_make(Context& c, Stack stack, FiberEntry entry, void* arg, FpMode fp) {
  auto top = reinterpret_cast<uintptr_t>(stack.lo + stack.size) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 176);
  for (int i = 0; i < 22; ++i) frame[i] = 0;  // x29 = 0 ends frame-pointer backtraces here
  frame[0] = reinterpret_cast<uint64_t>(arg);    // x19
  frame[1] = reinterpret_cast<uint64_t>(entry);  // x20
  frame[11] = reinterpret_cast<uint64_t>(&emu_fiber_trampoline);  // x30
  frame[20] = fp == FpMode::kFlushSubnormals ? kFpcrFlush : kFpcrIeee;  // FPCR
  c.sp = frame;
  c.stack_lo = stack.lo;
  c.stack_size = stack.size;
}

#endif  // __aarch64__
#endif  // EMU_PORTABLE_FIBERS

}  // namespace emu::detail
