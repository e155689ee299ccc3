"""Pick a `tf.distribute` strategy for training.

Keras 3 (TensorFlow backend) trains under any `tf.distribute.Strategy`:
create the model, its optimizer, loss and metrics inside `strategy.scope()`
(so every variable is a mirrored variable) and call `fit` as usual; Keras
splits each global batch across the replicas, runs the step on every replica
and all-reduces (sums) the gradients.

    strategy = get_strategy("mirrored")     # every local GPU, or the CPU
    with strategy.scope():
        model = build_rnn_seq2seq(...)
        model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    model.fit(dataset, epochs=10)            # batch_size = global batch size

With several replicas a Keras token-mean loss divides by each replica's own
token count and the optimizer clips each replica's gradient before the
all-reduce; kerasseq's step equals the one-device step on the global batch
(docs/distributed.md, "What Keras 3 lacks"): the loss divides by the global
token count (`MaskedSparseCategoricalCrossentropy`) and
`Seq2SeqModel.train_step` runs `exact_train_step`, which clips the
all-reduced gradient. Keras 3's `fit` does not run under
`MultiWorkerMirroredStrategy`; `kerasseq.training.DistributedTrainer` trains
there with a `fit`-like loop built on `strategy.run` and the same step.
"""

import json
import math
import numbers
import os

import keras
import tensorflow as tf

from kerasseq._validation import ArgumentError, check_positive_int
from kerasseq.data.pipeline import pad_batch

STRATEGIES = ("auto", "default", "mirrored", "multi_worker")


def get_strategy(name="auto", devices=None, collective_timeout=None):
    """Return a `tf.distribute.Strategy` by name.

    Args:
        name: one of
            * "default": the no-op default strategy (one device, no scope needed);
            * "mirrored": `tf.distribute.MirroredStrategy` over `devices`
              (default: every local GPU, or the CPU if there is none);
            * "multi_worker": `tf.distribute.MultiWorkerMirroredStrategy`,
              configured by the `TF_CONFIG` environment variable of each worker;
            * "auto": "mirrored" when `devices` lists several devices or more
              than one GPU is visible, "default" otherwise.
        devices: optional list of device names for "mirrored"/"auto", e.g.
            `["/cpu:0", "/cpu:1"]` or `["/gpu:0", "/gpu:1"]`.
        collective_timeout: "multi_worker" only: seconds a collective
            (all-reduce) may wait for the other workers before it fails with
            `DeadlineExceededError` (which `DistributedTrainer.fit` reports as
            `WorkerLostError`); None waits as long as TensorFlow's own peer
            checks allow. A dead worker process is noticed anyway (it stops
            sending heartbeats); the timeout also ends a wait on a worker
            that is alive but stuck.

    Returns:
        A `tf.distribute.Strategy`; use `with strategy.scope():` around model
        creation and `compile`.

    Example:

    >>> strategy = get_strategy("default")
    >>> strategy.num_replicas_in_sync
    1
    """
    if name not in STRATEGIES:
        raise ValueError(f"name must be one of {', '.join(STRATEGIES)}. Received: name={name!r}")
    if devices is not None and name in ("default", "multi_worker"):
        raise ValueError(f"devices applies to 'mirrored' and 'auto' only. Received: name={name!r}, "
                         f"devices={devices!r}")
    if name == "auto":
        several = len(devices) > 1 if devices else len(tf.config.list_logical_devices("GPU")) > 1
        name = "mirrored" if several else "default"
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    if collective_timeout is not None and (
        isinstance(collective_timeout, bool) or not isinstance(collective_timeout, numbers.Real)
        or not 0 < collective_timeout < math.inf
    ):
        raise ValueError("collective_timeout must be a number of seconds > 0 or None. "
                         f"Received: collective_timeout={collective_timeout!r}")
    if name == "multi_worker":
        read_tf_config()  # a clear error for a missing or malformed TF_CONFIG
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=None if collective_timeout is None else float(collective_timeout))
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    return tf.distribute.get_strategy()


