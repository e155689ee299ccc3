"""`DistributedTrainer`: `fit` / `evaluate` on `strategy.run`, for strategies Keras 3 cannot `fit` under.

Keras 3's `Model.fit` fails at the first step under
`tf.distribute.MultiWorkerMirroredStrategy` ("Attempt to convert a value
(PerReplica:{...}) ... to a Tensor"; keras-team/keras#20585). This trainer
runs the same training step (`model.train_step`, which for a kerasseq model
with several replicas is the exact distributed step of
`kerasseq.training.distribute`) inside `strategy.run`, and drives the usual
Keras callbacks (`History`, the progress bar, `CSVLogger`, `ModelCheckpoint`,
`EarlyStopping`, `TensorBoard`, ...) with the same logs as `fit`. To resume,
use `kerasseq.training.checkpoints.AtomicBackupAndRestore` and start at the
epoch it restores, as with `fit`: `initial_epoch=backup.completed_epochs()`
(Keras' own `BackupAndRestore` moves only `keras.Model.fit`'s first epoch,
through a private attribute, so it is refused here):

    strategy = get_strategy("multi_worker")          # TF_CONFIG on every worker
    with strategy.scope():
        model = build_rnn_seq2seq(...)
        model.compile(optimizer=..., loss=MaskedSparseCategoricalCrossentropy(), ...)
    trainer = DistributedTrainer(model, strategy)
    history = trainer.fit(sharded_dataset_fn(train_pairs, src, tgt, global_batch_size=64),
                          validation_data=dev_dataset_fn, epochs=10, callbacks=[...])

Data. `x` is a `tf.data.Dataset` of *global* batches (each worker keeps its
slice of every batch; batches are padded to a multiple of the replicas by
`pad_batches_to_multiple`) or a function `input_context -> Dataset` of
*per-replica* batches, one shard per worker (`sharded_dataset_fn`). Uneven
shards, one trace with unknown shapes, neutral filler batches and global
logs: docs/distributed.md, "Two workers on one machine".
"""

import math

import keras
import tensorflow as tf

from kerasseq._validation import check_positive_int
from kerasseq.data import make_dataset
from kerasseq.data.pipeline import join_inputs, split_inputs
from kerasseq.data.tokenizer import END_ID, PAD_ID, START_ID
from kerasseq.training.distribute import (
    check_global_batch_size,
    pad_batches_to_multiple,
)


def _neutral_batch(element_spec, rows=1):
    """A neutral teacher-forcing batch of `rows` rows matching `element_spec`.

    A neutral row has no real target token: zero loss, zero gradient, no
    accuracy count (`kerasseq.training.distribute.pad_batches_to_multiple`).
    """
    try:
        inputs_spec, target_out_spec = element_spec
        source_spec, target_in_spec, links_spec = split_inputs(inputs_spec)
    except (TypeError, ValueError, KeyError):
        raise ValueError(
            "DistributedTrainer expects batches ((source_ids, target_in_ids), target_out_ids) "
            "(or with a dict of source_ids, target_in_ids and alignment_links) as built by "
            f"kerasseq.data.make_dataset. Received element_spec: {element_spec!r}"
        ) from None

    def ids(spec, value):
        return tf.fill([rows, 1], tf.cast(value, spec.dtype))

    links = None if links_spec is None else tf.zeros([rows, 1, 1], links_spec.dtype)
    return (join_inputs(ids(source_spec, END_ID), ids(target_in_spec, START_ID), links),
            ids(target_out_spec, PAD_ID))


def sharded_dataset_fn(pairs, source_tokenizer, target_tokenizer, global_batch_size, **dataset_args):
    """A dataset function for `DistributedTrainer`: each worker batches its own shard.

    Worker `i` of `n` (its `input_pipeline_id`) takes `pairs[i::n]` and batches
    it with `kerasseq.data.make_dataset` at the per-replica batch size
    `global_batch_size / num_replicas`.

    Args:
        pairs: list of `(source, target)` str pairs (the whole split; every
            worker may load it, each keeps its shard).
        source_tokenizer, target_tokenizer: the `TextTokenizer`s.
        global_batch_size: int, examples per step over all replicas; must be
            a multiple of the number of replicas.
        **dataset_args: other `make_dataset` arguments (`shuffle`, `seed`,
            `bucket_boundaries`, ...).

    Returns:
        A function `tf.distribute.InputContext -> tf.data.Dataset`.
    """
    global_batch_size = check_positive_int("global_batch_size", global_batch_size)

    def dataset_fn(input_context):
        check_global_batch_size(global_batch_size, input_context.num_replicas_in_sync,
                                "global_batch_size")
        shard = pairs[input_context.input_pipeline_id::input_context.num_input_pipelines]
        return make_dataset(shard, source_tokenizer, target_tokenizer,
                            batch_size=input_context.get_per_replica_batch_size(global_batch_size),
                            **dataset_args)

    return dataset_fn


