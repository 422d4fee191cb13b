#!/usr/bin/env bash
# The whole CUDA check on a GPU machine, recorded in docs/results.md: build with MTLINV_CUDA=1, the
# test suite on the CUDA backend, compute-sanitizer memcheck and racecheck over every kernel family
# (tools/cuda_exercise.py), benchmarks/cuda/bench_cuda.py, benchmarks/bench_decode_step.py (float32 scales, then
# bfloat16 scales into $OUT/bf16_scales), the goal table of those three records (benchmarks/goals.py, $OUT/goals.log)
# and benchmarks/bench_gguf_formats.py (which needs the gguf package). Each step has a time limit and a log in $OUT;
# the steps run in order of importance, so a cut-off run still returns the results that matter most. The emulator's
# kernels, built beside the CUDA ones, only stand by there: they are compiled at -O1 (MTLINV_EMU_OPT), because at
# -O3 the build ran past 240 s on that machine once qgemv had 88 instances. Copy prebuilt CUDA objects into
# build/gen (tools/build_cuda.py) to skip nvcc. LIMIT_<step>=seconds overrides a step's limit.
#
#   OUT=/tmp/cuda-run bash benchmarks/cuda/cuda_check.sh [steps...]
#       steps: build tests bench decode decode_bf16 goals gguf memcheck racecheck (the default: these, in that order),
#       and ablation: what each kind of kernel costs inside the 8B step's graphs (step_ablation.py)
set -u
case ${1:-} in -h|--help) sed -n '2,/^set -u$/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
OUT=${OUT:-$PWD/cuda-run}
mkdir -p "$OUT"
# The build is in place (setup.py build_ext --inplace): scripts under benchmarks/ and tools/ import mtlinv from here.
export PYTHONUNBUFFERED=1 MTLINV_DEVICE=cuda PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)

step() {  # name, seconds, command...: runs it with a limit (LIMIT_<name> overrides), logs it, prints its tail
  local name=$1 limit=$2 start=$SECONDS rc over="LIMIT_$1"
  limit=${!over:-$limit}
  shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - start)) s"
  tail -n "${TAIL:-12}" "$OUT/$name.log"
  return $rc
}

run() {
  case $1 in
    build) step build 330 env MTLINV_CUDA=1 MTLINV_EMU_OPT=${MTLINV_EMU_OPT:--O1} \
             python3 setup.py build_ext --inplace --force &&
             { ldd mtlinv/_native*.so | grep -E "stdc|cuda"; \
               python3 -X faulthandler -c \
                 "import mtlinv; i = mtlinv.device_info(); assert i['backend'] == 'cuda', i; print(i)"; } ;;
    # No registry there: PIP_NO_INDEX makes the model fixture's fetch fail at once (its tests skip). JAX would
    # reserve most of the GPU's memory in each of the 8 workers (out of memory at collection): it allocates on use.
    tests) step tests 180 env PIP_NO_INDEX=1 XLA_PYTHON_CLIENT_PREALLOCATE=false \
             python3 -m pytest -q -rs -p no:cacheprovider --durations=5 -m "not slow" \
             $(python3 -c "import xdist" 2>/dev/null && echo "-n 8") tests ;;
    bench) step bench 200 python3 benchmarks/cuda/bench_cuda.py --out "$OUT" ${BENCH_ARGS:-} ;;
    decode) step decode 200 python3 benchmarks/bench_decode_step.py --out "$OUT" ${DECODE_ARGS:-} ;;
    decode_bf16) step decode_bf16 100 python3 benchmarks/bench_decode_step.py --scales bfloat16 --no-torch --tokens 0 \
                   --out "$OUT/bf16_scales" ;;
    goals) step goals 30 python3 benchmarks/goals.py "$OUT/bench_cuda.json" "$OUT/bench_decode_step.json" \
             "$OUT/bf16_scales/bench_decode_step.json" ;;
    gguf) step gguf 150 python3 benchmarks/bench_gguf_formats.py --out "$OUT" ${GGUF_ARGS:-} ;;
    # Not in the default list: a second build (a copy of the tree that drops kernels by name, up to 330 s as the
    # build step), then 8 steps of about 15 s.
    ablation) step ablation 480 python3 benchmarks/profiling/step_ablation.py --scales bfloat16 --out "$OUT/ablation" ;;
    memcheck) step memcheck 80 "$SANITIZER" --tool memcheck --error-exitcode 9 python3 tools/cuda_exercise.py ;;
    racecheck) step racecheck 100 "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 \
                 python3 tools/cuda_exercise.py ;;
  esac
}

# The CUDA image's Python builds extensions with /opt/gcc/bin/g++, which linked libstdc++ statically into
# _native.so (seen 2026-11-29): the first `std::ostringstream << int` then crashed inside that copy (a facet of the
# wrong type, as its locale data bound to another copy). Build with the system compiler and the shared libstdc++.
if [ -x /usr/bin/g++ ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared"
fi
echo "compiler: ${CXX:-the default of this Python}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for s in "${@:-build tests bench decode decode_bf16 goals gguf memcheck racecheck}"; do
  for t in $s; do
    run "$t" || { [ "$t" = build ] && exit 1; }
  done
done
