import collections

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.data import (
    END_ID,
    PAD_ID,
    START_ID,
    UNK_ID,
    TextTokenizer,
    batch_shapes,
    make_dataset,
    make_source_dataset,
)

WORDS = ["cat", "act", "tact", "at", "a", "cattac", "tac", "ca", "attaccat", "t"]
PHONES = {"a": "AE", "c": "K", "t": "T"}
PAIRS = [(word, " ".join(PHONES[ch] for ch in word)) for word in WORDS]


@pytest.fixture(scope="module")
def tokenizers():
    source = TextTokenizer(vocabulary=["a", "c", "t"])  # a=4, c=5, t=6
    target = TextTokenizer(
        vocabulary=["AE", "K", "T"], split="whitespace"
    )  # AE=4, K=5, T=6
    return source, target


def _examples(dataset):
    """Unpadded ((source, target_in), target_out) lists from every batch
    (without the neutral rows of `fixed_shapes`)."""
    examples = []
    for (source, target_in), target_out in dataset:
        for s, ti, to in zip(
            source.numpy(), target_in.numpy(), target_out.numpy(), strict=True
        ):
            if not to.any():  # a neutral row: labels all padding
                continue
            examples.append(
                (
                    tuple(s[s != PAD_ID]),
                    tuple(ti[ti != PAD_ID]),
                    tuple(to[to != PAD_ID]),
                )
            )
    return examples


def test_exact_ids_and_teacher_forcing(tokenizers):
    source, target = tokenizers
    dataset = make_dataset([("cat", "K AE T")], source, target, shuffle=False,
                           fixed_shapes=False)
    (source_ids, target_in), target_out = next(iter(dataset))
    assert source_ids.dtype == target_in.dtype == target_out.dtype == tf.int32
    np.testing.assert_array_equal(source_ids.numpy(), [[5, 4, 6]])
    np.testing.assert_array_equal(target_in.numpy(), [[START_ID, 5, 4, 6]])
    np.testing.assert_array_equal(target_out.numpy(), [[5, 4, 6, END_ID]])
    # target_in is target_out shifted right by one, starting with START.
    np.testing.assert_array_equal(target_in.numpy()[:, 1:], target_out.numpy()[:, :-1])


def test_padding_and_unknown_tokens(tokenizers):
    source, target = tokenizers
    pairs = [("cat", "K AE T"), ("dog", "D AO G"), ("a", "AE")]
    (source_ids, target_in), target_out = next(
        iter(make_dataset(pairs, source, target, shuffle=False, fixed_shapes=False))
    )
    np.testing.assert_array_equal(
        source_ids.numpy(), [[5, 4, 6], [UNK_ID] * 3, [4, 0, 0]]
    )
    np.testing.assert_array_equal(
        target_in.numpy(), [[2, 5, 4, 6], [2, UNK_ID, UNK_ID, UNK_ID], [2, 4, 0, 0]]
    )
    np.testing.assert_array_equal(
        target_out.numpy(), [[5, 4, 6, 3], [UNK_ID, UNK_ID, UNK_ID, 3], [4, 3, 0, 0]]
    )


def test_shuffle_reproducible_with_seed_and_no_pair_lost(tokenizers):
    source, target = tokenizers

    def order(seed):
        dataset = make_dataset(PAIRS, source, target, batch_size=3, seed=seed)
        return [tuple(example[0]) for example in _examples(dataset)]

    first = order(seed=7)
    assert first == order(seed=7)
    expected = [tuple(source.encode(word).numpy()) for word in WORDS]
    assert collections.Counter(first) == collections.Counter(expected)
    assert first != expected or order(seed=8) != expected  # it does shuffle


def test_reshuffles_every_epoch_without_losing_pairs(tokenizers):
    source, target = tokenizers
    dataset = make_dataset(PAIRS, source, target, batch_size=4, seed=3)
    epochs = [_examples(dataset) for _ in range(3)]
    for examples in epochs:
        assert len(examples) == len(PAIRS)
        assert len(set(examples)) == len(PAIRS)
    assert len({tuple(examples) for examples in epochs}) > 1


