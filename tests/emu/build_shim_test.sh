#!/usr/bin/env bash
# Builds and runs tests/emu/test_shim.cpp with every compiler found (g++, clang++), each with the software
# half conversions and with F16C/FMA, and compiles every metal/*.metal kernel through tools/msl2cpp.py with each
# compiler in both builds (checked with the software conversions, fast with F16C/FMA) with the same
# warnings-as-errors flags the emulator uses.
#
# Links the real runtime (src/emu/*.cpp, *.S) when src/emu/runtime.cpp exists; otherwise the test brings a
# one-lane stand-in. Usage: tests/emu/build_shim_test.sh [OUT_DIR]   (default build/shim_test)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/shim_test}"
mkdir -p "$out"
flags=(-std=c++17 -O2 -Wall -Wextra -Werror -ffp-contract=off)

compilers=(g++)
for c in clang++ clang++-{30..14}; do
  if command -v "$c" >/dev/null; then compilers+=("$c"); break; fi
done

# Reference conversions: numpy's float32 -> float16 and ml_dtypes' float32 -> bfloat16 (both are test dependencies).
python3 "$root/tests/emu/write_conversion_refs.py" "$out"

runtime_srcs=()
runtime_flag=()
if [[ -f "$root/src/emu/runtime.cpp" ]]; then
  # The runtime alone (backend_emu.cpp belongs to the library and needs the core).
  runtime_srcs=("$root"/src/emu/{fiber,scheduler,thread_pool,runtime,registry}.cpp)
  shopt -s nullglob
  runtime_srcs+=("$root"/src/emu/*.S)
  shopt -u nullglob
  runtime_flag=(-DSHIM_TEST_WITH_RUNTIME)
fi

gen="$out/gen"
python3 "$root/tools/msl2cpp.py" --target emu --out "$gen" "$root"/metal/*.metal "$root"/metal/*.h

for cxx in "${compilers[@]}"; do
  for isa in soft f16c; do
    isa_flags=()
    [[ $isa == f16c ]] && isa_flags=(-mf16c -mfma)
    tag="$(basename "$cxx")-$isa"
    inc=(-I"$root/src/emu" -I"$root/metal")
    echo "== $tag"
    "$cxx" "${flags[@]}" "${isa_flags[@]}" "${inc[@]}" "${runtime_flag[@]}" -DEMU_CHECKED=1 \
      -c "$root/tests/emu/test_shim.cpp" -o "$out/test_shim_checked-$tag.o"
    "$cxx" "${flags[@]}" "${isa_flags[@]}" "${inc[@]}" "${runtime_flag[@]}" -DEMU_CHECKED=0 \
      "$root/tests/emu/test_shim.cpp" "$out/test_shim_checked-$tag.o" "${runtime_srcs[@]}" -pthread \
      -o "$out/test_shim-$tag"
    "$out/test_shim-$tag" "$out"
    # The kernels, each build with one compiler: g++ the checked build with the software conversions, clang the fast
    # one with F16C/FMA, every file at once on all cores (with one compiler, g++ both). Every build with every
    # compiler would double the longest step of CI for what test_shim.cpp above already compiles each way; the
    # extension's own build compiles both builds with g++ again (-Wall), and tests/compile/test_macos_build.py
    # with Apple's clang.
    checked=$([[ $isa == soft ]] && echo 1 || echo 0)
    gxx=$([[ $cxx == g++ ]] && echo 1 || echo 0)
    if [[ ${#compilers[@]} -gt 1 && $gxx != "$checked" ]]; then
      continue
    fi
    # -O1 still runs the flow analyses behind -Wmaybe-uninitialized and the like, in less time than -O2.
    printf '%s\n' "$gen"/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
      "$cxx ${flags[*]} -O1 ${isa_flags[*]} -I$root/src/emu -I$gen -DEMU_CHECKED=$checked -c {} -o $out/kernel-\$(basename {}).o"
    echo "   metal/*.metal compile in the $([[ $checked == 1 ]] && echo checked || echo fast) build"
  done
done
echo "shim tests passed"
