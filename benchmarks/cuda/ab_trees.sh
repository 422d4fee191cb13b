#!/usr/bin/env bash
# A/B of whole trees on one GPU machine: other commits built beside this checkout, then one benchmark run in each
# tree in turn, several rounds, so that the machine's drift falls on every tree alike (a host's time to issue a
# step changed by tens of percent between processes on one machine). Use it for changes judged by a decoder step:
# kernel-by-kernel times (Nsight Compute) do not predict a step's span in its CUDA graphs, where programmatic
# dependent launch hides small kernels (docs/decisions.md, "Decoder step: fused ops").
#
#   bash benchmarks/cuda/ab_trees.sh prepare NAME COMMIT        # here: COMMIT's files into build/ab_NAME, to copy
#   OUT=$OUT bash benchmarks/cuda/ab_trees.sh build NAME...       # there: this tree and each build/ab_NAME, in parallel
#   OUT=$OUT bash benchmarks/cuda/ab_trees.sh run NAME... -- COMMAND...
#                                                          # there: COMMAND in this tree ("head") and in each
#                                                          # build/ab_NAME, in turn, ROUNDS times (default 3)
#
# build/ is ignored by git, so a prepared tree reaches the GPU machine only if copied there explicitly: copy it
# with the command that builds it and not after, since a copied path replaces the built tree there. run first
# checks that each tree imports its own build (with $PYTHON, default python3), then writes each output to
# $OUT/<tree>_<round>.txt and prints the lines matching FILTER (an extended regex), or the last TAIL lines
# (default 4); MTLINV_DEVICE is cuda unless set. Example, a commit against HEAD on the decoder's step:
#   FILTER='^ +[15] +decoder' OUT=$OUT bash benchmarks/cuda/ab_trees.sh run old -- \
#     python3 benchmarks/profile_decode.py --reps 30 --model ~/.cache/mtlinv/SmolLM2-135M-Instruct.Q4_1.gguf
set -u
HERE=$(cd "$(dirname "$0")" && pwd)  # this checkout's benchmarks/cuda: its cuda_check.sh builds every tree

usage() {
  sed -n '8,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

tree_dir() {  # the directory of a tree name: "head" is this checkout
  if [ "$1" = head ]; then echo "$PWD"; else echo "$PWD/build/ab_$1"; fi
}

in_tree() {  # NAME COMMAND...: COMMAND in tree NAME's folder, importing that tree's mtlinv first
  local dir
  dir=$(tree_dir "$1")
  shift
  (cd "$dir" && PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}" "$@")
}

check_names() {  # names of prepared trees: letters, digits, _ and -, and never "head" (prepare empties the folder)
  for name in "$@"; do
    if [[ ! $name =~ ^[A-Za-z0-9_-]+$ ]] || [ "$name" = head ]; then
      echo "ab_trees: a tree name is letters, digits, _ and -, and not head; got '$name'" >&2
      exit 2
    fi
  done
}

case ${1:-} in -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 1 ] || usage
command=$1
shift
case $command in
  prepare)
    [ $# -eq 2 ] || usage
    name=$1 commit=$2
    check_names "$name"
    git rev-parse --verify --quiet "$commit^{commit}" > /dev/null || { echo "ab_trees: no commit $commit" >&2; exit 1; }
    dir=$(tree_dir "$name")
    rm -rf "$dir" && mkdir -p "$dir" && git archive "$commit" | tar -x -C "$dir" || exit 1
    echo "build/ab_$name: $(git rev-parse --short "$commit"), $(du -sh "$dir" | cut -f1); copy it to the GPU machine"
    ;;
  build)
    [ $# -ge 1 ] || usage
    : "${OUT:?set OUT to a folder for the logs}"
    mkdir -p "$OUT"
    check_names "$@"
    for name in "$@"; do
      [ -d "$(tree_dir "$name")" ] || { echo "ab_trees: no tree build/ab_$name (prepare it)" >&2; exit 1; }
    done
    trees=(head "$@")
    pids=()
    for name in "${trees[@]}"; do
      (cd "$(tree_dir "$name")" && OUT="$OUT/build_$name" bash "$HERE/cuda_check.sh" build \
        > "$OUT/build_$name.txt" 2>&1) &
      pids+=($!)
    done
    failed=0
    for i in "${!trees[@]}"; do
      if ! wait "${pids[$i]}"; then
        failed=1
        echo "ab_trees: the build of ${trees[$i]} failed (its log: $OUT/build_${trees[$i]}.txt)" >&2
      fi
    done
    tail -n 2 "$OUT"/build_*.txt
    exit $failed
    ;;
  run)
    names=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("$1"); shift; done
    [ $# -ge 2 ] || usage
    shift
    check_names "${names[@]}"
    : "${OUT:?set OUT to a folder for the outputs}"
    mkdir -p "$OUT"
    export MTLINV_DEVICE=${MTLINV_DEVICE:-cuda}
    for name in head "${names[@]}"; do  # each tree must import its own build (an editable install elsewhere wins)
      in_tree "$name" "${PYTHON:-python3}" -c \
        "import sys, mtlinv._native as n; sys.exit(0 if n.__file__.startswith(sys.argv[1] + '/') else n.__file__)" \
        "$(tree_dir "$name")" ||
        { echo "ab_trees: $name does not import its own mtlinv._native (not built? installed elsewhere?)" >&2; exit 1; }
    done
    failed=0
    for round in $(seq "${ROUNDS:-3}"); do
      for name in head "${names[@]}"; do
        log="$OUT/${name}_$round.txt"
        in_tree "$name" "$@" > "$log" 2>&1
        rc=$?
        [ $rc = 0 ] || failed=1
        echo "== $name, round $round: rc=$rc"
        if [ -n "${FILTER:-}" ]; then grep -E "$FILTER" "$log"; else tail -n "${TAIL:-4}" "$log"; fi
      done
    done
    exit $failed  # 1 if any run failed: its numbers are missing from the comparison
    ;;
  *) usage ;;
esac