def test_bucketing_groups_lengths(tokenizers):
    source, target = tokenizers
    dataset = make_dataset(
        PAIRS, source, target, batch_size=2, seed=0, bucket_boundaries=[3, 5],
        fixed_shapes=False,
    )
    examples = []
    for (source_ids, target_in), _ in dataset:
        # example length = max(source length, target length + 1)
        lengths = np.maximum(
            np.sum(source_ids.numpy() != PAD_ID, axis=1),
            np.sum(target_in.numpy() != PAD_ID, axis=1),
        )
        buckets = np.digitize(lengths, [3, 5])
        assert len(set(buckets)) == 1, lengths
        examples.extend(source_ids.numpy().tolist())
    assert len(examples) == len(PAIRS)
    auto = make_dataset(PAIRS, source, target, batch_size=2, bucket_boundaries="auto")
    assert len(_examples(auto)) == len(PAIRS)
    with pytest.raises(ValueError, match="bucket_boundaries"):
        make_dataset(PAIRS, source, target, bucket_boundaries=[5, 3])


def test_max_lengths_drop_long_pairs_and_drop_remainder(tokenizers):
    source, target = tokenizers
    dataset = make_dataset(
        PAIRS, source, target, shuffle=False, max_source_length=3, max_target_length=3
    )
    kept = [example[0] for example in _examples(dataset)]
    expected = [w for w in WORDS if len(w) <= 2]  # target_in = len + 1 <= 3
    assert kept == [tuple(source.encode(w).numpy()) for w in expected]
    batches = list(
        make_dataset(PAIRS, source, target, batch_size=4, drop_remainder=True)
    )
    assert len(batches) == 2 and all(b[1].shape[0] == 4 for b in batches)


def test_empty_pairs_and_bad_arguments(tokenizers):
    source, target = tokenizers
    with pytest.raises(ValueError, match="pairs"):
        make_dataset([], source, target)
    with pytest.raises(ValueError, match="pairs.*index 0"):
        make_dataset([("cat",)], source, target)
    with pytest.raises(ValueError, match="batch_size.*Received: batch_size=0"):
        make_dataset(PAIRS, source, target, batch_size=0)


def test_make_source_dataset_keeps_order(tokenizers):
    source, _ = tokenizers
    batches = [
        batch.numpy().tolist()
        for batch in make_source_dataset(["cat", "a", "dog"], source, batch_size=2)
    ]
    assert batches == [[[5, 4, 6], [4, 0, 0]], [[1, 1, 1]]]
    with pytest.raises(ValueError, match="texts"):
        make_source_dataset("cat", source)


FIT_WORDS = ["cat", "cats", "dog", "dogs", "a", "an", "the", "tiger", "zebra", "ox", "bee"]
FIT_PAIRS = [(word, word[::-1]) for word in FIT_WORDS]


@pytest.fixture(scope="module")
def fit_model_and_data():
    """One compiled kerasseq model for every case of the fit test below.

    Each case fits it again on its own dataset: Keras keeps the traced train and
    test functions across fits (traced anew only for new batch shapes), so the
    six cases cost about one model build and a few traces instead of six. The
    validation data is the same in every case: built once too (make_dataset
    traces its map functions, 1-2 CPU-s).
    """
    from kerasseq.models import build_rnn_seq2seq
    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    source = TextTokenizer.from_texts([s for s, _ in FIT_PAIRS], split="character")
    target = TextTokenizer.from_texts([t for _, t in FIT_PAIRS], split="character")
    model = build_rnn_seq2seq(source_vocab_size=source.vocabulary_size,
                              target_vocab_size=target.vocabulary_size, embedding_dim=4, units=4)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    validation = make_dataset(FIT_PAIRS[:4], source, target, batch_size=2, shuffle=False)
    return model, source, target, validation


