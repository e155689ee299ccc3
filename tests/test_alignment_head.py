"""Tests for `kerasseq.alignment.ShiftedAlignmentHead` and `train_alignment_head`.

References: the model's own cross-attention heads (a head given a model
head's projection weights must return that head's attention, at the same
position with shift 0 and one position later with shift 1); a copy task
whose links are known by construction (the target is the source's words
in a random order, no word twice), where only the shifted head can know
which word it aligns; a save/load round trip.
"""

import keras
import numpy as np
import pytest

from kerasseq.alignment import (
    ShiftedAlignmentHead,
    align_ids,
    align_texts,
    attention_heads,
    train_alignment_head,
)
from kerasseq.data import START_ID, TextTokenizer
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq

WORDS = [f"w{i}" for i in range(12)]


def _pad(rows):
    out = np.zeros((len(rows), max(len(row) for row in rows)), np.int32)
    for index, row in enumerate(rows):
        out[index, :len(row)] = row
    return out


def _shuffled_pairs(count, seed):
    """Sentences of 3-7 distinct words; the target is the same words in a random
    order; the links `(source_word, target_word)` of each pair."""
    rng = np.random.default_rng(seed)
    sources, targets, links = [], [], []
    for _ in range(count):
        words = list(rng.choice(WORDS, size=int(rng.integers(3, 8)), replace=False))
        shuffled = list(rng.permutation(words))
        sources.append(" ".join(words))
        targets.append(" ".join(shuffled))
        links.append([(words.index(word), j) for j, word in enumerate(shuffled)])
    return sources, targets, links


@pytest.fixture(scope="module")
def shuffle_model():
    tokenizer = TextTokenizer.from_texts([" ".join(WORDS)], split="whitespace")
    keras.utils.set_random_seed(5)
    return build_transformer_seq2seq(num_layers=2, d_model=16, num_heads=2, dff=16,
                                     dropout=0.0, max_positions=16,
                                     source_tokenizer=tokenizer, target_tokenizer=tokenizer)


def _copy_head_weights(head, model, layer, index):
    attention = model.decoder_blocks[layer].cross_attention.attention
    for projection, dense in ((head.query_projection, attention.query_dense),
                              (head.key_projection, attention.key_dense)):
        kernel, bias = dense.get_weights()  # (d_model, heads, key_dim), (heads, key_dim)
        projection.set_weights([kernel[:, index, :], bias[index]])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("layer", [0, 1])
def test_head_with_a_model_heads_weights_is_that_head(norm_first, layer):
    keras.utils.set_random_seed(1)
    model = build_transformer_seq2seq(source_vocab_size=30, target_vocab_size=30, num_layers=2,
                                      d_model=16, num_heads=2, dff=16, dropout=0.0,
                                      max_positions=16, norm_first=norm_first)
    sources = _pad([[5, 6, 7, 8], [9, 10]])
    targets = _pad([[11, 12, 13], [14, 15, 16, 17, 18]])
    lengths = [3, 5]
    full_in = np.concatenate([np.full((2, 1), START_ID, np.int32), targets], axis=1)
    model_heads = attention_heads(model, sources, full_in)  # (2, layers, heads, 6, 4)
    for shift in (0, 1):
        head = ShiftedAlignmentHead(16, key_dim=model.key_dim, layer=layer, shift=shift)
        _copy_head_weights(head, model, layer, index=1)
        ours = np.asarray(head.piece_attention(model, sources, targets))  # (2, 5, 4)
        for row, length in enumerate(lengths):
            expected = model_heads[row, layer, 1, shift:shift + length]
            np.testing.assert_allclose(ours[row, :length], expected, atol=1e-5)
            # rows sum to 1 over the real source pieces, padding gets 0
            real = int(np.count_nonzero(sources[row]))
            np.testing.assert_allclose(ours[row, :length, :real].sum(-1), 1.0, atol=1e-5)
            assert np.all(ours[row, :length, real:] == 0)


@pytest.mark.slow
def test_trained_shifted_head_learns_links_known_by_construction(shuffle_model):
    sources, targets, links = _shuffled_pairs(400, seed=0)
    piece_links = [[(j, i) for i, j in pair] for pair in links]  # (target piece, source piece)
    dev_sources, dev_targets, dev_links = _shuffled_pairs(60, seed=1)
    accuracy = {}
    for shift in (0, 1):
        keras.utils.set_random_seed(0)
        head, losses = train_alignment_head(shuffle_model, sources, targets, piece_links, shift=shift,
                                            key_dim=16, epochs=30, batch_size=32,
                                            learning_rate=3e-2, verbose=0)
        assert losses[-1] < losses[0]
        results = align_texts(shuffle_model, dev_sources, dev_targets, aligner=head)
        hits = [link in set(result["links"]) for result, gold in
                zip(results, dev_links, strict=True) for link in gold]
        accuracy[shift] = float(np.mean(hits))
    # Shift 1 reads target word t where it is the input: it can find it in the
    # source. Shift 0 reads it where it is still to be predicted: a random
    # order of distinct words leaves it a guess among the words not yet seen.
    assert accuracy[1] >= 0.9, accuracy
    assert accuracy[0] <= 0.6, accuracy


