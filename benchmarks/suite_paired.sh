#!/bin/bash
# The test suite of two commits side by side, at the same time, on the same machine:
# each from a fresh clone, as `make test` runs it (-n 2 --dist loadfile), timed with
# /usr/bin/time -v (user + sys of every process) and with the per-test CPU log.
# Both runs see the same machine conditions, which single runs on a shared
# machine do not (they vary by about 15 %).
#   usage: benchmarks/suite_paired.sh BEFORE_COMMIT AFTER_COMMIT [OUTPUT_DIR]
# Needs the repository's .venv and build/docs-assets (make install, make docs-assets).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-$HOME/kerasseq-runs}
run() {  # $1 = name, $2 = commit
  local d=$out/paired-$1
  rm -rf "$d"; git clone -q "$repo" "$d"; cd "$d"; git checkout -q "$2"
  ln -s "$repo/.venv" .venv; mkdir -p build && cp -r "$repo/build/docs-assets" build/
  git log --oneline -1 > commit.txt
  KERASSEQ_TEST_CPU_LOG=$d/cpu.tsv CI=true PYTHONPATH=$d TF_CPP_MIN_LOG_LEVEL=2 \
    /usr/bin/time -v -o time.txt .venv/bin/python -m pytest -n 2 --dist loadfile \
    --no-loadscope-reorder -p no:cacheprovider --durations=80 -rs tests > suite.log 2>&1 || true
}
run before "$1" &
run after "$2" &
wait
grep -H -E "User time|System time|Elapsed" "$out"/paired-*/time.txt
