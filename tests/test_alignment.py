"""Tests for `kerasseq.alignment` and `Translator.translate(return_alignments=True)`.

References: hand-computed word matrices and scores; a model whose attention
is known by construction (it copies or reverses its source and attends to
exactly the position it copies); for real models, the layers' own
teacher-forced attention and the word counts of the printed texts.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq import Translator
from kerasseq.alignment import (
    align_texts,
    alignment_scores,
    attention_heads,
    diagonal_links,
    links_from_weights,
    symmetrize,
    target_word_hit_rate,
    word_starts,
)
from kerasseq.alignment.merge import merge_pieces, select_heads
from kerasseq.data import END_ID, WordPieceTextTokenizer, make_dataset
from kerasseq.data.sword import split_words
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy

VOCABULARY = ["la", "luz", "era", "buena", "hel", "##lo", "wor", "##ld", "."]


def test_word_starts_and_merge_pieces_by_hand():
    tokenizer = WordPieceTextTokenizer(VOCABULARY)
    ids = tokenizer.encode("hello luz world").numpy()  # hel ##lo luz wor ##ld
    np.testing.assert_array_equal(word_starts(tokenizer, ids), [1, 0, 1, 1, 0])
    weights = [[0.5, 0.3, 0.2],   # target piece x
               [0.1, 0.2, 0.7],   # ##y, same word as x
               [0.0, 0.4, 0.6]]   # z
    merged = merge_pieces(weights, [True, False, True], [True, False, True])
    # source pieces a + ##b summed; target rows x, ##y averaged
    np.testing.assert_allclose(merged, [[0.55, 0.45], [0.4, 0.6]])
    assert links_from_weights(merged) == [(0, 0), (1, 1)]
    np.testing.assert_allclose(merged.sum(axis=1), 1.0)


def test_links_from_weights_both_directions_by_hand():
    # 3 target words (rows) x 4 source words (columns)
    weights = [[0.70, 0.10, 0.10, 0.10],
               [0.05, 0.40, 0.50, 0.05],
               [0.05, 0.45, 0.10, 0.40]]
    # rows: target 0 -> source 0, target 1 -> source 2, target 2 -> source 1
    assert links_from_weights(weights) == [(0, 0), (2, 1), (1, 2)]
    assert links_from_weights(weights, "target") == links_from_weights(weights)
    # columns: source 0 -> target 0 (0.70), 1 -> 2 (0.45), 2 -> 1 (0.50), 3 -> 2 (0.40)
    assert links_from_weights(weights, "source") == [(0, 0), (1, 2), (2, 1), (3, 2)]
    assert links_from_weights(weights, "intersection") == [(0, 0), (1, 2), (2, 1)]
    assert links_from_weights(weights, "union") == [(0, 0), (1, 2), (2, 1), (3, 2)]
    # grow-diag-final-and: from the intersection, (3, 2) of the union is a
    # diagonal neighbour of (2, 1) and source word 3 has no link yet: it joins
    assert links_from_weights(weights, "grow-diag-final-and") == [
        (0, 0), (1, 2), (2, 1), (3, 2)]
    # without the 4th column's pull, the two directions agree
    assert links_from_weights(np.asarray(weights)[:, :3], "grow-diag-final-and") == [
        (0, 0), (1, 2), (2, 1)]
    for method in ("intersection", "union", "grow-diag-final-and"):
        assert links_from_weights(weights, method) == symmetrize(
            links_from_weights(weights, "target"), links_from_weights(weights, "source"),
            method)
    assert links_from_weights(np.zeros((0, 3)), "union") == []
    with pytest.raises(ValueError, match="method must be one of"):
        links_from_weights(weights, "rows")
    with pytest.raises(ValueError, match=r"\(target_words, source_words\) matrix"):
        links_from_weights([0.2, 0.8])


def test_links_from_weights_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(20):
        rows, columns = rng.integers(1, 7, size=2)
        weights = rng.random((rows, columns))
        weights /= weights.sum(axis=1, keepdims=True)
        # each word's largest weight; a tie goes to the first word (a single
        # source column ties every row at 1.0)
        target = {(min(i for i in range(columns) if weights[j, i] == max(weights[j])), j)
                  for j in range(rows)}
        source = {(i, min(j for j in range(rows) if weights[j, i] == max(weights[:, i])))
                  for i in range(columns)}
        assert set(links_from_weights(weights)) == target
        assert set(links_from_weights(weights, "source")) == source
        assert set(links_from_weights(weights, "intersection")) == target & source
        assert set(links_from_weights(weights, "union")) == target | source
        both = set(links_from_weights(weights, "grow-diag-final-and"))
        assert target & source <= both <= target | source


def test_scores_by_hand():
    predicted = [[(0, 0), (1, 1), (2, 1)]]
    sure, possible = [[(0, 0), (1, 1)]], [[(2, 2)]]
    scores = alignment_scores(predicted, sure, possible)
    assert scores["precision"] == pytest.approx(2 / 3) and scores["recall"] == 1.0
    assert scores["aer"] == pytest.approx(1 - (2 + 2) / (3 + 2))
    assert alignment_scores([[(0, 0)]], [[(0, 0)]])["aer"] == 0.0
    # target word 1 has gold sources {1}; predicted {1, 2} hits; word 0 hits
    assert target_word_hit_rate(predicted, [[(0, 0), (1, 1), (0, 2)]]) == (2 / 3, 3)
    assert diagonal_links(2, 4) == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert diagonal_links(3, 3) == [(0, 0), (1, 1), (2, 2)]


def test_symmetrize():
    forward, reverse = [(0, 0), (1, 1), (2, 1)], [(0, 0), (1, 1), (1, 2)]
    assert symmetrize(forward, reverse, "intersection") == [(0, 0), (1, 1)]
    assert symmetrize(forward, reverse) == [(0, 0), (1, 1), (1, 2), (2, 1)]
    assert symmetrize([(0, 1)], [(1, 0)]) == [(0, 1), (1, 0)]  # final-and
    with pytest.raises(ValueError, match="method must be"):
        symmetrize([], [], "grow")


class KnownAttentionModel:
    """Copies (or reverses) its source and attends to exactly the position it copies.

    Meets the decoding contract with TensorFlow ops; its teacher-forced
    attention is a one-hot row per target position.
    """

    attention = "known"

    def __init__(self, tokenizer, reverse=False):
        self.source_tokenizer = self.target_tokenizer = tokenizer
        self.reverse = reverse
        self.vocab_size = tokenizer.vocabulary_size
        self.max_target_length = 16

    def _position(self, step, length):
        return length - 1 - step if self.reverse else step + 0 * length

    def encode(self, source_ids):
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        lengths = tf.reduce_sum(tf.cast(source_ids != 0, tf.int32), axis=1)
        return {"source": source_ids, "lengths": lengths}

    def decode_step(self, token_ids, state, step):
        lengths = state["lengths"]
        position = tf.clip_by_value(self._position(step, lengths), 0,
                                    tf.shape(state["source"])[1] - 1)
        copied = tf.gather(state["source"], position, batch_dims=1)  # (batch_size,)
        target = tf.where(step < lengths, copied, END_ID)
        return 10.0 * tf.one_hot(target, self.vocab_size), state

    def teacher_forced_attention(self, source_ids, target_in_ids):
        source_ids = np.asarray(source_ids)
        batch, target_length = np.asarray(target_in_ids).shape
        weights = np.zeros([batch, target_length, source_ids.shape[1]], np.float32)
        for row in range(batch):
            length = int((source_ids[row] != 0).sum())
            for step in range(target_length):
                if step < length:
                    weights[row, step, self._position(step, length)] = 1.0
                else:
                    weights[row, step, :length] = 1.0 / length
        return weights


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_translate_returns_the_alignment_known_by_construction(method):
    tokenizer = WordPieceTextTokenizer(VOCABULARY)
    texts = ["hello world.", "la luz era buena", "  ", "luz"]
    copy = Translator(KnownAttentionModel(tokenizer), method=method, jit_compile=False)
    translations, links = copy.translate(texts, return_alignments=True)
    assert translations == ["hello world.", "la luz era buena", "", "luz"]
    # pieces hel ##lo wor ##ld . -> three words, each copied onto itself
    assert links == [[(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 1), (2, 2), (3, 3)], [], [(0, 0)]]
    reverse = Translator(KnownAttentionModel(tokenizer, reverse=True), method=method,
                         jit_compile=False)
    translation, scores, links = reverse.translate("la luz era buena", return_scores=True,
                                                   return_alignments=True)
    assert translation == "buena era luz la" and isinstance(scores, float)
    assert links == [(3, 0), (2, 1), (1, 2), (0, 3)]


def test_translate_nbest_alignments_mirror_translations():
    tokenizer = WordPieceTextTokenizer(VOCABULARY)
    model = KnownAttentionModel(tokenizer)
    translations, links = Translator(model, num_beams=2, num_return=2, jit_compile=False
                                     ).translate(["la luz", ""], return_alignments=True)
    assert len(links) == 2 and len(links[0]) == 2 and links[1] == [[], []]
    assert links[0][0] == [(0, 0), (1, 1)]


def test_a_model_without_attention_is_refused_before_searching():
    model = build_rnn_seq2seq(source_vocab_size=12, target_vocab_size=12, embedding_dim=4,
                              units=4, attention=None, source_tokenizer=None)
    with pytest.raises(ValueError, match="need a model with attention.*attention=None"):
        attention_heads(model, [[4, 5]], [[2, 4]])


@pytest.fixture(scope="module")
def tokenizers():
    sources = ["la luz era buena.", "y dijo dios: sea la luz", "la tierra era buena"]
    targets = ["The light was good.", "God said, “Let there be light”", "The earth was good"]
    return (WordPieceTextTokenizer.from_texts(sources, max_tokens=80, lowercase=True),
            WordPieceTextTokenizer.from_texts(targets, max_tokens=80), sources, targets)


def _trained(kind, tokenizers):
    source_tokenizer, target_tokenizer, sources, targets = tokenizers
    keras.utils.set_random_seed(3)
    if kind == "transformer":
        model = build_transformer_seq2seq(num_layers=2, d_model=16, num_heads=2, dff=16,
                                          max_positions=32, source_tokenizer=source_tokenizer,
                                          target_tokenizer=target_tokenizer)
    else:
        model = build_rnn_seq2seq(embedding_dim=8, units=8, max_target_length=12,
                                  source_tokenizer=source_tokenizer,
                                  target_tokenizer=target_tokenizer)
    # A few seconds of training: a random model prints [UNK] (one word for the
    # alignment, three for split_words) and stray reserved ids.
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=MaskedSparseCategoricalCrossentropy())
    model.fit(make_dataset(list(zip(sources, targets, strict=True)), source_tokenizer, target_tokenizer,
                           batch_size=3, seed=0), epochs=60, verbose=0)
    return model


@pytest.fixture(scope="module")
def trained(tokenizers):
    return {kind: _trained(kind, tokenizers) for kind in ("transformer", "rnn")}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_real_models_alignments_match_their_attention(tokenizers, trained, kind):
    source_tokenizer, target_tokenizer, sources, targets = tokenizers
    model = trained[kind]
    translations, links = model.translate(sources, method="greedy", max_length=12,
                                          return_alignments=True, jit_compile=False)
    for source, translation, row in zip(sources, translations, links, strict=True):
        # one link per printed target word; every source index is a word of the source
        # One link per target word, in order. The words are the pieces' (a
        # `##` piece glued after a mark can make split_words count one more).
        assert "[UNK]" not in translation
        assert [j for _, j in row] == list(range(len(row)))
        assert abs(len(row) - len(split_words(translation))) <= 1
        assert all(0 <= i < len(split_words(source)) for i, _ in row)

    # Forced alignment of references == arg-max of the layers' own attention
    # when every piece is a word (pieces glued by ## are merged by merge_pieces).
    source_ids = source_tokenizer.encode(sources).to_tensor().numpy()
    target_in = np.pad(target_tokenizer.encode(targets).to_tensor().numpy(), [(0, 0), (1, 0)],
                       constant_values=2)
    heads = attention_heads(model, source_ids, target_in)
    if kind == "transformer":
        np.testing.assert_allclose(
            select_heads(heads, layer=0, head=1),
            np.asarray(model.cross_attention_weights(source_ids, target_in, layer=0))[:, 1],
            atol=1e-6)
        np.testing.assert_allclose(select_heads(heads, layer=-1), model.teacher_forced_attention(
            source_ids, target_in), atol=1e-6)
        # The default (kerasseq.alignment.ALIGNMENT_LAYER/HEAD): every layer's every head
        layers = [np.asarray(model.cross_attention_weights(source_ids, target_in, layer=i))
                  for i in range(heads.shape[1])]
        np.testing.assert_allclose(select_heads(heads), np.mean(layers, axis=(0, 2)),
                                   atol=1e-6)
        with pytest.raises(ValueError, match="layer must be 'mean' or an int in"):
            select_heads(heads, layer=2)
    results = align_texts(model, sources, targets, heads=True)
    for index, result in enumerate(results):
        source_starts = word_starts(source_tokenizer, source_tokenizer.encode(sources[index]))
        target_starts = word_starts(target_tokenizer, target_tokenizer.encode(targets[index]))
        expected = merge_pieces(select_heads(heads)[index, :len(target_starts),
                                                     :len(source_starts)],
                                source_starts, target_starts)
        np.testing.assert_allclose(result["weights"], expected, atol=1e-6)
        assert result["head_weights"].shape[:2] == heads.shape[1:3]
        assert len(result["links"]) == len(split_words(targets[index]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_export_alignments_signature_equals_translate(tokenizers, trained, kind, tmp_path):
    import tensorflow_text  # noqa: F401  (the WordPiece ops of the export)

    from kerasseq.export import export_translator

    _, _, sources, _ = tokenizers
    model = trained[kind]
    settings = dict(method="greedy", max_length=12, jit_compile=False)
    path = export_translator(model, tmp_path / "export", alignments=True,
                             alignment_layer=0, alignment_head="mean", **settings)
    served = tf.saved_model.load(path)
    assert set(served.signatures) == {"serving_default", "translate_nbest",
                                      "translate_alignments"}
    output = served.signatures["translate_alignments"](text=tf.constant(sources + ["  "]))
    translations, links = model.translate(sources, return_alignments=True, alignment_layer=0,
                                          **settings)
    assert [t.decode() for t in output["translation"].numpy()] == translations + [""]
    assert [a.decode() for a in output["alignment"].numpy()] == [
        " ".join(f"{i}-{j}" for i, j in row) for row in links] + [""]


def test_export_alignments_refuses_a_model_without_attention(tmp_path):
    from kerasseq.export import export_translator

    tokenizer = WordPieceTextTokenizer(VOCABULARY)
    model = build_rnn_seq2seq(embedding_dim=4, units=4, attention=None, max_target_length=4,
                              source_tokenizer=tokenizer, target_tokenizer=tokenizer)
    with pytest.raises(ValueError, match="need a model with attention"):
        export_translator(model, tmp_path / "export", alignments=True)
    assert not (tmp_path / "export").exists()


def test_pharaoh_text_round_trip_and_bad_links():
    from kerasseq.alignment import from_pharaoh, to_pharaoh

    links = [(0, 0), (3, 1), (12, 2), (3, 10)]
    assert to_pharaoh(links) == "0-0 3-1 12-2 3-10"
    assert from_pharaoh(to_pharaoh(links)) == links
    assert to_pharaoh([]) == "" and from_pharaoh("  ") == []
    assert to_pharaoh([(np.int64(2), np.int32(5))]) == "2-5"
    for bad in ("0-0 1", "a-1", "1--2", "-1-2"):
        with pytest.raises(ValueError, match="two non-negative integers joined by '-'"):
            from_pharaoh(bad)


def test_align_texts_follows_the_translators_source_rule(tokenizers):
    # Issue 44 (item 5): one source rule (docs/design.md). align_texts used to
    # cut sources to the position table where the Translator refuses them;
    # now it cuts only to `max_source_length` and refuses past the table with
    # the Translator's own error (`trim_source_ids`). An untrained model: only
    # the lengths matter.
    from kerasseq.decoding import SearchConfigError

    source_tokenizer, target_tokenizer, sources, targets = tokenizers
    keras.utils.set_random_seed(0)
    model = build_transformer_seq2seq(num_layers=1, d_model=8, num_heads=2, dff=8,
                                      max_positions=16, source_tokenizer=source_tokenizer,
                                      target_tokenizer=target_tokenizer)
    source_pieces = [len(source_tokenizer.encode(text).numpy()) for text in sources]
    target_pieces = [len(target_tokenizer.encode(text).numpy()) for text in targets]
    assert source_pieces == [14, 18, 16] and target_pieces == [16, 25, 15]
    with pytest.raises(ValueError) as translator_error:
        Translator(model, method="greedy", max_length=4, jit_compile=False).translate(sources[1])
    assert "more than max_positions=16 tokens" in str(translator_error.value)
    with pytest.raises(ValueError) as align_error:
        align_texts(model, sources[:2], [targets[0], targets[2]])
    assert str(align_error.value) == str(translator_error.value)  # the same check, the same words

    # A target of exactly max_positions pieces is read whole (it lost its last
    # piece, the word ".", to the old cut); `max_source_length` cuts sources
    # as it does for the Translator, and is checked as there.
    (result,) = align_texts(model, [sources[1]], [targets[0]], max_source_length=5)
    kept_words = int(word_starts(source_tokenizer, source_tokenizer.encode(sources[1])[:5]).sum())
    assert result["weights"].shape == (len(split_words(targets[0])), kept_words) == (5, 2)
    with pytest.raises(SearchConfigError, match="max_positions=16") as error:
        align_texts(model, [sources[0]], [targets[0]], max_source_length=17)
    assert error.value.field == "max_source_length"
    with pytest.raises(SearchConfigError, match="max_source_length"):
        align_texts(model, [sources[0]], [targets[0]], max_source_length=0)

    # A target longer than the table is refused as well, not cut.
    with pytest.raises(ValueError, match="max_positions=16"):
        align_texts(model, [sources[0]], [targets[1]])
