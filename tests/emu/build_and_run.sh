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

declare -A modes=(
  [fast]=""
  [asan]="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  [portable]="-DEMU_PORTABLE_FIBERS=1"
)
status=0
for mode in fast asan portable; do
  echo "== $mode"
  # shellcheck disable=SC2086
  "$CXX" "${common[@]}" ${modes[$mode]} "${srcs[@]}" -o "$out/test_runtime_$mode"
  if ! "$out/test_runtime_$mode"; then
    echo "== $mode FAILED"
    status=1
  fi
done
exit $status