class WorkerLostError(RuntimeError):
    """A collective failed because a worker died, hung or could not be reached."""


# What TensorFlow raises from a collective whose peer is gone: Unavailable
# (heartbeats stopped, "aborted by ... unhealthy"), DeadlineExceeded (the
# strategy's collective timeout), Aborted / Cancelled (collectives aborted).
_LOST_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                     tf.errors.AbortedError, tf.errors.CancelledError)


def is_lost_peer_error(error):
    """True for a TensorFlow error of a collective whose peer is gone (not, e.g.,
    an unavailable file system or a cancelled input pipeline)."""
    if not isinstance(error, _LOST_PEER_ERRORS):
        return False
    message = str(error.message or error).lower()
    return any(hint in message for hint in ("collective", "unhealthy", "heartbeat", "peer"))


def worker_lost_error(error, epoch=None):
    """A `WorkerLostError` with the line of TensorFlow's message that says why."""
    lines = [line.strip() for line in str(error.message or error).splitlines() if line.strip()]
    hints = ("unhealthy", "abort", "timed out", "timeout", "deadline", "down", "unavailable")
    reason = next((line for line in lines if any(hint in line.lower() for hint in hints)),
                  lines[0] if lines else type(error).__name__)
    where = "before the first epoch" if epoch is None else f"in epoch {epoch}"
    return WorkerLostError(
        f"a worker was lost {where}: {reason.rstrip('.')} ({type(error).__name__}). The other workers "
        "cannot go on without it. Restart the lost worker and rerun the same command on "
        "every worker: they resume from the last epoch all of them backed up")


