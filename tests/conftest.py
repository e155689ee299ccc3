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


@pytest.fixture(scope="session", autouse=True)
def _shared_directory(tmp_path_factory):
    """Tells tests/models/g2p_fixture.py where to keep the weights it trains
    once per session: the pytest-xdist workers' common temporary folder."""
    from tests.models import g2p_fixture

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # pytest-of-USER/pytest-N, above each worker's popen-gwN
    g2p_fixture.SHARED_DIRECTORY = str(root / "shared")
    yield
    g2p_fixture.SHARED_DIRECTORY = None


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
    # the longest files of `make test` (CPU seconds, KERASSEQ_TEST_CPU_LOG)
    "tests/models/test_transformer_seq2seq.py",
    "tests/decoding/test_no_repeat_ngram.py",
    "tests/models/test_base.py",
    "tests/models/test_rnn_seq2seq.py",
    "tests/decoding/test_banned_ids.py",
    "tests/layers/test_keras_harness.py",
    "tests/test_ctranslate2.py",
    "tests/models/test_translation.py",
    "tests/training/test_trainer.py",
    "tests/training/test_averaging.py",
    "tests/data/test_pipeline.py",
    "tests/data/test_wordpiece_tokenizer.py",
    "tests/models/test_training_state.py",
    "tests/test_tflite.py",
    "tests/models/test_rnn_cudnn.py",
    "tests/test_legacy_fixtures.py",
    "tests/layers/test_lstm_encoder.py",
)


