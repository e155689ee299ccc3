"""`kerasseq.training.TrainingRun`: a run directory's files and their rules.

The command-line side (a killed `kerasseq train` resumes, a rerun continues or
does nothing) is tested end to end in tests/test_resume.py.
"""

import os

import numpy as np
import pytest

from kerasseq.training.checkpoints import read_history


def test_overwrite_starts_over_and_bad_output_dirs_are_errors(tmp_path):
    from kerasseq.training import TrainingRun

    run = tmp_path / "run"
    run.mkdir()
    for name in ("model.keras", "summary.json", "best.keras", "history.csv", "tokenizers.json",
                 "notes.txt"):
        (run / name).write_text("x")
    (run / "backup").mkdir()
    (run / "backup" / "w.weights.h5").write_text("x")
    (run / "backup" / "training_metadata.json").write_text('{"epoch": 3, "weights": "w.weights.h5"}')
    assert TrainingRun(run).completed_epochs() == 3
    assert TrainingRun(run, overwrite=True).completed_epochs() == 0
    assert sorted(os.listdir(run)) == ["notes.txt"]  # only the run's own files go
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    with pytest.raises(ValueError, match="exists and is not a directory") as raised:
        TrainingRun(a_file)
    # a library error names the library's argument (the command line maps it to its flag)
    assert raised.value.field == "output_dir" and "--" not in str(raised.value)
    assert a_file.read_text() == "keep me"
    # A finished run without its backup cannot be continued, only started over.
    (run / "model.keras").write_text("x")
    (run / "summary.json").write_text("{}")
    with pytest.raises(ValueError, match="without the backup/ needed to continue it"):
        TrainingRun(run).status(epochs=2)


def test_training_run_in_python_resumes_continues_and_refuses_nan(tmp_path):
    """The guarantees of `kerasseq train`, for a Python user of TrainingRun."""
    import keras
    import numpy as np
    import tensorflow as tf

    from kerasseq.training import NonFiniteLossError, TrainingRun

    def compiled():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
        return model

    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    run = TrainingRun(tmp_path / "run")
    assert run.status(epochs=2) == "new"
    model = compiled()
    run.fit(model, data, data, epochs=2, verbose=0)
    run.finish(model, {"epochs": 2})
    assert run.status(epochs=2) == "complete" and run.status(epochs=3) == "resume"
    # Continuing: a fresh model picks up the backup; only the new epoch runs.
    model = compiled()
    history = run.fit(model, data, data, epochs=3, verbose=0)
    assert history.epoch == [2]
    assert read_history(run.history_path)["epoch"] == [0, 1, 2]
    # A NaN loss: nothing of the broken epoch is recorded, the message says what is kept.
    bad_x = x.copy()
    bad_x[10] = np.nan  # batch 2
    bad = tf.data.Dataset.from_tensor_slices((bad_x, y)).batch(8)
    with pytest.raises(NonFiniteLossError, match="epoch 4, batch 2.*keeps the 3 finished epoch"):
        run.fit(compiled(), bad, data, epochs=4, verbose=0)
    assert read_history(run.history_path)["epoch"] == [0, 1, 2] and run.completed_epochs() == 3
    # model.keras is never written with non-finite weights.
    before = open(run.model_path, "rb").read()
    model.layers[0].kernel.assign(np.full((3, 1), np.nan, "float32"))
    with pytest.raises(ValueError, match="NaN or inf weights"):
        run.finish(model, {})
    assert open(run.model_path, "rb").read() == before


def test_history_keeps_its_columns_when_a_resumed_run_logs_other_keys(tmp_path):
    # Keras' CSVLogger(append=True) writes the new run's columns under the old
    # header; HistoryCSVLogger rewrites the header to hold both instead.
    import csv

    import keras
    import numpy as np

    from kerasseq.training.checkpoints import HistoryCSVLogger

    path = str(tmp_path / "history.csv")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    first = model.fit(x, y, validation_data=(x, y), epochs=2, verbose=0,
                      callbacks=[HistoryCSVLogger(path)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])  # a metric more,
    second = model.fit(x, y, epochs=4, initial_epoch=2, verbose=0,  # no validation
                       callbacks=[HistoryCSVLogger(path)])

    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["epoch", "loss", "val_loss", "mae", "val_mae"]
    assert all(len(row) == 5 for row in rows)
    history = read_history(path)
    assert history["epoch"] == [0, 1, 2, 3]
    np.testing.assert_allclose(history["loss"], first.history["loss"] + second.history["loss"],
                               rtol=1e-5)
    np.testing.assert_allclose(history["val_loss"][:2], first.history["val_loss"], rtol=1e-5)
    np.testing.assert_allclose(history["mae"][2:], second.history["mae"], rtol=1e-5)
    assert np.isnan(history["mae"][:2]).all() and np.isnan(history["val_loss"][2:]).all()

    # The same keys again: plain appending, header unchanged.
    model.fit(x, y, epochs=5, initial_epoch=4, verbose=0, callbacks=[HistoryCSVLogger(path)])
    assert read_history(path)["epoch"] == [0, 1, 2, 3, 4]
    with open(path, newline="") as handle:
        assert next(csv.reader(handle)) == rows[0]