@pytest.mark.parametrize("buckets", [None, "auto", pytest.param([4, 6], marks=pytest.mark.slow)])
@pytest.mark.parametrize("drop_remainder", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_fit_on_make_dataset_warns_nothing(buckets, drop_remainder, fit_model_and_data):
    """The dataset declares its number of batches (no "ran out of data"), and a
    kerasseq model's fit does not pass Keras' ignored shuffle=True (no warning)."""
    import warnings

    model, source, target, validation = fit_model_and_data
    data = make_dataset(FIT_PAIRS, source, target, batch_size=2, seed=0,
                        bucket_boundaries=buckets, max_target_length=6,
                        drop_remainder=drop_remainder)
    counted = sum(1 for _ in data)
    assert int(data.cardinality()) == counted  # declared == real, with the length filter
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history = model.fit(data, validation_data=validation, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


# ---------------------------------------------------------------- fixed shapes
def _neutral(source_row, target_in_row, target_out_row, first_row):
    """A neutral row of `pad_batch`: row 0's inputs, labels all padding."""
    return (np.array_equal(source_row, first_row[0]) and np.array_equal(target_in_row, first_row[1])
            and not target_out_row.any())


@pytest.mark.parametrize("buckets", [None, "auto", [3, 5]])
def test_fixed_shapes_pad_rows_with_neutral_rows_and_lengths_to_edges(tokenizers, buckets):
    """Every batch has batch_size rows and one length out of the edges; the real
    rows are exactly the examples of the unpadded pipeline, nothing else."""
    source, target = tokenizers
    fixed = make_dataset(PAIRS, source, target, batch_size=4, seed=0, bucket_boundaries=buckets)
    tight = make_dataset(PAIRS, source, target, batch_size=4, seed=0, bucket_boundaries=buckets,
                         fixed_shapes=False)
    # Lengths max(source, target + 1) run 2..9: one edge (9), or with [3, 5] the
    # bucket edges 2 and 4 and the longest example, 9.
    edges = {9} if buckets != [3, 5] else {2, 4, 9}
    real, neutral = [], 0
    for (source_ids, target_in), target_out in fixed:
        assert source_ids.shape == target_in.shape == target_out.shape
        assert source_ids.shape[0] == 4 and source_ids.shape[1] in edges
        rows = list(zip(source_ids.numpy(), target_in.numpy(), target_out.numpy(), strict=True))
        for row in rows:
            if _neutral(*row, rows[0]):
                neutral += 1
            else:
                real.append(tuple(tuple(ids[ids != PAD_ID]) for ids in row))
    assert sorted(real) == sorted(_examples(tight))
    assert len(real) == len(PAIRS) and neutral == 4 * len(list(fixed)) - len(PAIRS)
    assert int(fixed.cardinality()) == len(list(fixed))
    if buckets != "auto":  # "auto" buckets by the edges here, by percentiles there
        assert int(fixed.cardinality()) == int(tight.cardinality())
    assert sum(batch_shapes(fixed).values()) == len(list(fixed))
    assert len(batch_shapes(fixed)) <= len(edges)


def test_fixed_shapes_argument_is_checked(tokenizers):
    source, target = tokenizers
    with pytest.raises(ValueError, match="fixed_shapes must be True or False. Received: "
                                         "fixed_shapes='yes'"):
        make_dataset(PAIRS, source, target, fixed_shapes="yes")


@pytest.mark.slow
def test_demo_data_trains_on_few_shapes():
    """The README's data (the first 10,000 CMUdict training words, batch 64,
    bucket_boundaries="auto"): at most 8 batch shapes an epoch, so Keras' fit
    compiles at most 8 XLA programs (19 with the old percentile buckets)."""
    from kerasseq.data import entries_to_pairs, load_cmudict, load_cmudict_tokenizers

    train = load_cmudict("train")[:10_000]
    words, phonemes = load_cmudict_tokenizers(train)
    pairs = entries_to_pairs(train)
    shapes = batch_shapes(make_dataset(pairs, words, phonemes, bucket_boundaries="auto", seed=0))
    assert len(shapes) <= 8, shapes
    assert {rows for (rows, _), *_ in shapes} == {64}
    unbounded = batch_shapes(make_dataset(pairs, words, phonemes, bucket_boundaries="auto",
                                          seed=0, fixed_shapes=False))
    assert len(unbounded) > 8  # what the bound is for
    assert sum(shapes.values()) <= sum(unbounded.values())  # no batch more


def _model_for_equal_loss(kind):
    import keras

    from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq

    keras.utils.set_random_seed(0)
    if kind == "rnn":
        return build_rnn_seq2seq(8, 8, embedding_dim=4, units=6, bidirectional=True)
    if kind == "transformer":
        return build_transformer_seq2seq(8, 8, num_layers=1, d_model=8, num_heads=2, dff=8,
                                         dropout=0.0, max_positions=16)
    return build_transformer_seq2seq(8, 8, num_layers=2, d_model=8, num_heads=2, dff=8,
                                     dropout=0.0, max_positions=16, guided_alignment_weight=1.0)


@pytest.mark.parametrize("kind", ["rnn", "transformer", "guided_transformer"])
def test_padded_batches_have_the_unpadded_loss_and_gradients(tokenizers, kind):
    """The same examples batched both ways (no shuffle, no buckets: the same
    rows in the same batches): equal loss and gradients, for an RNN, a
    Transformer and a guided Transformer (whose links are padded too)."""
    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    source, target = tokenizers
    links = [[(i, i) for i in range(len(word))] for word in WORDS]
    model = _model_for_equal_loss(kind)
    model.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    guided = getattr(model, "guided_head", None) is not None
    options = dict(batch_size=4, shuffle=False, alignments=links if guided else None)
    fixed = list(make_dataset(PAIRS, source, target, **options))
    tight = list(make_dataset(PAIRS, source, target, fixed_shapes=False, **options))
    assert len(fixed) == len(tight) == 3
    assert fixed[-1][1].shape[0] == 4 and tight[-1][1].shape[0] == 2  # 10 = 4 + 4 + 2
    for (x_fixed, y_fixed), (x_tight, y_tight) in zip(fixed, tight, strict=True):
        assert y_fixed.shape[1] == 9 > y_tight.shape[1] or y_tight.shape[1] == 9
        results = []
        for x, y in ((x_fixed, y_fixed), (x_tight, y_tight)):
            with tf.GradientTape() as tape:
                _, loss = model.compute_predictions_and_loss(x, y, training=False)
            results.append((loss, tape.gradient(loss, model.trainable_weights)))
        (loss_fixed, grads_fixed), (loss_tight, grads_tight) = results
        assert float(loss_tight) > 0
        np.testing.assert_allclose(float(loss_fixed), float(loss_tight), rtol=1e-5)
        for g_fixed, g_tight in zip(grads_fixed, grads_tight, strict=True):
            np.testing.assert_allclose(tf.convert_to_tensor(g_fixed).numpy(),
                                       tf.convert_to_tensor(g_tight).numpy(),
                                       rtol=1e-4, atol=1e-6)


def test_pad_batch_refuses_fewer_rows_or_columns_than_the_batch():
    from kerasseq.data import pad_batch

    source = tf.constant([[5, 6, 0], [7, 8, 9]], tf.int32)
    target_in = tf.constant([[2, 5], [2, 6]], tf.int32)
    target_out = tf.constant([[5, 3], [6, 3]], tf.int32)
    (padded_source, padded_in), padded_out = pad_batch((source, target_in), target_out, 3, 4)
    np.testing.assert_array_equal(padded_source, [[5, 6, 0, 0], [7, 8, 9, 0], [5, 6, 0, 0]])
    np.testing.assert_array_equal(padded_in, [[2, 5, 0, 0], [2, 6, 0, 0], [2, 5, 0, 0]])
    np.testing.assert_array_equal(padded_out, [[5, 3, 0, 0], [6, 3, 0, 0], [0, 0, 0, 0]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="rows must be >= the batch's row"):
        pad_batch((source, target_in), target_out, 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="length must be >= the batch's"):
        pad_batch((source, target_in), target_out, 2, 2)


@pytest.mark.parametrize("fixed_shapes", [True, False])
def test_make_dataset_pads_rows_to_batch_multiple_itself(tokenizers, fixed_shapes):
    """`batch_multiple=2`: every batch's rows are a multiple of 2 (batch_size 3 -> 4
    with fixed shapes; a batch's own count rounded up without), the added rows
    are neutral (row 0's inputs, no label), and the real rows are exactly the
    examples; `without_neutral_rows` gives back each batch of batch_multiple=1."""
    from kerasseq.data.pipeline import without_neutral_rows

    source, target = tokenizers
    options = dict(batch_size=3, shuffle=False, fixed_shapes=fixed_shapes)
    padded = make_dataset(PAIRS, source, target, batch_multiple=2, **options)
    plain = make_dataset(PAIRS, source, target, **options)
    assert int(padded.cardinality()) == int(plain.cardinality()) == len(list(padded))
    for batch, plain_batch in zip(padded.as_numpy_iterator(), plain.as_numpy_iterator(),
                                  strict=True):
        (source_ids, target_in), target_out = batch
        real = int(target_out.any(axis=1).sum())
        assert len(target_out) == (4 if fixed_shapes else real + real % 2)
        for index in range(real, len(target_out)):
            assert _neutral(source_ids[index], target_in[index], target_out[index],
                            (source_ids[0], target_in[0]))
        (kept_source, kept_in), kept_out = without_neutral_rows(batch)
        (plain_source, plain_in), plain_out = without_neutral_rows(plain_batch)
        for kept, expected in ((kept_source, plain_source), (kept_in, plain_in),
                               (kept_out, plain_out)):
            np.testing.assert_array_equal(kept, expected)
    with pytest.raises(ValueError, match="batch_multiple must be >= 1"):
        make_dataset(PAIRS, source, target, batch_multiple=0)


# ------------------------------------------------------- batches by token count
def _long_pairs(count=60, longest=20, seed=3):
    """Pairs of CMUdict-like words of 1..`longest` letters, every length present."""
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list("act"), size=1 + index % longest)) for index in range(count)]
    return [(word, " ".join(PHONES[ch] for ch in word)) for word in words]