# Repetitions moved out of `make test` into `make test-all` (the `slow` marker's
# rule, pyproject.toml): each checks again, through another door, on another
# model or with more cases, a behaviour that a test left in `make test` checks
# against its reference (named in the comment). Listed here, one place, rather
# than spread as decorators: a node id without "[...]" covers every parameter.
SLOW_REPETITIONS = (
    # keras-hub's harness repeats Keras' run_layer_test (test_keras_run_layer_test)
    "tests/layers/test_keras_harness.py::test_keras_hub_harness",
    # the bans on the Transformer and the ensemble: the RNN's cases, and the toy
    # searches against brute force (test_exhaustive_banned_beam_...), stay
    *(f"tests/decoding/test_banned_ids.py::test_no_search_generates_pad_or_start_and_lengths_"
      f"count_the_text[{method}-{kind}]" for method in ("greedy", "beam", "sample")
      for kind in ("transformer", "ensemble")),
    "tests/decoding/test_banned_ids.py::test_no_repeat_ngram_size_holds_for_the_text",
    # the export and CLI doors of a setting: test_export_checks_each_thing_once_and_takes_
    # every_setting and test_cli's search-flag tests carry every field
    "tests/decoding/test_banned_ids.py::test_export_and_command_line_carry_ban_unk",
    "tests/decoding/test_no_repeat_ngram.py::test_export_and_command_line_carry_the_guard",
    "tests/decoding/test_no_repeat_ngram.py::test_beam_and_sampling_through_generate",
    "tests/decoding/test_no_repeat_ngram.py::test_small_beams_keep_each_hypothesis_history",
    "tests/decoding/test_no_repeat_ngram.py::test_greedy_through_generate_and_translate_"
    "matches_the_contract_reference[ensemble]",
    # CTranslate2 on a trained model: test_every_variant_scores_and_decodes_as_kerasseq
    # compares tokens and per-token log-probabilities on every variant
    "tests/test_ctranslate2.py::test_trained_model_greedy_and_beam_identical",
    "tests/test_ctranslate2.py::test_defaults_are_kerasseqs_beam_4",
    "tests/test_ctranslate2.py::test_blank_and_unknown_texts",
    "tests/test_ctranslate2.py::test_long_sources_are_cut_to_the_position_table",
    "tests/test_ctranslate2.py::test_int8_export_stores_each_matrix_as_int8_rows_with_a_scale",
    "tests/test_ctranslate2.py::test_settings_without_a_ctranslate2_equivalent_are_refused",
    "tests/test_ctranslate2.py::test_cli_exports_and_translates_a_ctranslate2_directory",
    "tests/test_ctranslate2.py::test_export_replaces_only_a_ctranslate2_export_or_an_empty_"
    "directory",
    # the same check on the other model: the RNN's / the other parameter stays
    "tests/models/test_base.py::test_fit_and_evaluate_name_ids_beyond_the_vocabulary[transformer]",
    "tests/models/test_xla_training.py::test_one_xla_step_on_numpy_inputs_equals_one_step_"
    "without_xla[transformer]",
    "tests/models/test_transformer_seq2seq.py::test_beam_search_with_shared_cross_caches_"
    "equals_tiled[penalties1]",
    "tests/test_tflite.py::test_rnn_converts_and_greedy_equals_keras",
    "tests/models/test_rnn_seq2seq.py::test_overfits_thirty_words",
    # the session-based loader of TF Serving: test_export's other signature tests load
    # with tf.saved_model.load; the CLI door of an export: test_cli_export_and_translate_
    # with_the_saved_model (test_export.py)
    "tests/test_export.py::test_saved_model_cli_lists_the_string_signatures",
    # the recorded search: test_export_checks_each_thing_once_and_takes_every_setting
    # reads every field of its export's metadata (resolved num_beams and source limit)
    # and test_export_defaults_and_rule the resolution of num_return and the limit
    "tests/test_export.py::test_metadata_records_the_search",
    # padded batches of a plain Transformer: the guided Transformer's case (the same
    # loss plus the guided term, its links padded too) and the RNN's stay
    "tests/data/test_pipeline.py::test_padded_batches_have_the_unpadded_loss_and_gradients"
    "[transformer]",
    "tests/test_cli.py::test_export_alignments_serves_the_links_of_translate",
    "tests/test_cli.py::test_export_then_translate_equals_translate_with_the_same_beam",
    # --batch-tokens through the CLI: TrainingRun.datasets' test against make_dataset
    # (tests/training/test_run.py) stays
    "tests/test_cli.py::test_train_batch_tokens_reaches_the_training_batches",
    # KeepLastCheckpoints through the CLI: test_averaging.py's library tests stay
    "tests/test_cli_averaging_and_ensembles.py::test_train_keeps_the_last_epoch_checkpoints",
    # bucket counts: test_compiled_shapes_stay_bounded stays
    "tests/test_translator.py::test_geometric_buckets_compile_fewer_shapes_same_translations",
    # every door's refusal: SearchConfig's own test (tests/decoding) and the CLI's stay
    "tests/test_translator.py::test_num_return_is_refused_by_every_door_outside_beam_search",
    # ensembles of trained models: the decode step against the members' mean
    # (test_first_step_log_probs_..., test_decode_step_equals_...) stays
    "tests/models/test_ensemble.py::test_beam_search_on_an_ensemble_of_two_trained_models",
    "tests/models/test_ensemble.py::test_copies_of_one_model_share_a_name_and_equal_the_model",
    # averaging through the CLI and a run directory: average_checkpoints' own test stays
    "tests/test_cli_averaging_and_ensembles.py::test_average_a_run_directory",
    "tests/training/test_averaging.py::test_training_run_keeps_epoch_checkpoints_and_clear_"
    "removes_them",
    # int8 TFLite decoding: the float32 conversion's greedy-equals-Keras test stays
    "tests/test_tflite.py::test_dynamic_range_quantization_decodes",
    # invalid UTF-8 through a .keras run and an export: the replacement rule's
    # unit test (tests/models/test_translation.py) stays
    "tests/test_cli.py::test_invalid_utf8_on_stdin_becomes_u_fffd_as_in_an_export",
    # the trainer's extras: test_fit_equals_keras_fit_with_validation_and_callbacks stays
    "tests/training/test_trainer.py::test_scheduled_sampling_and_a_schedule_follow_the_trainer",
    "tests/models/test_training_state.py::test_distributed_trainer_traces_the_step_once",
    "tests/test_processes.py::test_stop_kills_a_command_that_outlives_the_timeout",
    # the other model or parameter of a check that stays
    "tests/data/test_pipeline.py::test_fit_on_make_dataset_warns_nothing[False-auto]",
    "tests/models/test_rnn_cudnn.py::test_searches_never_trace_cudnn[False]",
    "tests/models/test_base.py::test_clone_model_keeps_the_class_the_tokenizers_and_the_"
    "contract[transformer]",
    "tests/models/test_base.py::test_beam_search_is_traced_once_across_batch_sizes_and_source_"
    "lengths[transformer]",
    # the guided term inside a training step: its value against the old numbers
    # (tests/training/test_losses.py) stays
    "tests/test_guided_alignment.py::test_one_step_loss_is_cross_entropy_plus_weighted_"
    "alignment_loss",
    "tests/training/test_trainer.py::test_dataset_function_and_early_stopping",
    # a fresh process: test_import_kerasseq_registers_every_serializable_class stays
    "tests/test_import.py::test_conventional_load_model_in_a_fresh_process",
    "tests/training/test_multi_worker.py::test_cli_multi_worker_without_tf_config_is_one_line",
    # the RNN's TFLite file (int8 and its refusals): the Transformer's stays
    "tests/test_tflite.py::test_bad_input_is_refused",
    # round trips that the model tests repeat: save/load of a WordPiece model, the
    # LSTM encoder's check_layer (Keras' harness on LSTMEncoder stays)
    "tests/data/test_wordpiece_tokenizer.py::test_keras_file_round_trip_inside_a_model",
    "tests/layers/test_lstm_encoder.py::test_layer_contract",
    # XLA on a decoder block's step: the model's XLA greedy test stays
    "tests/layers/test_transformer_decoder_block.py::test_call_step_compiles_with_xla_and_a_"
    "tensor_step_index",
    # the demo command (make demo, CI's test-all) and TFDS through the CLI:
    # test_train_writes_model_history_and_summary stays
    "tests/test_cli.py::test_demo_smoke",
    "tests/test_cli.py::test_tfds_dataset_offline_with_mock_data",
    # the source limit in both paths: test_transformer_position_table_is_one_rule_in_
    # both_paths stays; an export replacing another: tests/test_files.py's atomic
    # replacement and test_export's overwrite refusals stay
    "tests/test_translator.py::test_one_source_limit_for_the_eager_and_the_graph_path",
    "tests/test_export.py::test_export_replaces_an_empty_directory_and_an_earlier_export",
)


def _is_slow_repetition(nodeid):
    return nodeid in SLOW_REPETITIONS or nodeid.split("[")[0] in SLOW_REPETITIONS


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_slow_repetition(item.nodeid):
            item.add_marker(pytest.mark.slow)
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