def test_history_file_is_what_keras_csv_logger_writes(tmp_path):
    """Same keys, fresh file and appended run: byte for byte Keras' CSVLogger."""
    import keras
    import numpy as np

    from kerasseq.training.checkpoints import HistoryCSVLogger

    ours, theirs = str(tmp_path / "ours.csv"), str(tmp_path / "keras.csv")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    for initial_epoch, epochs, validation in ((0, 2, (x, y)), (2, 3, (x, y))):
        model.fit(x, y, validation_data=validation, epochs=epochs, initial_epoch=initial_epoch,
                  verbose=0, callbacks=[HistoryCSVLogger(ours),
                                        keras.callbacks.CSVLogger(theirs, append=True)])
    with open(ours, "rb") as mine, open(theirs, "rb") as keras_file:
        assert mine.read() == keras_file.read()
    assert read_history(ours)["epoch"] == [0, 1, 2]


@pytest.mark.parametrize("best_epoch, kept_best", [(2, None), (0, 0.5)])
def test_files_of_epochs_that_run_again_are_discarded(tmp_path, best_epoch, kept_best):
    # What a kill between an epoch's files and its backup leaves (or a
    # multi-worker rollback to the epoch every worker backed up): the rows,
    # the epoch checkpoint and perhaps best.keras of epoch 2, backed up up to 2.
    from kerasseq.training import TrainingRun

    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    losses = [0.5, 0.7, 0.6]
    losses[best_epoch] = 0.5
    if best_epoch != 0:
        losses[0] = 0.8
    rows = [f"{epoch},1.0,{loss}" for epoch, loss in enumerate(losses)]
    (run_dir / "history.csv").write_text("epoch,loss,val_loss\n" + "\n".join(rows) + "\n")
    for number in (1, 2, 3):
        (run_dir / "checkpoints" / f"epoch_{number:03d}.keras").write_text("x")
    (run_dir / "best.keras").write_text("x")
    (run_dir / "notes.txt").write_text("x")

    threshold = TrainingRun(run_dir).discard_epochs_from(2)

    assert read_history(str(run_dir / "history.csv"))["epoch"] == [0, 1]
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["epoch_001.keras", "epoch_002.keras"]
    assert (run_dir / "best.keras").exists() == (kept_best is not None)
    assert threshold == kept_best
    assert (run_dir / "notes.txt").exists()


@pytest.mark.parametrize("best_written", ["after the backup", "before the backup"])
def test_best_model_newer_than_the_kept_backup_is_discarded(tmp_path, best_written):
    # The epoch that ends at the kept backup writes best.keras before its
    # backup file: a newer best.keras comes from an epoch that runs again,
    # even when a kill kept its history row from being written.
    import json

    from kerasseq.training import TrainingRun

    run_dir = tmp_path / "run"
    (run_dir / "backup").mkdir(parents=True)
    (run_dir / "history.csv").write_text("epoch,loss,val_loss\n0,1.0,0.9\n1,1.0,0.8\n")
    weights = run_dir / "backup" / "epoch-2.weights.h5"
    weights.write_text("x")
    (run_dir / "backup" / "training_metadata.json").write_text(
        json.dumps({"epoch": 2, "batch": 0, "weights": weights.name}))
    best = run_dir / "best.keras"
    best.write_text("x")
    backup_time = os.path.getmtime(weights)
    best_time = backup_time + 5 if best_written == "after the backup" else backup_time - 5
    os.utime(best, (best_time, best_time))

    threshold = TrainingRun(run_dir).discard_epochs_from(2)

    assert best.exists() == (best_written == "before the backup")
    assert threshold == (0.8 if best.exists() else None)
    assert read_history(str(run_dir / "history.csv"))["epoch"] == [0, 1]