def check_global_batch_size(batch_size, replicas, name="batch_size"):
    """`batch_size` as an int, checked to be a global batch for `replicas` replicas.

    A strategy splits each global batch evenly over its replicas, so the
    batch size must be a positive multiple of their number: the one check of
    `kerasseq train --batch-size`, `TrainingRun.datasets` and
    `sharded_dataset_fn`.

    Raises:
        ArgumentError: not an int, < 1 or no multiple of `replicas` (its
            `.field` is `name`).
    """
    batch_size = check_positive_int(name, batch_size)
    if batch_size % replicas:
        raise ArgumentError(name, (
            f"{name} must be a multiple of the number of replicas ({replicas}), "
            f"e.g. {replicas * max(1, batch_size // replicas)}. Received: {name}={batch_size}"))
    return batch_size


def pad_batches_to_multiple(dataset, multiple):
    """Pad every teacher-forcing batch with neutral rows to a multiple of `multiple`.

    Keras 3.15 (`TensorFlowTrainer._maybe_symbolic_build`) averages the first
    batch of `fit` / `evaluate` across the replicas to build the model
    symbolically; that fails ("Inputs to operation AddN ... must have the same
    size and shape") when the batch size is not a multiple of the number of
    replicas, as for the last, partial batch of a bucket. Pad the batches
    with this function under a strategy with several replicas.

    The extra rows are `kerasseq.data.pad_batch`'s neutral rows: no real
    target token, so they add nothing to `MaskedSparseCategoricalCrossentropy`
    (their gradient is exactly zero) nor to `MaskedTokenAccuracy`. Only the
    running mean of the reported loss, which Keras weights by rows per
    batch, sees the extra rows. (`make_dataset(..., batch_multiple=multiple)`
    pads its own batches so; this function is for other datasets of its
    batches.)

    Args:
        dataset: `tf.data.Dataset` of `((source_ids, target_in_ids),
            target_out_ids)` batches, as built by `kerasseq.data.make_dataset`.
        multiple: int >= 1, usually `strategy.num_replicas_in_sync`.

    Returns:
        The padded `tf.data.Dataset` (unchanged when `multiple == 1`).
    """
    multiple = check_positive_int("multiple", multiple)
    if int(multiple) == 1:
        return dataset

    def pad(inputs, target_out):
        rows = tf.shape(target_out)[0]
        return pad_batch(inputs, target_out, rows + (-rows) % multiple)

    return dataset.map(tf.autograph.experimental.do_not_convert(pad),
                       num_parallel_calls=tf.data.AUTOTUNE)


# ------------------------------------------------------------ the exact step
def _replica_context():
    context = tf.distribute.get_replica_context()  # None in a cross-replica context
    return context if context is not None and context.num_replicas_in_sync > 1 else None


