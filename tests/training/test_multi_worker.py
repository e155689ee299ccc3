"""Multi-worker training: two local worker processes (CPU) under MultiWorkerMirroredStrategy.

* one step on two workers (uneven shards, gradient clipping active) equals one
  single-process step on the same global batch, and both workers end with the
  same weights;
* `kerasseq train --strategy multi_worker`: only the chief writes the run's
  files; `kill -9` of a worker, then the same command on every worker,
  resumes at the last finished epoch with no epoch lost or repeated;
* `TF_CONFIG` errors are one clear line.

Each worker is a fresh process (a strategy must be created before TensorFlow
runs anything); the ports come from `local_tf_configs`.

Nothing here may pass or fail by the machine's load (issue 44): every wait
for a process is a deadline of minutes (PROCESS_DEADLINE) that a healthy run
never comes near, and a worker is killed at a known batch because it stopped
itself there (`--stop-after-batch`), not because the test was quick enough
to kill it during a sleep.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from kerasseq.training.distribute import (
    ClusterConfigError,
    local_tf_configs,
    read_tf_config,
)
from tests.processes import popen

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow",
       "NVIDIA_TF32_OVERRIDE": "0", "CUDA_VISIBLE_DEVICES": ""}
KERASSEQ = [sys.executable, "-m", "kerasseq_cli"]  # the console script's main
# Seconds any one worker process (or the test's wait for one of its lines) may
# take. A deadline, not an expected time: the processes take 10 s to 3 min
# (the two-worker step: 130-170 s on two busy cores); 20 minutes only end a
# run that hangs, while the 120-480 s limits they had can be reached under
# load (240 s was, under a profiler: 505e9bf) and fail a test with nothing wrong.
PROCESS_DEADLINE = 1200

STEP_SCRIPT = r'''
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf.config.experimental.enable_tensor_float_32_execution(False)
import keras  # noqa: E402

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402
from kerasseq.training.distribute import get_strategy  # noqa: E402
from kerasseq.training.trainer import DistributedTrainer  # noqa: E402

mode = sys.argv[1]  # "workers" (TF_CONFIG set) or "single"
# Worker 0 gets rows 0-1 (7 real target tokens), worker 1 rows 2-3 (2 tokens).
source = np.array([[5, 6, 7, 8, 9], [6, 7, 8, 9, 0], [5, 6, 0, 0, 0], [7, 0, 0, 0, 0]], "int32")
target_in = np.array([[2, 5, 6, 7], [2, 8, 9, 0], [2, 0, 0, 0], [2, 0, 0, 0]], "int32")
target_out = np.array([[5, 6, 7, 3], [8, 9, 3, 0], [3, 0, 0, 0], [3, 0, 0, 0]], "int32")
OPTIMIZERS = {"clipnorm": lambda: keras.optimizers.SGD(0.5, clipnorm=0.05),
              "global_clipnorm": lambda: keras.optimizers.SGD(0.5, global_clipnorm=0.05),
              "none": lambda: keras.optimizers.SGD(0.5),
              "transformer": lambda: keras.optimizers.SGD(0.5, clipnorm=0.05),
              "uneven": lambda: keras.optimizers.SGD(0.5, clipnorm=0.05),
              # mixed_float16: Keras wraps the optimizer in a LossScaleOptimizer
              "mixed": lambda: keras.optimizers.SGD(0.5, clipnorm=0.05),
              # label smoothing 0.1 in the loss (no clipping: Keras' fit is the reference)
              "smoothing": lambda: keras.optimizers.SGD(0.5)}

strategy = get_strategy("multi_worker" if mode == "workers" else "default")


def build(name):
    keras.mixed_precision.set_global_policy("mixed_float16" if name == "mixed" else "float32")
    with strategy.scope():
        keras.utils.set_random_seed(0)
        if name == "transformer":
            model = build_transformer_seq2seq(12, 12, num_layers=1, d_model=8, num_heads=2, dff=16,
                                              dropout=0.0, max_positions=8)
        else:
            model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8, attention="bahdanau")
        smoothing = 0.1 if name == "smoothing" else 0.0
        model.compile(optimizer=OPTIMIZERS[name](),
                      loss=MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing),
                      metrics=[MaskedTokenAccuracy()])
    keras.mixed_precision.set_global_policy("float32")
    if name == "mixed":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer), model.optimizer
    return model


def shard(input_context):
    rows = slice(0, 2) if input_context.input_pipeline_id == 0 else slice(2, 4)
    return tf.data.Dataset.from_tensor_slices(
        ((source[rows], target_in[rows]), target_out[rows])).batch(2)


def uneven_shard(input_context):
    """Worker 0: one batch (rows 0-1); worker 1: three batches (rows 2, 3, 0)."""
    if input_context.input_pipeline_id == 0:
        rows = [0, 1]
        batch = 2
    else:
        rows = [2, 3, 0]
        batch = 1
    return tf.data.Dataset.from_tensor_slices(
        ((source[rows], target_in[rows]), target_out[rows])).batch(batch)


def uneven_global_batches():
    """The global batches of `uneven_shard`: rows 0-2, then 3, then 0 (worker 0 has run out)."""
    return tf.data.Dataset.from_generator(
        lambda: (((source[r], target_in[r]), target_out[r]) for r in ([0, 1, 2], [3], [0])),
        output_signature=((tf.TensorSpec([None, 5], "int32"), tf.TensorSpec([None, 4], "int32")),
                          tf.TensorSpec([None, 4], "int32"))).apply(
        tf.data.experimental.assert_cardinality(3))


def whole():
    return tf.data.Dataset.from_tensor_slices(((source, target_in), target_out)).batch(4)


def naive_clipped_step(model):
    """What clipping each replica's gradient before the all-reduce would give (Keras' default)."""
    loss_fn = MaskedSparseCategoricalCrossentropy()
    total = float(np.sum(target_out != 0))
    grads = None
    for rows in (slice(0, 2), slice(2, 4)):
        with tf.GradientTape() as tape:
            logits = model([source[rows], target_in[rows]], training=True)
            # this replica's share of the global token mean
            loss = loss_fn(target_out[rows], logits) * float(np.sum(target_out[rows] != 0)) / total
        g = [tf.clip_by_norm(tf.convert_to_tensor(x), 0.05)
             for x in tape.gradient(loss, model.trainable_weights)]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    for variable, gradient in zip(model.trainable_weights, grads):
        variable.assign_sub(0.5 * gradient)


def reference_step(model, clip):
    """The one-device SGD step with the norms of the *dense* gradient (TensorFlow's clipping).

    Keras' own clipping takes the norm of an embedding's IndexedSlices rows,
    counting a token that occurs twice in the batch as two rows (global norm
    0.52673 instead of 0.52662 for the RNN here; the Transformer's embedding
    gradient is such a slice too), so it is not the reference for "the norm of
    the global gradient".
    """
    with tf.GradientTape() as tape:
        loss = MaskedSparseCategoricalCrossentropy()(target_out, model([source, target_in],
                                                                       training=True))
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_weights)]
    if clip == "global":
        grads, _ = tf.clip_by_global_norm(grads, 0.05)
    else:
        grads = [tf.clip_by_norm(g, 0.05) for g in grads]
    for variable, gradient in zip(model.trainable_weights, grads):
        variable.assign_sub(0.5 * gradient)
    return float(loss)


report = {}
for name in OPTIMIZERS:
    if mode == "workers" and name == "none":
        continue  # the unclipped step on workers: "smoothing" (its loss is the only change)
    model = build(name)
    # "global_clipnorm" differs from "clipnorm" in the optimizer only, which
    # evaluation never reads: its weights and loss are compared, not evaluated again.
    evaluate = name != "global_clipnorm"
    if mode == "single" and name in ("global_clipnorm", "transformer"):
        loss = reference_step(model, "global" if name == "global_clipnorm" else "each")
        report[name] = {"loss": loss, "evaluation": evaluate and model.evaluate(
                            whole(), verbose=0, return_dict=True),
                        "weights": [w.numpy().tolist() for w in model.trainable_weights]}
        continue
    if mode == "workers":
        trainer = DistributedTrainer(model, strategy)
        data = uneven_shard if name == "uneven" else shard
        history = trainer.fit(data, epochs=1, verbose=0).history
        evaluation = evaluate and trainer.evaluate(data, verbose=0)
    else:
        data = uneven_global_batches() if name == "uneven" else whole()
        history = model.fit(data, epochs=1, verbose=0).history
        evaluation = evaluate and model.evaluate(data, verbose=0, return_dict=True)
    report[name] = {"loss": history["loss"][0], "evaluation": evaluation,
                    "weights": [w.numpy().tolist() for w in model.trainable_weights]}
if mode == "single":
    model = build("none")
    naive_clipped_step(model)
    report["naive_clipnorm"] = {"weights": [w.numpy().tolist() for w in model.trainable_weights]}
print("REPORT " + json.dumps(report))
'''


def start_workers(command, count=2, homes=None):
    """Start `count` worker processes running `command` (or one command per
    worker: a list of commands), each with its TF_CONFIG (and, with `homes`,
    its own working directory)."""
    commands = command if isinstance(command[0], list) else [command] * count
    processes = []
    for i, config in enumerate(local_tf_configs(count)):
        processes.append(popen(
            commands[i], forked=True, env={**ENV, "TF_CONFIG": config}, cwd=None if homes is None else homes[i],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return processes


def finish(processes, timeout=PROCESS_DEADLINE):
    outputs = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            outputs.append((process.returncode, out, err))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return outputs


def report_of(stdout):
    line = next(line for line in stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line[len("REPORT "):])


def max_difference(a, b):
    import numpy as np

    return max(float(np.max(np.abs(np.array(x) - np.array(y)))) for x, y in zip(a, b, strict=True))


@pytest.mark.slow
def test_two_workers_step_equals_single_process_step_with_clipping():
    # The one-process reference runs beside the two workers (they spend much
    # of their time waiting on each other's all-reduce).
    single = popen([sys.executable, "-c", STEP_SCRIPT, "single"], env=ENV, forked=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # About 130-170 s on two busy cores (pytest-xdist's other worker beside
    # them): PROCESS_DEADLINE leaves room for a much slower machine.
    workers = finish(start_workers([sys.executable, "-c", STEP_SCRIPT, "workers"]))
    single_code, single_out, single_err = finish([single])[0]
    for code, _, err in workers:
        assert code == 0, err[-3000:]
    assert single_code == 0, single_err[-3000:]
    chief, other = (report_of(out) for _, out, _ in workers)
    one = report_of(single_out)
    # Clipping is active: the clipped and the unclipped step differ a lot ...
    assert max_difference(one["clipnorm"]["weights"], one["none"]["weights"]) > 1e-2
    # ... and clipping each replica before the all-reduce would be visibly wrong.
    naive_error = max_difference(one["naive_clipnorm"]["weights"], one["clipnorm"]["weights"])
    assert naive_error > 1e-3
    # "uneven": worker 0 runs out after one batch and feeds neutral batches while
    # worker 1 does two more; equal to one process on the three global batches.
    # "mixed": mixed_float16 with clipping (float16 activations: looser
    # tolerances, still far below the naive per-replica clipping error);
    # "smoothing": label smoothing 0.1.
    for name in ("clipnorm", "global_clipnorm", "transformer", "uneven", "mixed", "smoothing"):
        weights, loss = (2e-4, 2e-3) if name == "mixed" else (1e-6, 1e-5)
        # Both workers hold the same weights, equal to the one-process step.
        assert max_difference(chief[name]["weights"], other[name]["weights"]) == 0.0
        assert max_difference(chief[name]["weights"], one[name]["weights"]) < weights, name
        # The reported loss is the global batch's token mean; evaluation agrees too.
        assert chief[name]["loss"] == pytest.approx(one[name]["loss"], abs=loss), name
        assert other[name]["loss"] == pytest.approx(one[name]["loss"], abs=loss), name
        for metric in ("loss", "token_accuracy") if name != "global_clipnorm" else ():
            assert chief[name]["evaluation"][metric] == pytest.approx(
                one[name]["evaluation"][metric], abs=loss), name
    # Label smoothing reached the step: it moves the weights elsewhere than the
    # plain loss (at near-uniform predictions the two losses are almost equal,
    # their gradients are not).
    assert max_difference(one["smoothing"]["weights"], one["none"]["weights"]) > 1e-3
    assert max_difference(chief["smoothing"]["weights"], one["none"]["weights"]) > 1e-3


def _wait_for_batch(process, text, seconds=PROCESS_DEADLINE):
    """Read `process`'s stderr until a line holds `text`.

    The deadline is minutes (the workers' start-up and first epoch come before
    the line, and a loaded machine can stretch them past the 180 s this had),
    and a watchdog enforces it: a `readline` that blocks on a silent process
    cannot check a deadline itself, so the watchdog kills the process, which
    ends the read.
    """
    watchdog = threading.Timer(seconds, process.kill)
    watchdog.start()
    seen = ""
    try:
        while text not in seen:
            line = process.stderr.readline()
            if not line:  # the process ended (by itself, or killed by the watchdog)
                process.wait()
                raise AssertionError(f"no {text!r} within {seconds} s (exit status "
                                     f"{process.returncode}):\n{seen[-3000:]}")
            seen += line
    finally:
        watchdog.cancel()


def train_command(output_dir, epochs, *extra):
    return [*KERASSEQ, "train", "--dataset", "cmudict", "--max-train-examples", "96",
            "--max-dev-examples", "16", "--epochs", str(epochs), "--units", "8",
            "--embedding-dim", "4", "--batch-size", "16", "--output-dir", output_dir,
            "--evaluate-words", "0", "--tensorboard-sources", "0", "--strategy", "multi_worker",
            "--verbose", "2", *extra]


def history_epochs(run_dir):
    with open(os.path.join(run_dir, "history.csv"), newline="") as handle:
        return [int(row["epoch"]) for row in csv.DictReader(handle)]


@pytest.mark.slow
def test_cli_workers_kill_one_then_rerun_resumes(tmp_path):
    # Relative --output-dir, one working directory per worker: like hosts
    # without a shared file system, so what each worker writes is visible.
    homes = [tmp_path / "host0", tmp_path / "host1"]
    for home in homes:
        home.mkdir()
    run_dir, worker_dir = str(homes[0] / "run"), str(homes[1] / "run")
    # Worker 1 stops itself (SIGSTOP) after batch 1 of epoch 1, where the test
    # kills it: the chief cannot get past the next all-reduce without it, so the
    # kill lands mid-epoch 1 however late the test reads the line. (It was a
    # 0.4 s sleep after each batch: on a loaded machine the test read the line
    # late, and the workers could be further on, or done, when it killed.)
    command = train_command("run", 3, "--tensorboard-sources", "2")
    processes = start_workers([command, [*command, "--stop-after-batch", "1:1"]], homes=homes)
    chief, worker = processes
    try:
        _wait_for_batch(worker, "kerasseq-debug: epoch 1 batch 1 done")
        # Epoch 0 is finished and backed up by both workers: kill one mid-epoch 1.
        # The chief notices (no heartbeats, no --collective-timeout here) and
        # ends with one clear line instead of waiting in its all-reduce; its
        # heartbeat checks run every 30 s, so it takes up to a minute or so.
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=PROCESS_DEADLINE)
        _, err = chief.communicate(timeout=PROCESS_DEADLINE)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert chief.returncode == 2, err[-3000:]
    message = err.strip().splitlines()[-1]
    assert message.startswith("kerasseq train: error: a worker was lost in epoch 1: "), message
    assert "rerun the same command on every worker" in message and "Traceback" not in err
    assert not os.path.exists(os.path.join(run_dir, "model.keras"))
    assert history_epochs(run_dir) == [0]

    # The same command on every worker: resumes at epoch 1, runs epochs 1 and 2.
    for code, _, err in finish(start_workers(train_command("run", 3), homes=homes)):
        assert code == 0, err[-3000:]
    assert history_epochs(run_dir) == [0, 1, 2]
    with open(os.path.join(run_dir, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["initial_epoch"] == 1 and summary["epochs_run"] == 2
    assert len(summary["history"]["loss"]) == 3
    # Only the chief writes the run's files; the other worker, its backup (last two epochs).
    assert {"model.keras", "best.keras", "history.csv", "summary.json", "tokenizers.json",
            "backup", "tensorboard"} <= set(os.listdir(run_dir))
    assert os.listdir(worker_dir) == ["backup-worker-1"]
    assert sorted(os.listdir(os.path.join(worker_dir, "backup-worker-1"))) == [
        "epoch-2-batch-0.weights.h5", "epoch-3-batch-0.weights.h5", "training_metadata.json"]

    # Rerun of the finished run: every worker agrees there is nothing to do.
    for code, out, err in finish(start_workers(train_command("run", 3), homes=homes)):
        assert code == 0, err[-3000:]
        assert "the run is complete (3 epochs)" in out


@pytest.mark.parametrize("config, message", [
    (None, "needs the TF_CONFIG environment variable"),
    ("{not json", "TF_CONFIG is not valid JSON"),
    ('{"task": {"type": "worker", "index": 0}}', "no 'cluster' object"),
    ('{"cluster": {"worker": ["localhost:1"]}}', "needs a 'task'"),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 1}}',
     "task index 1 is not in cluster['worker'] (1 entries)"),
    ('{"cluster": {"worker": ["nohost"]}, "task": {"type": "worker", "index": 0}}',
     "list of 'host:port' strings"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}',
     "must be 'chief' or 'worker'"),
])
def test_tf_config_errors_are_specific(config, message):
    environ = {} if config is None else {"TF_CONFIG": config}
    with pytest.raises(ClusterConfigError, match=None) as error:
        read_tf_config(environ)
    assert message in str(error.value)


def test_tf_config_with_a_chief():
    config = {"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]},
              "task": {"type": "worker", "index": 1}}
    assert read_tf_config({"TF_CONFIG": json.dumps(config)}) == {
        "workers": 3, "task_type": "worker", "task_index": 1, "worker_index": 2,
        "is_chief": False}


def test_local_tf_configs_ports_are_free_distinct_and_not_ephemeral():
    """The workers' ports are drawn outside the kernel's ephemeral range, where
    no other program's outgoing connection takes them before a worker binds
    them; at random (not from the seeded `random`), so that two test workers
    seeded alike do not draw the same ports at once."""
    import random

    from kerasseq.training import distribute

    def ports():
        random.seed(0)
        return [int(json.loads(config)["cluster"]["worker"][i].rsplit(":", 1)[1])
                for i, config in enumerate(local_tf_configs(3))]

    first, second = ports(), ports()
    assert len(set(first)) == 3 and first != second
    ephemeral = distribute._ephemeral_ports()
    for port in first:
        assert port in distribute._LOCAL_PORTS and distribute._port_is_free(port)
        assert ephemeral is None or port not in ephemeral
    for i, config in enumerate(local_tf_configs(2)):
        assert read_tf_config({"TF_CONFIG": config})["task_index"] == i


def test_cli_multi_worker_without_tf_config_is_one_line(tmp_path):
    # (TF_CPP_MIN_LOG_LEVEL unset: the CLI then hides TensorFlow's start-up lines itself)
    env = {key: value for key, value in ENV.items()
           if key not in ("TF_CONFIG", "TF_CPP_MIN_LOG_LEVEL")}
    # (a fresh Python that imports TensorFlow: minutes on a loaded machine)
    result = subprocess.run(train_command(str(tmp_path / "run"), 1), env=env,
                            capture_output=True, text=True, timeout=PROCESS_DEADLINE)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "TF_CONFIG environment variable" in lines[0], result.stderr