class DistributedTrainer:
    """Train and evaluate a compiled model under a `tf.distribute` strategy with `strategy.run`.

    Args:
        model: a compiled Keras model (a kerasseq seq2seq model: its
            `train_step` / `test_step` are exact under several replicas),
            built and compiled inside `strategy.scope()`.
        strategy: the `tf.distribute.Strategy` (default: the model's).

    Raises:
        ValueError: the model is not compiled, or its variables were not
            created under `strategy.scope()`.
    """

    def __init__(self, model, strategy=None):
        if not getattr(model, "compiled", False) or model.optimizer is None:
            raise ValueError("DistributedTrainer needs a model compiled with an optimizer and a loss "
                             "(call model.compile(...) inside strategy.scope())")
        self.model = model
        self.strategy = strategy or model.distribute_strategy
        if model.weights and not self.strategy.extended.variable_created_in_scope(
                model.weights[0].value):
            raise ValueError(
                "the model's variables were not created under this strategy: build and compile the "
                "model inside `with strategy.scope():`")
        self._train_function = None
        self._test_function = None
        self._jit_compile = bool(getattr(model, "jit_compile", False)) and tf.config.list_physical_devices("GPU") != []

    # ----------------------------------------------------------------- data
    def _distribute(self, data):
        """`(distributed_dataset, local_steps, batch_spec)` for a Dataset or a dataset
        function; `batch_spec` is the `element_spec` of one global (Dataset) or
        per-worker (function) batch, before the neutral filler."""
        strategy = self.strategy
        if isinstance(data, tf.data.Dataset):
            data = pad_batches_to_multiple(data, strategy.num_replicas_in_sync)
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
            data = data.with_options(options)
            local_batches = _count_batches(data)  # global batches: the same on every worker
            # One neutral row per replica (a pair or a guided dict, as the batches).
            neutral = _neutral_batch(data.element_spec, strategy.num_replicas_in_sync)
            filler = tf.data.Dataset.from_tensors(neutral).repeat()
            endless = data.concatenate(filler).with_options(options)
            return strategy.experimental_distribute_dataset(endless), local_batches, data.element_spec
        if not callable(data):
            raise TypeError("x / validation_data must be a tf.data.Dataset of global batches or a "
                            f"function input_context -> Dataset. Received: {type(data).__name__}")
        counts, specs = {}, []

        def endless_fn(input_context):
            dataset = data(input_context)
            if not isinstance(dataset, tf.data.Dataset):
                raise TypeError(f"the dataset function returned {type(dataset).__name__}, "
                                "not a tf.data.Dataset")
            counts[input_context.input_pipeline_id] = _count_batches(dataset)
            specs.append(dataset.element_spec)
            filler = tf.data.Dataset.from_tensors(_neutral_batch(dataset.element_spec)).repeat()
            return dataset.concatenate(filler)

        distributed = strategy.distribute_datasets_from_function(endless_fn)
        try:
            local_replicas = max(1, len(strategy.extended.worker_devices))
        except RuntimeError:  # the default strategy: one device
            local_replicas = 1
        local_batches = sum(counts.values())
        return distributed, math.ceil(local_batches / local_replicas), specs[0] if specs else None

    # ------------------------------------------------------------ functions
    def _make_function(self, step):
        model, strategy = self.model, self.strategy
        replica_step = tf.function(step, jit_compile=self._jit_compile, reduce_retracing=True,
                                   autograph=False)
        def distributed_step(batch):
            strategy.run(replica_step, args=(batch,))
            # (after the step: compiled metrics create their variables on first use)
            variables = [v for metric in model.metrics for v in metric.variables]
            summable = all(getattr(v, "aggregation", "sum") == "sum" for v in variables)

            def local_states():
                return tf.concat([tf.reshape(tf.cast(v.value, tf.float64), [-1])
                                  for v in variables], 0)

            if not summable or not variables or strategy.num_replicas_in_sync == 1:
                return model.get_metrics_result()
            # Every metric state summed over the replicas in ONE all-reduce (reading
            # each sync-on-read variable would cost one collective per variable).
            totals = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(local_states),
                                     axis=None)
            return _metric_results(model, totals)

        return distributed_step

    def _function(self, kind, element_spec):
        name = f"_{kind}_function"
        cached = getattr(self, name)
        if cached is None or cached[0] != element_spec:
            step = self.model.train_step if kind == "train" else self.model.test_step
            # One trace with unknown shapes: every worker builds the same collectives.
            function = tf.function(self._make_function(step), input_signature=[element_spec],
                                   autograph=False)
            cached = (element_spec, function)
            setattr(self, name, cached)
        return cached[1]

    # ------------------------------------------------------------------ fit
    def fit(self, x, validation_data=None, epochs=1, initial_epoch=0, callbacks=None,
            verbose="auto", validation_freq=1):
        """Train like `keras.Model.fit`; returns the `History` callback.

        Args:
            x: a `tf.data.Dataset` of global batches, or a function
                `tf.distribute.InputContext -> Dataset` of per-replica batches
                (see the module docstring and `sharded_dataset_fn`).
            validation_data: the same kinds, or None.
            epochs, initial_epoch, validation_freq: as in `fit` (resuming
                from an `AtomicBackupAndRestore`: its `completed_epochs()`).
            callbacks: list of `keras.callbacks.Callback`.
            verbose: "auto" (= 1), 0, 1 or 2, as in `fit`.
        """
        epochs = check_positive_int("epochs", epochs)
        self._epoch = None
        try:
            return self._fit(x, epochs, verbose, callbacks, validation_data, initial_epoch,
                             validation_freq)
        except _LOST_PEER_ERRORS as error:
            if not is_lost_peer_error(error):
                raise
            raise worker_lost_error(error, self._epoch) from None

    def _fit(self, x, epochs, verbose, callbacks, validation_data, initial_epoch,
             validation_freq):
        model = self.model
        verbose = 1 if verbose == "auto" else verbose
        train_data, local_steps, batch_spec = self._distribute(x)
        steps = int(max_over_workers(self.strategy, local_steps))  # the most any worker has (a collective)
        if steps == 0:
            raise ValueError("the training data has no batch on any worker")
        for callback in callbacks or ():
            if isinstance(callback, keras.callbacks.BackupAndRestore):
                raise ValueError(
                    "DistributedTrainer resumes with kerasseq.training.checkpoints."
                    "AtomicBackupAndRestore and initial_epoch=backup.completed_epochs() "
                    "(keras.callbacks.BackupAndRestore moves only keras.Model.fit's first epoch). "
                    f"Received: {callback!r}")
        callbacks = keras.callbacks.CallbackList(
            callbacks, add_history=True, add_progbar=verbose != 0, verbose=verbose,
            epochs=epochs, steps=steps, model=model)
        train_function = self._function("train", train_data.element_spec)
        build = getattr(model, "_build_training_state", None)  # (a kerasseq model)
        if build is not None:  # one trace of the step (see Seq2SeqModel._build_training_state)
            build(batch_spec)
        if not model.optimizer.built:  # mirrored optimizer state (before a backup restores it)
            with self.strategy.scope():
                model.optimizer.build(model.trainable_variables)
        model.stop_training = False
        callbacks.on_train_begin()  # (an AtomicBackupAndRestore restores its backup here)
        logs = {}
        training_logs = None
        for epoch in range(initial_epoch, epochs):
            self._epoch = epoch
            model.reset_metrics()
            callbacks.on_epoch_begin(epoch)
            iterator = iter(train_data)
            for step in range(steps):
                callbacks.on_train_batch_begin(step)
                logs = _to_floats(train_function(next(iterator)))
                callbacks.on_train_batch_end(step, logs)
                if model.stop_training:
                    break
            epoch_logs = dict(logs)
            if validation_data is not None and (epoch + 1) % validation_freq == 0:
                val_logs = self.evaluate(validation_data, verbose=0, _callbacks=callbacks)
                epoch_logs.update({"val_" + name: value for name, value in val_logs.items()})
            callbacks.on_epoch_end(epoch, epoch_logs)
            training_logs = epoch_logs
            if model.stop_training:
                break
        callbacks.on_train_end(logs=training_logs)
        return model.history

    def evaluate(self, x, verbose="auto", callbacks=None, return_dict=True, _callbacks=None):
        """Evaluate like `keras.Model.evaluate` (global loss and metrics).

        Returns:
            A dict `{metric name: float}` (`return_dict=False`: a list, loss first).
        """
        model = self.model
        data, local_steps, _ = self._distribute(x)
        steps = int(max_over_workers(self.strategy, local_steps))  # the most any worker has (a collective)
        verbose = 1 if verbose == "auto" else verbose
        if _callbacks is None:
            callback_list = keras.callbacks.CallbackList(
                callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1, steps=steps,
                model=model)
        else:
            callback_list = _callbacks
        test_function = self._function("test", data.element_spec)
        model.reset_metrics()
        callback_list.on_test_begin()
        logs = {}
        iterator = iter(data)
        for step in range(steps):
            callback_list.on_test_batch_begin(step)
            logs = _to_floats(test_function(next(iterator)))
            callback_list.on_test_batch_end(step, logs)
        if not logs:
            logs = _to_floats(model.get_metrics_result())
        callback_list.on_test_end(logs)
        return logs if return_dict else list(logs.values())