def _clipping_optimizer(optimizer):
    """The optimizer whose clipping settings apply: the inner one of a `LossScaleOptimizer`."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.inner_optimizer
    return optimizer


def clips_gradients(optimizer):
    """True if the Keras optimizer clips its gradients (any of the three ways; for a
    `LossScaleOptimizer`, its inner optimizer)."""
    optimizer = _clipping_optimizer(optimizer)
    return any(getattr(optimizer, name, None) for name in ("clipnorm", "global_clipnorm", "clipvalue"))


def loss_scale(optimizer):
    """The factor `optimizer.scale_loss` multiplies the loss by (1 if none).

    `keras.optimizers.LossScaleOptimizer` (what `compile` wraps the optimizer in
    under `mixed_float16`) scales by its dynamic scale; any optimizer may have
    a fixed `loss_scale_factor`.
    """
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return keras.ops.cast(optimizer.dynamic_scale, "float32")
    return getattr(optimizer, "loss_scale_factor", None) or 1.0


def clip_like_optimizer(optimizer, gradients):
    """Clip `gradients` the way `optimizer` clips before its update.

    The same rules and formulas as Keras 3's optimizers: `clipnorm` clips each
    variable's gradient to that L2 norm, else `global_clipnorm` scales all of
    them by `min(1, clip / global_norm)` (NaN for a non-finite norm), else
    `clipvalue` clips each element. `None` gradients stay `None`. A
    `LossScaleOptimizer` clips as its inner optimizer does (after unscaling).
    """
    ops = keras.ops
    optimizer = _clipping_optimizer(optimizer)
    clipnorm = getattr(optimizer, "clipnorm", None)
    global_clipnorm = getattr(optimizer, "global_clipnorm", None)
    clipvalue = getattr(optimizer, "clipvalue", None)
    if clipnorm and clipnorm > 0:
        def clip(values):
            l2sum = ops.sum(ops.square(values), keepdims=True)
            positive = l2sum > 0
            l2norm = ops.where(positive, ops.sqrt(ops.where(positive, l2sum, ops.ones_like(l2sum))),
                               l2sum)
            return ops.multiply(values, clipnorm) / ops.maximum(l2norm, clipnorm)

        return [None if g is None else clip(g) for g in gradients]
    if global_clipnorm and global_clipnorm > 0:
        present = [g for g in gradients if g is not None]
        norm = ops.sqrt(ops.sum(ops.stack([ops.sum(ops.square(g)) for g in present])))
        scale = global_clipnorm * ops.minimum(1.0 / norm, 1.0 / global_clipnorm) + (norm - norm)
        return [None if g is None else g * scale for g in gradients]
    if clipvalue and clipvalue > 0:
        return [None if g is None else ops.clip(g, -clipvalue, clipvalue) for g in gradients]
    return list(gradients)


def _real_rows(y):
    """Rows of a target batch with at least one real (non-padding) token."""
    ops = keras.ops
    return ops.sum(ops.cast(ops.any(ops.not_equal(y, 0), axis=-1), "float32"))


def _loss_tracker(model):
    for metric in model.metrics:
        if metric.name == "loss":
            return metric
    return None


def exact_train_step(model, data):
    """One replica's share of a training step that equals the one-device step.

    Runs inside `strategy.run` (Keras' `fit` under `MirroredStrategy`, or
    `DistributedTrainer`). The loss of each replica is its share of the
    global token-mean (`MaskedSparseCategoricalCrossentropy`); with clipping
    or loss scaling the gradients are all-reduced, clipped as one gradient and
    split back into equal shares before `optimizer.apply`, whose own clipping
    then has nothing left to clip (docs/distributed.md, "Clipping: all-reduce
    first, then clip", also for the cost: a second all-reduce of the
    gradients). The reported loss is the global batch's loss, weighted by its
    real rows as Keras weights a batch on one device, so neutral padding rows
    (`pad_batches_to_multiple`, the trainer's filler batches) count for
    nothing.

    Returns:
        The model's metric results on this replica (what Keras' `train_step`
        returns; read `model.get_metrics_result()` in the cross-replica
        context for the global values).
    """
    context = tf.distribute.get_replica_context()
    replicas = context.num_replicas_in_sync
    optimizer = model.optimizer
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    with tf.GradientTape() as tape:
        y_pred, loss = model.compute_predictions_and_loss(x, y, sample_weight, training=True)
        scaled_loss = optimizer.scale_loss(loss)
    variables = model.trainable_weights
    gradients = tape.gradient(scaled_loss, variables)
    if clips_gradients(optimizer) or isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        if getattr(_clipping_optimizer(optimizer), "gradient_accumulation_steps", None):
            raise ValueError(
                "gradient_accumulation_steps with gradient clipping is not supported with several "
                "replicas (the optimizer clips the accumulated gradient, not each step's)")
        present = [i for i, g in enumerate(gradients) if g is not None]
        # Dense (embedding gradients arrive as IndexedSlices): clipping needs whole
        # tensors. The loss rides along: one collective for both.
        *reduced, global_loss = context.all_reduce(
            tf.distribute.ReduceOp.SUM,
            [tf.convert_to_tensor(gradients[i]) for i in present] + [tf.stop_gradient(loss)])
        total = [None] * len(gradients)
        for i, g in zip(present, reduced, strict=True):
            total[i] = g
        scale = loss_scale(optimizer)
        clipped = clip_like_optimizer(optimizer, [None if g is None else g / scale for g in total])
        gradients = [None if g is None else g * (scale / replicas) for g in clipped]
    else:
        global_loss = None
    tracker = _loss_tracker(model)
    if tracker is not None:
        if global_loss is None:
            global_loss = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.stop_gradient(loss))
        tracker.update_state(global_loss, sample_weight=_real_rows(y))
    optimizer.apply(gradients, variables)
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def exact_test_step(model, data):
    """One replica's share of an evaluation step (the global batch's loss)."""
    context = tf.distribute.get_replica_context()
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    y_pred, loss = model.compute_predictions_and_loss(x, y, sample_weight, training=False)
    tracker = _loss_tracker(model)
    if tracker is not None:
        global_loss = context.all_reduce(tf.distribute.ReduceOp.SUM, loss)
        tracker.update_state(global_loss, sample_weight=_real_rows(y))
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def carries_links(data):
    """True for a batch whose inputs carry `alignment_links` (guided alignment)."""
    x = keras.utils.unpack_x_y_sample_weight(data)[0]
    return isinstance(x, dict) and "alignment_links" in x


def one_device_train_step(model, data):
    """Keras' one-device training step, with the loss of `model.compute_predictions_and_loss`.

    Used for batches Keras' own step cannot take: with alignment links, the
    loss has a term the forward pass alone does not give.
    """
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    with tf.GradientTape() as tape:
        y_pred, loss = model.compute_predictions_and_loss(x, y, sample_weight, training=True)
        scaled_loss = model.optimizer.scale_loss(loss)
    variables = model.trainable_weights
    model.optimizer.apply_gradients(zip(tape.gradient(scaled_loss, variables), variables,
                                        strict=True))
    _track_loss(model, loss, y)
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def one_device_test_step(model, data):
    """Keras' one-device evaluation step, with `model.compute_predictions_and_loss`."""
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    y_pred, loss = model.compute_predictions_and_loss(x, y, sample_weight, training=False)
    _track_loss(model, loss, y)
    return model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)