def test_datasets_batches_are_a_multiple_of_the_replicas(tmp_path):
    """`TrainingRun.datasets` hands the strategy's replicas to `make_dataset`
    (`batch_multiple`): every batch of both splits splits evenly over them, the
    added rows carry no label; a batch size that does not split is refused."""
    import types

    from kerasseq.data import TextTokenizer
    from kerasseq.training import TrainingRun

    words = ["cat", "dog", "a", "tiger", "ox"]
    pairs = [(word, word[::-1]) for word in words]
    tokenizer = TextTokenizer.from_texts(words, split="character")
    run = TrainingRun(str(tmp_path), strategy=types.SimpleNamespace(num_replicas_in_sync=3))
    train, dev = run.datasets(pairs, pairs[:2], tokenizer, tokenizer, batch_size=6,
                              fixed_shapes=False)
    for data, examples in ((train, 5), (dev, 2)):  # (train: bucketed by length)
        labels = [target_out for _, target_out in data.as_numpy_iterator()]
        real = [int(batch.any(axis=1).sum()) for batch in labels]
        assert [len(batch) for batch in labels] == [count + (-count) % 3 for count in real]
        assert sum(real) == examples
    with pytest.raises(ValueError, match=r"batch_size must be a multiple of the number of "
                                         r"replicas \(3\).*Received: batch_size=4"):
        run.datasets(pairs, None, tokenizer, tokenizer, batch_size=4)


@pytest.mark.parametrize("fixed_shapes", [True, False])
def test_datasets_pass_fixed_shapes_to_both_splits(tmp_path, fixed_shapes):
    """`kerasseq train` asks for fixed shapes where fit compiles with XLA only."""
    from kerasseq.data import TextTokenizer, batch_shapes
    from kerasseq.training import TrainingRun

    words = ["cat", "dog", "a", "tiger", "ox"]
    pairs = [(word, word[::-1]) for word in words]
    tokenizer = TextTokenizer.from_texts(words, split="character")
    train, dev = TrainingRun(str(tmp_path)).datasets(pairs, pairs[:3], tokenizer, tokenizer,
                                                     batch_size=4, fixed_shapes=fixed_shapes)
    for data, examples in ((train, 5), (dev, 3)):
        rows = sorted(rows for ((rows, _), *_) in batch_shapes(data).elements())
        assert rows == ([4] * len(rows) if fixed_shapes else rows) and sum(rows) >= examples
        assert fixed_shapes or sum(rows) == examples


def test_datasets_by_token_count_are_make_datasets_and_refused_on_several_workers(tmp_path,
                                                                                   monkeypatch):
    """`batch_tokens` reaches `make_dataset`: the training batches equal its own
    (same seed), each bucket's rows `batch_tokens // length`, completed to a
    multiple of the replicas; dev batches keep 64 rows when no batch_size caps;
    several workers and a missing batch_size are refused, naming the argument."""
    import types

    from kerasseq.data import TextTokenizer, batch_shapes, make_dataset
    from kerasseq.training import TrainingRun

    words = ["a", "ox", "cat", "tiger", "giraffe", "hippopotamus", "dog", "eel", "bee", "yak"]
    pairs = [(word, word[::-1]) for word in words]
    tokenizer = TextTokenizer.from_texts(words, split="character")
    run = TrainingRun(str(tmp_path))
    train, dev = run.datasets(pairs, pairs, tokenizer, tokenizer, None, seed=3, batch_tokens=24)
    direct = make_dataset(pairs, tokenizer, tokenizer, None, seed=3, bucket_boundaries="auto",
                          batch_tokens=24)
    ours, theirs = list(train.as_numpy_iterator()), list(direct.as_numpy_iterator())
    assert len(ours) == len(theirs) > 1
    for (inputs, labels), (inputs2, labels2) in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(labels, labels2)
        np.testing.assert_array_equal(inputs[0], inputs2[0])
        assert len(labels) == max(1, 24 // labels.shape[1])
    assert {rows for ((rows, _), *_) in batch_shapes(dev).elements()} == {64}

    replicas = TrainingRun(str(tmp_path / "r"),
                           strategy=types.SimpleNamespace(num_replicas_in_sync=4))
    train, _ = replicas.datasets(pairs, None, tokenizer, tokenizer, None, batch_tokens=24)
    assert all(len(labels) % 4 == 0 for _, labels in train.as_numpy_iterator())
    with pytest.raises(ValueError, match="only with batch_tokens may it be None"):
        run.datasets(pairs, None, tokenizer, tokenizer, None)
    with pytest.raises(ValueError, match="batch_tokens must be"):
        run.datasets(pairs, None, tokenizer, tokenizer, None, batch_tokens=0)
    monkeypatch.setattr(TrainingRun, "multi_worker", property(lambda self: True))
    with pytest.raises(ValueError, match="batch_tokens works on one machine only"):
        run.datasets(pairs, None, tokenizer, tokenizer, 8, batch_tokens=24)
