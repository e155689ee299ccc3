#!/bin/bash
# Two test runs side by side, at the same time, on the same machine: each from a
# fresh clone, with the xdist options of `make test` / `make test-all` (-n 2
# --dist loadfile), timed with /usr/bin/time -v (user + sys of every process)
# and with the per-test CPU log (KERASSEQ_TEST_CPU_LOG). Both runs see the same
# machine conditions, which single runs on a shared machine do not (they vary by
# about 15 %).
#   benchmarks/suite_paired.sh BEFORE_COMMIT AFTER_COMMIT [OUTPUT_DIR]
#       the whole suite (`make test-all`'s selection) of two commits
#   benchmarks/suite_paired.sh --tiers COMMIT [OUTPUT_DIR]
#       one commit: the whole suite (`make test-all`) beside `make test`'s
#       selection (-m "not slow") run again and again until the whole suite
#       ends, so that every fast run that ends before it saw the same load as
#       the whole suite did; prints each fast run's share of the whole suite's
#       CPU (a fast run that ended after it had the machine alone at its end,
#       and is marked as not comparable).
# Needs the repository's .venv and build/docs-assets (make install, make docs-assets).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
run() {  # $1 = name, $2 = commit, then extra pytest arguments
  local name=$1 commit=$2; shift 2
  local d=$out/paired-$name
  rm -rf "$d"; git clone -q "$repo" "$d"; cd "$d"; git checkout -q "$commit"
  ln -s "$repo/.venv" .venv; mkdir -p build && cp -r "$repo/build/docs-assets" build/
  git log --oneline -1 > commit.txt
  KERASSEQ_TEST_CPU_LOG=$d/cpu.tsv CI=true PYTHONPATH=$d TF_CPP_MIN_LOG_LEVEL=2 \
    /usr/bin/time -v -o time.txt .venv/bin/python -m pytest -n 2 --dist loadfile \
    --no-loadscope-reorder -p no:cacheprovider --durations=80 -rs "$@" tests > suite.log 2>&1 || true
}
cpu() {  # user + sys seconds of a time.txt
  awk -F': ' '/User time|System time/ {s += $2} END {printf "%.0f", s}' "$1"
}
if [ "${1:-}" = --tiers ]; then
  out=${3:-$HOME/kerasseq-runs}
  run all "$2" &
  whole=$!
  runs=0 comparable=""
  while kill -0 "$whole" 2>/dev/null; do
    runs=$((runs + 1))
    run "fast$runs" "$2" -m "not slow"
    if kill -0 "$whole" 2>/dev/null; then comparable="$comparable $runs"; fi
  done
  wait "$whole"
  all=$(cpu "$out/paired-all/time.txt")
  echo "make test-all: $all CPU-s, $(grep Elapsed "$out/paired-all/time.txt" | sed 's/.*: //') wall;" \
    "$(tail -n 1 "$out/paired-all/suite.log")"
  for i in $(seq "$runs"); do
    d=$out/paired-fast$i; fast=$(cpu "$d/time.txt")
    case " $comparable " in *" $i "*) note="";; *) note=" (ended after the whole suite: not comparable)";; esac
    awk -v f="$fast" -v a="$all" -v i="$i" -v n="$note" -v w="$(grep Elapsed "$d/time.txt" | sed 's/.*: //')" \
      'BEGIN {printf "make test, run %d: %d CPU-s, %s wall, %.1f %% of make test-all%s\n", i, f, w, 100 * f / a, n}'
    tail -n 1 "$d/suite.log"
  done
else
  out=${3:-$HOME/kerasseq-runs}
  run before "$1" &
  run after "$2" &
  wait
  grep -H -E "User time|System time|Elapsed" "$out"/paired-{before,after}/time.txt
fi