def _track_loss(model, loss, y):
    """The running loss, weighted by rows as Keras weights it."""
    tracker = _loss_tracker(model)
    if tracker is not None:
        tracker.update_state(loss, sample_weight=keras.ops.shape(y)[0])


def uses_exact_step():
    """True inside `strategy.run` with several replicas (where the exact step applies)."""
    return _replica_context() is not None


# ------------------------------------------------------------------ TF_CONFIG
class ClusterConfigError(ValueError):
    """`TF_CONFIG` is missing or does not describe a usable cluster."""


def read_tf_config(environ=None):
    """This process's place in a multi-worker cluster, from `TF_CONFIG`.

    Returns:
        A dict: `workers` (the number of training tasks: chief + workers),
        `task_type`, `task_index`, `worker_index` (0 for the chief, chief first),
        `is_chief`.

    Raises:
        ClusterConfigError: `TF_CONFIG` is unset, not JSON, or lacks a
            `cluster` with workers or a `task` that is in it.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    example = ('e.g. TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
               '"task": {"type": "worker", "index": 0}}\'')
    if not text:
        raise ClusterConfigError(
            "--strategy multi_worker needs the TF_CONFIG environment variable on every worker, "
            + example)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ClusterConfigError(f"TF_CONFIG is not valid JSON ({error}); {example}") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise ClusterConfigError(f"TF_CONFIG has no 'cluster' object; {example}")
    cluster, task = config["cluster"], config.get("task")
    for task_type in ("chief", "worker"):
        hosts = cluster.get(task_type, [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) and ":" in h for h in hosts):
            raise ClusterConfigError(
                f"TF_CONFIG cluster[{task_type!r}] must be a list of 'host:port' strings. "
                f"Received: {hosts!r}")
    chiefs, workers = cluster.get("chief", []), cluster.get("worker", [])
    if len(chiefs) > 1:
        raise ClusterConfigError(f"TF_CONFIG lists {len(chiefs)} chiefs; at most one is allowed")
    if not chiefs and not workers:
        raise ClusterConfigError(f"TF_CONFIG cluster lists no 'worker' (or 'chief'); {example}")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ClusterConfigError(
            f"TF_CONFIG needs a 'task' with 'type' and 'index' (this process). Received: {task!r}")
    task_type, task_index = task["type"], task["index"]
    if task_type not in ("chief", "worker"):
        raise ClusterConfigError(
            f"TF_CONFIG task type must be 'chief' or 'worker' for training. Received: {task_type!r}")
    hosts = cluster.get(task_type, [])
    if not isinstance(task_index, int) or isinstance(task_index, bool) or not 0 <= task_index < len(hosts):
        raise ClusterConfigError(
            f"TF_CONFIG task index {task_index!r} is not in cluster[{task_type!r}] "
            f"({len(hosts)} entries)")
    worker_index = task_index if task_type == "chief" else len(chiefs) + task_index
    return {"workers": len(chiefs) + len(workers), "task_type": task_type,
            "task_index": task_index, "worker_index": worker_index,
            "is_chief": worker_index == 0}


# The ports `local_tf_configs` draws from: below the kernel's ephemeral range
# (Linux: /proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default;
# macOS and Windows: 49152-65535), from which the kernel picks the local port of
# every outgoing connection and of every bind to port 0. A port found free there
# (the kernel's pick for a bind to port 0, as this was) can go to another
# process's connection in the seconds before the worker binds it, most likely on
# a busy machine, and the worker then fails with "address already in use". A
# port outside that range is only ever taken by a program that asks for it.
_LOCAL_PORTS = range(20000, 32768)


def _ephemeral_ports():
    """The kernel's ephemeral port range (Linux), or None where it cannot be read."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = (int(value) for value in handle.read().split())
    except (OSError, ValueError):
        return None
    return range(low, high + 1)


