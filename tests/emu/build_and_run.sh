#!/usr/bin/env bash
# Builds tests/emu/test_runtime.cpp against the emulator runtime three ways and runs each:
# assembly fibers, ASan+UBSan, and the portable ucontext fibers. Usage: tests/emu/build_and_run.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/emu-tests}"
mkdir -p "$out"
CXX="${CXX:-g++}"
srcs=("$root"/src/emu/{fiber,scheduler,thread_pool,runtime,registry}.cpp "$root/tests/emu/test_runtime.cpp")
common=(-std=c++17 -O2 -ffp-contract=off -Wall -Wextra -Werror -pthread -I"$root/src/emu")

# One mode at a time (no associative arrays: macOS's bash is 3.2). On an Apple-silicon Mac this runs the Mach-O
# arm64 fiber switch natively.
mode_flags() {
  case $1 in
    fast) ;;
    asan) echo "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" ;;
    portable) echo "-DEMU_PORTABLE_FIBERS=1" ;;
  esac
}
status=0
for mode in fast asan portable; do
  echo "== $mode"
  # shellcheck disable=SC2046
  "$CXX" "${common[@]}" $(mode_flags $mode) "${srcs[@]}" -o "$out/test_runtime_$mode"
  if ! "$out/test_runtime_$mode"; then
    echo "== $mode FAILED"
    status=1
  fi
done
exit $status
