"""`DistributedTrainer` in one process: the same training as `model.fit`, Keras callbacks, errors.

The two-worker runs are in tests/training/test_multi_worker.py; here the
loop itself (epochs, callbacks, History, validation, neutral filler batches)
is compared with Keras' `fit` under the default strategy.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.data import TextTokenizer, make_dataset
from kerasseq.models import build_rnn_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy
from kerasseq.training.distribute import get_strategy
from kerasseq.training.trainer import DistributedTrainer, sharded_dataset_fn

PAIRS = [("cat", "K AE T"), ("dog", "D AO G"), ("cab", "K AE B"), ("god", "G AA D"),
         ("tag", "T AE G"), ("bat", "B AE T"), ("tab", "T AE B"), ("act", "AE K T"),
         ("at", "AE T"), ("to", "T UW")]
WORDS = TextTokenizer.from_texts([s for s, _ in PAIRS], split="character")
PHONEMES = TextTokenizer.from_texts([t for _, t in PAIRS], split="whitespace")


def compiled_model(strategy=None):
    strategy = strategy or get_strategy("default")
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = build_rnn_seq2seq(embedding_dim=4, units=8, source_tokenizer=WORDS,
                                  target_tokenizer=PHONEMES)
        model.compile(optimizer=keras.optimizers.Adam(1e-2, clipnorm=1.0),
                      loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
                      metrics=[MaskedTokenAccuracy()])
    return model


@functools.lru_cache(maxsize=None)
def dataset(known_length=False):
    # One Dataset object per variant for the whole file: make_dataset costs 1-2
    # CPU-s (tf.data traces its map functions), and a Dataset is an immutable,
    # here unshuffled description that every fit iterates afresh.
    data = make_dataset(PAIRS, WORDS, PHONEMES, batch_size=4, shuffle=False,
                        bucket_boundaries=[4])
    # Keras' fit on a dataset of unknown length counts one optimizer iteration
    # more after the first epoch (it runs into the end of the data once), which
    # changes Adam's bias correction; with the length known it does not.
    return data.apply(tf.data.experimental.assert_cardinality(3)) if known_length else data


def test_fit_equals_keras_fit_with_validation_and_callbacks(tmp_path):
    reference = compiled_model()
    expected = reference.fit(dataset(known_length=True), validation_data=dataset(), epochs=3,
                             verbose=0).history
    model = compiled_model()
    csv_path = tmp_path / "history.csv"
    seen = []

    class Batches(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append((batch, sorted(logs)))

    history = DistributedTrainer(model).fit(
        dataset(), validation_data=dataset(), epochs=3, verbose=0,
        callbacks=[keras.callbacks.CSVLogger(str(csv_path)), Batches()])
    assert isinstance(history, keras.callbacks.History) and history.epoch == [0, 1, 2]
    assert sorted(history.history) == sorted(expected)
    for name, values in expected.items():
        np.testing.assert_allclose(history.history[name], values, rtol=1e-5, atol=1e-6)
    for a, b in zip(model.weights, reference.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    assert csv_path.read_text().count("\n") == 4  # header + 3 epochs
    assert seen[0] == (0, ["loss", "token_accuracy"]) and len(seen) == 3 * 3  # 3 batches/epoch


@pytest.mark.slow
def test_fit_on_guided_batches_equals_keras_fit():
    # A global dataset of guided-alignment batches (dict inputs with links):
    # the neutral filler DistributedTrainer appends is built for dicts too
    # (it was tiled as a pair before, a KeyError before the first step).
    from kerasseq.models import build_transformer_seq2seq

    links = [[(j, j) for j in range(min(len(s), len(t.split())))] for s, t in PAIRS]

    def guided_model():
        keras.utils.set_random_seed(0)
        model = build_transformer_seq2seq(
            source_tokenizer=WORDS, target_tokenizer=PHONEMES, num_layers=1, d_model=8,
            num_heads=2, dff=16, dropout=0.0, max_positions=8, guided_alignment_weight=1.0,
            guided_alignment_layer=0, guided_alignment_head=0)
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss=MaskedSparseCategoricalCrossentropy())
        return model

    data = make_dataset(PAIRS, WORDS, PHONEMES, batch_size=4, shuffle=False, alignments=links)
    assert isinstance(data.element_spec[0], dict)
    reference = guided_model()
    expected = reference.fit(data, epochs=1, verbose=0).history["loss"]
    model = guided_model()
    history = DistributedTrainer(model).fit(data, epochs=1, verbose=0).history
    np.testing.assert_allclose(history["loss"], expected, rtol=1e-5)
    for a, b in zip(model.weights, reference.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


def test_dataset_function_and_early_stopping():
    model = compiled_model()
    data = sharded_dataset_fn(PAIRS, WORDS, PHONEMES, global_batch_size=4, shuffle=False)
    # mode="max" on a falling loss: epoch 1 is no improvement, so training stops there.
    stop = keras.callbacks.EarlyStopping(monitor="loss", mode="max", patience=0)
    history = DistributedTrainer(model).fit(data, epochs=5, verbose=0, callbacks=[stop])
    assert history.epoch == [0, 1] and stop.stopped_epoch == 1
    evaluation = DistributedTrainer(model).evaluate(data, verbose=0)
    expected = model.evaluate(dataset(), verbose=0, return_dict=True)
    assert evaluation == pytest.approx(expected, rel=1e-5)


def test_errors_are_specific():
    with pytest.raises(ValueError, match="compiled with an optimizer"):
        DistributedTrainer(build_rnn_seq2seq(embedding_dim=4, units=8, source_tokenizer=WORDS,
                                             target_tokenizer=PHONEMES))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    model = compiled_model()  # one model for the three errors: each is raised before a step
    with pytest.raises(ValueError, match="inside `with strategy.scope\\(\\):`"):
        DistributedTrainer(model, strategy)
    with pytest.raises(ValueError, match="infinite"):
        DistributedTrainer(model).fit(dataset().repeat(), epochs=1, verbose=0)
    with pytest.raises(TypeError, match="tf.data.Dataset of global batches"):
        DistributedTrainer(model).fit([1, 2, 3], epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"global_batch_size must be a multiple of the number "
                                         r"of replicas \(2\), e.g. 2. Received: global_batch_size=3"):
        data = sharded_dataset_fn(PAIRS, WORDS, PHONEMES, global_batch_size=3)
        data(tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                        num_replicas_in_sync=2))


def test_scheduled_sampling_and_a_schedule_follow_the_trainer():
    from kerasseq.training import ScheduledSampling

    def build():
        keras.utils.set_random_seed(0)
        model = build_rnn_seq2seq(embedding_dim=4, units=8, source_tokenizer=WORDS,
                                  target_tokenizer=PHONEMES, sampling_probability=0.0)
        schedule = keras.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=2, decay_rate=0.5)
        model.compile(optimizer=keras.optimizers.Adam(schedule),
                      loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
        return model

    sampling = ScheduledSampling(schedule="linear", decay=0.5, max_probability=1.0)
    model = build()
    history = DistributedTrainer(model).fit(dataset(), epochs=2, verbose=0, callbacks=[sampling])
    # linear: teacher forcing 1 - 0.5 i, so the sampling probability of epoch 1 is 0.5
    probabilities = [float(v.numpy()) for v in model.weights if "sampling_probability" in v.path]
    assert probabilities and all(p == pytest.approx(0.5) for p in probabilities)
    # the learning-rate schedule advanced with the optimizer's iterations (6 steps)
    assert int(model.optimizer.iterations.numpy()) == 6
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(1e-2 * 0.5 ** 3, rel=1e-5)
    assert len(history.history["loss"]) == 2


@pytest.mark.slow
def test_resumes_at_initial_epoch_which_the_backup_checks(tmp_path):
    """Like `model.fit`: the trainer starts at `initial_epoch` (= the backup's
    `completed_epochs()`), the backup restores and checks it; the model is left
    as fit found it (a later fit starts afresh)."""
    from kerasseq.training.checkpoints import AtomicBackupAndRestore

    backup_dir = str(tmp_path / "backup")
    model = compiled_model()
    first = AtomicBackupAndRestore(backup_dir, delete_checkpoint=False)
    history = DistributedTrainer(model).fit(dataset(), epochs=2, verbose=0, callbacks=[first])
    assert history.epoch == [0, 1] and first.restored_epoch is None
    resumed = AtomicBackupAndRestore(backup_dir, delete_checkpoint=False)
    model = compiled_model()
    trainer = DistributedTrainer(model)  # the refused fits and the resumed one: one trainer
    with pytest.raises(ValueError, match="fit started at epoch 0.* pass initial_epoch=2"):
        trainer.fit(dataset(), epochs=4, verbose=0, callbacks=[resumed])
    assert int(model.optimizer.iterations.numpy()) == 6  # restored; no step ran
    history = trainer.fit(dataset(), epochs=4, verbose=0, callbacks=[resumed],
                          initial_epoch=resumed.completed_epochs())
    assert resumed.restored_epoch == 2 and history.epoch == [2, 3]
    assert resumed.completed_epochs() == 4 and int(model.optimizer.iterations.numpy()) == 12
    assert model.fit(dataset(known_length=True), epochs=1, verbose=0).epoch == [0]
    with pytest.raises(ValueError, match="AtomicBackupAndRestore and initial_epoch="):
        trainer.fit(  # refused before any step: the trained model will do
            dataset(), epochs=1, verbose=0,
            callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path / "keras_backup"))])