def _metric_results(model, totals):
    """`model.get_metrics_result()` computed from the flat vector of summed metric states."""
    results, offset = {}, 0
    for metric in model.metrics:
        states = []
        for variable in metric.variables:
            size = math.prod(variable.shape)  # static: reading the variable would be a collective
            state = tf.reshape(totals[offset:offset + size], variable.shape)
            states.append(tf.cast(state, variable.dtype))
            offset += size
        result = metric.stateless_result(states)
        if isinstance(result, dict):
            results.update(result)
        else:
            results[metric.name] = result
    return results


def _to_floats(logs):
    return {name: float(value) for name, value in logs.items()}


def _count_batches(dataset):
    cardinality = int(dataset.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError("DistributedTrainer needs finite datasets (one epoch each); got an "
                         "infinite one (remove .repeat())")
    if cardinality >= 0:
        return cardinality
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


_GATHER_FUNCTIONS = {}


def max_over_workers(strategy, value):
    """The largest of every worker's `value` (an int), known to every worker.

    A collective: every worker must call it at the same point. One traced
    all-gather per strategy, reused by every call.
    """
    if strategy.num_replicas_in_sync == 1:
        return value
    function = _GATHER_FUNCTIONS.get(id(strategy))
    if function is None:
        def replica_fn(local):
            # Every replica's value in its own slot, summed: an all-gather by all-reduce.
            context = tf.distribute.get_replica_context()
            slots = tf.one_hot(context.replica_id_in_sync_group, context.num_replicas_in_sync,
                               dtype=tf.int64)
            return context.all_reduce(tf.distribute.ReduceOp.SUM, slots * local)

        @tf.function(input_signature=[tf.TensorSpec([], tf.int64)], autograph=False)
        def function(local):
            gathered = strategy.run(replica_fn, args=(local,))
            return strategy.experimental_local_results(gathered)[0]

        _GATHER_FUNCTIONS[id(strategy)] = function
    try:
        return int(tf.reduce_max(function(tf.constant(value, tf.int64))))
    except _LOST_PEER_ERRORS as error:
        if not is_lost_peer_error(error):
            raise
        raise worker_lost_error(error, None) from None


def min_over_workers(strategy, value):
    """The smallest of every worker's `value` (an int), known to every worker (a collective)."""
    return -max_over_workers(strategy, -value)
