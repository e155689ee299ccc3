#!/usr/bin/env bash
# The GPU checks, as one command for the lent GPU machine (see
# ../shared/gpu/README.md for how TensorFlow gets there: .gpu/c0 ... .gpu/c8 moved
# into /tmp/w one call each, then this script with .gpu/base carried).
#
#   bash benchmarks/gpu_checks.sh [SECONDS_FOR_TESTS]
#   GPU_BENCH=0 GPU_TESTS="tests/models tests/test_export.py" bash benchmarks/gpu_checks.sh 200
#
# A tensorflow-text wheel moved into /tmp/w as well (its own call: it is 57 MiB)
# is installed too; without it the WordPiece tests fail there.
#
# Order (one call of at most 8 minutes): the README user path and the training
# benchmark (benchmarks/fit_compiles.py --pipelines fixed: the README RNN and the
# demo Transformer, XLA / no XLA / cuDNN for the RNN, epoch 1 and epoch 2 seconds,
# compiles and compile seconds), the small decode-speed setting (its equality
# checks are the quickest correctness test of the XLA decoders on a GPU), the
# model, decoding, translator and export test files (GPU_TESTS; -n 12, every
# result printed as it comes, so a run cut by its time limit still says what
# passed), then the large decode-speed setting. Logs go to $OUT (the device
# tool's folder) or /tmp/gpu_out.
set -u
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"
test_seconds=${1:-150}
# shellcheck disable=SC1091
source .gpu/base/setup.sh
if ls /tmp/w/tensorflow_text-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site /tmp/w/tensorflow_text-*.whl
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import tensorflow as tf, keras; print("tf", tf.__version__, "keras", keras.__version__)' \
  | tee -a "$out/gpu.txt"

bench=${GPU_BENCH:-1}
if [ "$bench" = 1 ]; then
timeout 200 python3 benchmarks/fit_compiles.py --pipelines fixed 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee "$out/fit_compiles.log"
echo "fit_compiles: rc ${PIPESTATUS[0]}" | tee -a "$out/gpu.txt"
timeout 120 python3 benchmarks/decode_speed.py --quick 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" \
  | tee "$out/decode_quick.log"
echo "decode_speed --quick: rc ${PIPESTATUS[0]}" | tee -a "$out/gpu.txt"
fi

timeout "$test_seconds" python3 -m pytest -v -p no:cacheprovider -n 12 --timeout 150 \
  --ignore=tests/test_docs.py --ignore=tests/test_docs_browser.py \
  --ignore=tests/test_docs_figures.py --ignore=tests/test_docs_long_pages.py \
  --ignore=tests/test_docs_notebooks.py --ignore=tests/test_lint.py \
  --ignore=tests/test_examples_bible.py --ignore=tests/test_plot_model.py \
  ${GPU_TESTS:-tests/models tests/layers tests/decoding tests/test_translator.py tests/test_export.py} \
  > "$out/tests.log" 2>&1
echo "tests: rc $? ($(grep -c ' PASSED ' "$out/tests.log") passed," \
  "$(grep -c ' FAILED ' "$out/tests.log") failed, $(grep -c ' ERROR ' "$out/tests.log") errors," \
  "$(grep -c ' SKIPPED ' "$out/tests.log") skipped)" | tee -a "$out/gpu.txt"
grep " FAILED \| ERROR " "$out/tests.log" | head -40

[ "$bench" = 1 ] || exit 0
timeout 120 python3 benchmarks/decode_speed.py --layers 6 --d-model 512 --heads 8 \
  --dff 2048 --batch 256 --max-length 64 --repeats 3 2>&1 \
  | grep -v "^WARNING\|^I0000\|^W0000" | tee "$out/decode_large.log"
echo "decode_speed large: rc ${PIPESTATUS[0]}" | tee -a "$out/gpu.txt"
