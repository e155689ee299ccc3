import gc
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Child processes started by tests (exported-model servers, the MirroredStrategy
# script, the CLI) inherit this: NVIDIA's libraries then run float32 matmuls in
# full float32 there too (see the TensorFloat-32 note below).
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
# The tests check what XLA computes, not how fast its code runs: LLVM's
# optimisation passes are off (level 0) in this process and its children, which
# takes about a third off the XLA tests on a CPU (tests/models/test_xla_training.py:
# 214 -> 148 CPU-s) and leaves the compiled program's results as they were (the
# XLA-equals-eager tests pass at the same tolerances). A user's own XLA_FLAGS stay.
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))

# oneDNN's kernels (TensorFlow's default on x86 CPUs) are off in this process and
# its children: for the suite's many tiny models, whose shapes are new at each
# trace, TensorFlow's own Eigen kernels cost less CPU (tests/test_docs.py with
# tests/test_docs_long_pages.py: 172 -> 150-160 CPU-s; four model and layer files:
# 96-100 -> 90-92). The tests check kerasseq's arithmetic, which is the same with
# either kernel library at the suite's tolerances; the CLI test of TensorFlow's
# start-up lines runs with the default (oneDNN's line is one of them).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import kerasseq  # noqa: E402,F401  (checks the backend)

# TensorFloat-32 is on by default on Ampere and Hopper GPUs: float32 matmuls and
# convolutions then round their inputs to a 10-bit mantissa (about 1e-3 relative
# error), so comparisons at float32 tolerances (1e-5 against NumPy, XLA against
# eager) fail on a GPU (28 failures + 7 errors on an H100). The tests check float32
# arithmetic, so the suite runs in full float32. No effect on a CPU.
tf.config.experimental.enable_tensor_float_32_execution(False)

# Python's cyclic garbage collector walks every tracked object at each full
# collection, and TensorFlow, Keras and the graphs the tests trace make that
# millions of objects: it took 8 % of a test file's CPU. The objects alive after
# the imports are frozen (never collected, never walked) and the collections
# run less often (measured on tests/test_translator.py: GC 8.7 -> 4.3 CPU-s).
gc.collect()
gc.freeze()
gc.set_threshold(10_000, 20, 20)


@pytest.fixture(autouse=True)
def _seed_everything():
    # (A module-scoped fixture is set up before this one: one that draws random
    # weights seeds itself, or its weights depend on the tests run before it.)
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield


# Keras' global settings, each `(read, set)`. `make test` runs the files on two
# pytest-xdist workers in an order that depends on timing, so a setting one test
# leaves changed (e.g. the mixed_float16 policy, without try/finally) would
# change what the tests after it, in other files too, compute: every test must
# leave them as it found them. The fixture below restores them, and fails the
# test that did not.
_KERAS_SETTINGS = {
    "dtype policy": (lambda: keras.config.dtype_policy().name, keras.config.set_dtype_policy),
    "floatx": (keras.config.floatx, keras.config.set_floatx),
    "epsilon": (keras.config.epsilon, keras.config.set_epsilon),
    "image data format": (keras.config.image_data_format, keras.config.set_image_data_format),
    "interactive logging": (
        keras.config.is_interactive_logging_enabled,
        lambda on: (keras.config.enable_interactive_logging if on
                    else keras.config.disable_interactive_logging)()),
    "traceback filtering": (
        keras.config.is_traceback_filtering_enabled,
        lambda on: (keras.config.enable_traceback_filtering if on
                    else keras.config.disable_traceback_filtering)()),
}


@pytest.fixture(autouse=True)
def _keras_settings_restored():
    before = {name: read() for name, (read, _) in _KERAS_SETTINGS.items()}
    yield
    changed = []
    for name, (read, restore) in _KERAS_SETTINGS.items():
        if read() != before[name]:
            changed.append(f"{name} {before[name]!r} -> {read()!r}")
            restore(before[name])
    if changed:
        pytest.fail("the test left Keras' global settings changed (restored now; restore "
                    "them in the test, with try/finally): " + ", ".join(changed), pytrace=False)


# The files that take longest on 2 CPU cores (each over ~40 s; measured with
# --durations), slowest first. `make test` runs pytest-xdist with `--dist
# loadfile --no-loadscope-reorder`: files go to the workers in collection order,
# so these start first and the small files fill in around them (xdist's default
# order, most tests first, started them last and left one worker idle at the end).
SLOW_FIRST = (
    "tests/training/test_multi_worker.py",
    "tests/test_docs_long_pages.py",
    "tests/test_resume.py",
    "tests/training/test_distribute.py",
    "tests/test_examples.py",
    "tests/test_cli.py",
    "tests/test_examples_bible.py",
    "tests/test_export.py",
    "tests/training/test_multi_worker_faults.py",
    "tests/test_translator.py",
    "tests/models/test_ensemble.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable


def pytest_sessionfinish(session, exitstatus):
    # The zygotes of tests/processes.py end with the session (each pytest-xdist
    # worker has its own), and are waited for: their CPU time counts.
    from tests.processes import stop_zygotes

    stop_zygotes()


# KERASSEQ_TEST_CPU_LOG=FILE appends one line per test phase to FILE: the node id,
# the phase and the CPU seconds it took, the pytest process's own and those of the
# child processes it waited for (CLI runs, servers, workers). The suite's CPU time is
# what `make test` costs a newcomer; this says where it goes (README "Tests").
_CPU_LOG = os.environ.get("KERASSEQ_TEST_CPU_LOG")


def _cpu_seconds():
    import resource

    from tests.processes import FORKED_CPU_SECONDS

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The commands forked by tests/processes.py are the zygote's grandchildren:
    # their CPU time is reported to us as each one ends.
    return (own.ru_utime + own.ru_stime,
            children.ru_utime + children.ru_stime + FORKED_CPU_SECONDS[0])


if _CPU_LOG:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item):
        yield from _logged(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        yield from _logged(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item):
        yield from _logged(item, "teardown")

    def _logged(item, phase):
        own, children = _cpu_seconds()
        yield
        own_after, children_after = _cpu_seconds()
        with open(_CPU_LOG, "a") as log:
            log.write(f"{own_after - own:.2f}\t{children_after - children:.2f}\t{phase}\t{item.nodeid}\n")