def _port_is_free(port):
    """True when no socket holds `port` on 127.0.0.1 (nor on ::1, where there is one)."""
    import errno
    import socket

    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            handle = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 on this machine
            continue
        try:
            handle.bind((host, port))
        except OSError as error:
            if family == socket.AF_INET6 and error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                continue  # no ::1 here
            return False
        finally:
            handle.close()
    return True


def _free_local_ports(count):
    """`count` distinct free localhost ports, outside the ephemeral range when it
    leaves room (see `_LOCAL_PORTS`); else ports the kernel picks (bind to 0)."""
    import random
    import socket

    ephemeral = _ephemeral_ports()
    candidates = [port for port in _LOCAL_PORTS if ephemeral is None or port not in ephemeral]
    # The operating system's randomness, not `random`'s global generator: that
    # one is seeded (keras.utils.set_random_seed), and two processes seeded
    # alike (two test workers, two scripts) would try the same ports together.
    random.SystemRandom().shuffle(candidates)
    ports = []
    for port in candidates:
        if len(ports) == count:
            return ports
        if _port_is_free(port):
            ports.append(port)
    sockets = []
    try:
        while len(ports) + len(sockets) < count:
            handle = socket.socket()
            handle.bind(("localhost", 0))
            sockets.append(handle)
        return ports + [handle.getsockname()[1] for handle in sockets]
    finally:
        for handle in sockets:
            handle.close()


def local_tf_configs(num_workers):
    """`TF_CONFIG` values for `num_workers` worker processes on this machine.

    Each worker listens on a free localhost port (picked now; bind soon),
    chosen at random below the kernel's ephemeral port range where it can:
    no outgoing connection of another program takes it in the meantime.
    Give the i-th string to the i-th process as its `TF_CONFIG` environment
    variable; worker 0 is the chief. For trying multi-worker training (and
    for tests) on one machine.

    Returns:
        A list of `num_workers` JSON strings.
    """
    num_workers = check_positive_int("num_workers", num_workers)
    cluster = {"worker": [f"localhost:{port}" for port in _free_local_ports(num_workers)]}
    return [json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
            for i in range(num_workers)]