def test_batch_tokens_gives_each_bucket_its_rows_and_loses_no_pair(tokenizers):
    """batch_tokens=24 with the fixed-shape buckets: lengths max(source, target + 1)
    run 2..21, padded to the edges 8, 12, 16 and 21, so the buckets' batches hold
    24 // 8 = 3, 2, 1 and 1 rows: rows x length <= 24 (or one row); the real
    rows are every pair once; the declared cardinality is the count of batches."""
    source, target = tokenizers
    pairs = _long_pairs()
    dataset = make_dataset(pairs, source, target, seed=0, bucket_boundaries="auto",
                           batch_tokens=24)
    expected_rows = {8: 3, 12: 2, 16: 1, 21: 1}
    real, shapes = [], collections.Counter()
    for (source_ids, target_in), target_out in dataset.as_numpy_iterator():
        rows, length = target_out.shape
        shapes[(rows, length)] += 1
        assert source_ids.shape == target_in.shape == (rows, length)
        assert rows == expected_rows[length]
        for s, ti, to in zip(source_ids, target_in, target_out, strict=True):
            if to.any():
                real.append((tuple(s[s != PAD_ID]), tuple(ti[ti != PAD_ID]),
                             tuple(to[to != PAD_ID])))
    everything = make_dataset(pairs, source, target, shuffle=False, fixed_shapes=False)
    assert sorted(real) == sorted(_examples(everything))
    assert set(shapes) == {(rows, length) for length, rows in expected_rows.items()}
    assert int(dataset.cardinality()) == sum(shapes.values())
    # a batch_size caps the rows; each bucket keeps one shape
    capped = make_dataset(pairs, source, target, batch_size=2, seed=0,
                          bucket_boundaries="auto", batch_tokens=24)
    assert {shape[0] for shape in batch_shapes(capped)} == {(2, 8), (2, 12), (1, 16), (1, 21)}
    assert int(capped.cardinality()) == len(list(capped))


