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

Loss scaling: Keras multiplies a loss with reduction "sum_over_batch_size" by
1 / num_replicas and sums the gradients, which gives the gradient of the
global mean only when every replica holds the same number of loss terms.
`MaskedSparseCategoricalCrossentropy` divides each replica's token-loss sum by
the token count summed over all replicas instead, so the global token-mean
(and its gradient) is exact even when the replicas get different numbers of
real (non-padding) tokens. See `docs/distributed.md`.

Gradient clipping: the Keras optimizer clips (`clipnorm`, `clipvalue`,
`global_clipnorm`) each replica's gradient *before* the all-reduce, so
with clipping active a distributed step differs from a single-device step.
"""

from kerasseq._validation import check_positive_int

STRATEGIES = ("auto", "default", "mirrored", "multi_worker")


def get_strategy(name="auto", devices=None):
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

    Returns:
        A `tf.distribute.Strategy`; use `with strategy.scope():` around model
        creation and `compile`.

    Example:

    >>> strategy = get_strategy("default")
    >>> strategy.num_replicas_in_sync
    1
    """
    import tensorflow as tf

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
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()


def pad_batches_to_multiple(dataset, multiple):
    """Pad every teacher-forcing batch with neutral rows to a multiple of `multiple`.

    Keras 3.15 (`TensorFlowTrainer._maybe_symbolic_build`) averages the first
    batch of `fit` / `evaluate` across the replicas to build the model
    symbolically; that fails ("Inputs to operation AddN ... must have the same
    size and shape") when the batch size is not a multiple of the number of
    replicas, as for the last, partial batch of a bucket. Pad the batches
    with this function under a strategy with several replicas.

    A neutral row is source `[END_ID, PAD_ID, ...]`, target input
    `[START_ID, PAD_ID, ...]` and target output all `PAD_ID`: it has no real
    target token, so it adds nothing to `MaskedSparseCategoricalCrossentropy`
    (its gradient is exactly zero) nor to `MaskedTokenAccuracy`. Only the
    running mean of the reported loss, which Keras weights by rows per
    batch, sees the extra rows.

    Args:
        dataset: `tf.data.Dataset` of `((source_ids, target_in_ids),
            target_out_ids)` batches, as built by `kerasseq.data.make_dataset`.
        multiple: int >= 1, usually `strategy.num_replicas_in_sync`.

    Returns:
        The padded `tf.data.Dataset` (unchanged when `multiple == 1`).
    """
    import tensorflow as tf

    from kerasseq.data.tokenizer import END_ID, START_ID

    multiple = check_positive_int("multiple", multiple)
    if int(multiple) == 1:
        return dataset

    def neutral_rows(ids, count, first_id):
        first = tf.fill([count, 1], tf.cast(first_id, ids.dtype))  # (count, 1)
        rest = tf.zeros([count, tf.shape(ids)[1] - 1], ids.dtype)  # (count, length - 1)
        return tf.concat([ids, tf.concat([first, rest], axis=1)], axis=0)

    def pad(inputs, target_out):
        source_ids, target_in = inputs
        count = (-tf.shape(target_out)[0]) % multiple
        padded_out = tf.concat([target_out, tf.zeros([count, tf.shape(target_out)[1]],
                                                     target_out.dtype)], axis=0)
        return (neutral_rows(source_ids, count, END_ID),
                neutral_rows(target_in, count, START_ID)), padded_out  # (batch_size + count, ...)

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)
