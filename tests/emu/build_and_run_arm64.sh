#!/usr/bin/env bash
# The emulator on arm64, which none of our machines is: cross-compiled with aarch64-linux-gnu-g++ and run under
# qemu-aarch64, user-mode emulation that executes the arm64 code paths (the fiber switch's assembly first) and says
# nothing of their speed. Three parts: tests/emu/test_runtime.cpp with the assembly and the ucontext fibers,
# tests/emu/test_shim.cpp with the real runtime, and the CMake library's two examples, which run gemv and sdpa
# kernels and compare a row's bits with the row alone (as tests/ops/test_embedding.py does on this machine).
# Needs g++-aarch64-linux-gnu and qemu-user (Debian packages, which .ci/run installs), cmake and numpy.
# Usage: tests/emu/build_and_run_arm64.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/emu-arm64}"
mkdir -p "$out"
cxx=aarch64-linux-gnu-g++
cc=aarch64-linux-gnu-gcc
qemu=qemu-aarch64
sysroot=/usr/aarch64-linux-gnu
for tool in "$cxx" "$cc" "$qemu" cmake; do
  if ! command -v "$tool" >/dev/null; then
    echo "build_and_run_arm64.sh: $tool not found" \
      "(apt-get install g++-aarch64-linux-gnu qemu-user; pip install cmake)" >&2
    exit 2
  fi
done
on_arm64() { "$qemu" -L "$sysroot" "$@"; }
flags=(-std=c++17 -O2 -ffp-contract=off -Wall -Wextra -Werror -pthread -I"$root/src/emu")
runtime=("$root"/src/emu/{fiber,scheduler,thread_pool,runtime,registry}.cpp)

for fibers in assembly ucontext; do
  extra=()
  [[ $fibers == ucontext ]] && extra=(-DEMU_PORTABLE_FIBERS=1)
  echo "== runtime, $fibers fibers"
  "$cxx" "${flags[@]}" "${extra[@]}" "${runtime[@]}" "$root/tests/emu/test_runtime.cpp" -o "$out/test_runtime_$fibers"
  on_arm64 "$out/test_runtime_$fibers"
done

echo "== shim, with the real runtime"
python3 "$root/tests/emu/write_conversion_refs.py" "$out"
shim=("${flags[@]}" -I"$root/metal" -DSHIM_TEST_WITH_RUNTIME)
"$cxx" "${shim[@]}" -DEMU_CHECKED=1 -c "$root/tests/emu/test_shim.cpp" -o "$out/test_shim_checked.o"
"$cxx" "${shim[@]}" -DEMU_CHECKED=0 "$root/tests/emu/test_shim.cpp" "$out/test_shim_checked.o" "${runtime[@]}" \
  -o "$out/test_shim"
on_arm64 "$out/test_shim" "$out"

echo "== the library (every kernel in its fast variant, at -O1) and its examples"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if ! cmake -S "$root" -B "$out/cmake" -DCMAKE_BUILD_TYPE=Release -DMTLINV_OPT=-O1 -DMTLINV_CHECKED_KERNELS=OFF \
       -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_C_COMPILER="$cc" \
       -DCMAKE_CXX_COMPILER="$cxx" "${generator[@]}" \
       > "$out/cmake.log" 2>&1 || ! cmake --build "$out/cmake" -j 2 >> "$out/cmake.log" 2>&1; then
  tail -n 60 "$out/cmake.log"
  exit 1
fi
for example in embed_example embed_example_c; do
  MTLINV_DEVICE=emu on_arm64 "$out/cmake/examples/programs/$example" | tee "$out/$example.txt"
  grep -q "has the bits of" "$out/$example.txt" && grep -q "bad input:" "$out/$example.txt" &&
    ! grep -q DIFFERS "$out/$example.txt" || { echo "== $example: unexpected output"; exit 1; }
done
echo "arm64 (under qemu): all passed"
