#!/usr/bin/env bash
# The whole CUDA check on a GPU machine, recorded in benchmarks/results/h200.md: build with MTLINV_CUDA=1, the
# test suite on the CUDA backend, compute-sanitizer memcheck and racecheck over every kernel family
# (tools/cuda_exercise.py), and benchmarks/bench_cuda.py. Each step has a time limit and a log in $OUT; the
# steps run in order of importance, so a cut-off run still returns the results that matter most.
#
#   OUT=/tmp/cuda-run bash benchmarks/cuda_session.sh [steps...]   (default: build tests bench memcheck racecheck)
set -u
OUT=${OUT:-$PWD/cuda-run}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MTLINV_DEVICE=cuda
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)

step() {  # name, seconds, command...: runs it with a limit, logs everything, prints the rc and the log's tail
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - start)) s"
  tail -n "${TAIL:-12}" "$OUT/$name.log"
  return $rc
}

run() {
  case $1 in
    build) step build 300 env MTLINV_CUDA=1 python3 setup.py build_ext --inplace &&
             python3 -c "import mtlinv; i = mtlinv.device_info(); assert i['backend'] == 'cuda', i; print(i)" ;;
    tests) step tests 240 python3 -m pytest -q -rs -p no:cacheprovider -n 8 --durations=5 tests ;;
    bench) step bench 240 python3 benchmarks/bench_cuda.py --out "$OUT/bench.json" ;;
    memcheck) step memcheck 150 "$SANITIZER" --tool memcheck --error-exitcode 9 python3 tools/cuda_exercise.py ;;
    racecheck) step racecheck 200 "$SANITIZER" --tool racecheck --racecheck-report all --error-exitcode 9 \
                 python3 tools/cuda_exercise.py ;;
  esac
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for s in "${@:-build tests bench memcheck racecheck}"; do
  for t in $s; do
    run "$t" || { [ "$t" = build ] && exit 1; }
  done
done