def test_batch_tokens_without_fixed_shapes_and_with_links(tokenizers):
    """Buckets [5, 10] without fixed shapes: a batch of bucket [1, 5) pads to at
    most 4 columns and holds up to 20 // 4 = 5 rows, of [5, 10) 20 // 9 = 2, the
    last (up to the longest, 21) 1. With reference links each batch's links
    have its rows and lengths."""
    source, target = tokenizers
    pairs = _long_pairs()
    dataset = make_dataset(pairs, source, target, shuffle=False, bucket_boundaries=[5, 10],
                           fixed_shapes=False, batch_tokens=20)
    seen = 0
    for (source_ids, _target_in), target_out in dataset.as_numpy_iterator():
        rows, length = len(target_out), max(source_ids.shape[1], target_out.shape[1])
        assert rows <= (5 if length <= 4 else 2 if length <= 9 else 1)
        assert rows * length <= 20 or rows == 1
        seen += rows
    assert seen == len(pairs) and int(dataset.cardinality()) == len(list(dataset))
    links = [np.array([[0, 0]])] * len(pairs)  # first target piece -> first source piece
    guided = make_dataset(pairs, source, target, seed=1, bucket_boundaries="auto",
                          batch_tokens=24, alignments=links)
    for inputs, target_out in guided.as_numpy_iterator():
        rows, length = target_out.shape
        assert inputs["alignment_links"].shape == (rows, length, length)
        real = target_out.any(axis=1)
        assert (inputs["alignment_links"][real, 0, 0] == 1).all()
        assert inputs["alignment_links"].sum() == real.sum()


def test_batch_tokens_is_checked(tokenizers):
    source, target = tokenizers
    # "auto" over examples no longer than 9: one bucket, padded to the longest (9)
    short = make_dataset(PAIRS, source, target, seed=0, bucket_boundaries="auto",
                         batch_tokens=20)
    assert set(batch_shapes(short)) == {((2, 9), (2, 9), (2, 9))}  # 20 // 9 = 2 rows
    assert len(_examples(short)) == len(PAIRS) == 2 * int(short.cardinality())
    # a boundary of 1 (an empty first bucket) pads to at least one column
    ones = make_dataset(PAIRS, source, target, bucket_boundaries=[1, 5], batch_tokens=8,
                        fixed_shapes=False)
    assert sorted(_examples(ones)) == sorted(_examples(
        make_dataset(PAIRS, source, target, shuffle=False, fixed_shapes=False)))
    with pytest.raises(ValueError, match="batch_tokens needs bucket_boundaries"):
        make_dataset(PAIRS, source, target, batch_tokens=64)
    with pytest.raises(ValueError, match="batch_tokens must be >= 1"):
        make_dataset(PAIRS, source, target, bucket_boundaries="auto", batch_tokens=0)