def test_save_load_round_trip(shuffle_model, tmp_path):
    head = ShiftedAlignmentHead(16, key_dim=8, layer=1, shift=1)
    _copy_head_weights(head, shuffle_model, layer=1, index=0)  # not a fresh head's weights
    sources, targets, _ = _shuffled_pairs(4, seed=2)
    before = align_texts(shuffle_model, sources, targets, aligner=head)
    path = tmp_path / "aligner.keras"
    head.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ShiftedAlignmentHead)
    assert (loaded.d_model, loaded.key_dim, loaded.layer, loaded.shift) == (16, 8, 1, 1)
    for ours, theirs in zip(head.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.allclose(loaded.get_weights()[0],
                           ShiftedAlignmentHead(16, key_dim=8).get_weights()[0])
    after = align_texts(shuffle_model, sources, targets, aligner=loaded)
    for one, two in zip(before, after, strict=True):
        np.testing.assert_array_equal(one["weights"], two["weights"])
        assert one["links"] == two["links"]


def test_align_ids_with_an_aligner_reads_the_aligner(shuffle_model):
    """With a model head's weights and shift 0 the aligner's word matrices and
    links are that head's (`align_ids(layer=, head=)`); the model's every-head
    matrices (`heads=True`) are unchanged by the aligner."""
    sources = [[5, 6, 7, 8], [9, 10, 11]]
    targets = [[8, 6, 5, 7], [11, 9]]
    for layer, index in ((0, 1), (1, 0)):
        head = ShiftedAlignmentHead(16, key_dim=shuffle_model.key_dim, layer=layer, shift=0)
        _copy_head_weights(head, shuffle_model, layer, index)
        ours = align_ids(shuffle_model, sources, targets, heads=True, aligner=head)
        theirs = align_ids(shuffle_model, sources, targets, layer=layer, head=index, heads=True)
        for one, two in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(one["weights"], two["weights"], atol=1e-5)
            assert one["links"] == two["links"]
            np.testing.assert_array_equal(one["head_weights"], two["head_weights"])
    with pytest.raises(ValueError, match="either aligner or layer/head"):
        align_ids(shuffle_model, sources, targets, layer=0, aligner=head)


def test_training_lowers_the_loss_and_moves_only_the_head(shuffle_model):
    sources, targets, links = _shuffled_pairs(64, seed=3)
    piece_links = [[(j, i) for i, j in pair] for pair in links]
    model_weights = [weight.copy() for weight in shuffle_model.get_weights()]
    keras.utils.set_random_seed(0)
    head, losses = train_alignment_head(shuffle_model, sources, targets, piece_links,
                                        key_dim=8, epochs=3, batch_size=16,
                                        learning_rate=3e-2, verbose=0)
    assert len(losses) == 3 and losses[-1] < losses[0]
    for before, after in zip(model_weights, shuffle_model.get_weights(), strict=True):
        np.testing.assert_array_equal(before, after)  # the translation model is frozen
    too_long = " ".join(WORDS + WORDS)  # 24 words: more than the 16 positions
    with pytest.raises(ValueError, match="No training pair fits"):
        train_alignment_head(shuffle_model, [too_long], [too_long], [[(0, 0)]], verbose=0)


def test_bad_arguments_are_refused(shuffle_model):
    with pytest.raises(ValueError, match="shift must be 0"):
        ShiftedAlignmentHead(16, shift=2)
    with pytest.raises(ValueError, match="layer must be an int"):
        ShiftedAlignmentHead(16, layer=True)
    with pytest.raises(ValueError, match="decoder layer 5"):
        ShiftedAlignmentHead(16, layer=5).piece_attention(shuffle_model, [[5]], [[6]])
    with pytest.raises(ValueError, match="built for d_model=32"):
        ShiftedAlignmentHead(32).piece_attention(shuffle_model, [[5]], [[6]])
    with pytest.raises(ValueError, match="position table has 16"):
        ShiftedAlignmentHead(16).piece_attention(shuffle_model, [[5]], [[6] * 16])
    with pytest.raises(ValueError, match="layer must be an int in"):
        shuffle_model.alignment_features(np.array([[5]]), np.array([[2]]), layer=2)
    rnn = build_rnn_seq2seq(source_vocab_size=20, target_vocab_size=20, embedding_dim=4, units=4)
    with pytest.raises(ValueError, match="reads a TransformerSeq2Seq"):
        ShiftedAlignmentHead(16).piece_attention(rnn, [[5]], [[6]])
    with pytest.raises(ValueError, match="one entry per pair"):
        train_alignment_head(shuffle_model, ["w1 w2"], ["w1 w2", "w3"], [[(0, 0)]])
