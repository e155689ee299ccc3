import os

import keras
import numpy as np
import pytest

from kerasseq.models import TransformerSeq2Seq, build_transformer_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy
from tests.models import seq2seq_checks
from tests.models.g2p_fixture import tiny_g2p_model, train_on_tiny_g2p
from tests.models.rescoring import assert_beam_scores_equal_teacher_forcing
from tests.models.seq2seq_checks import SOURCE, TARGET_IN, TARGET_OUT


def small_model(num_layers=2, **kwargs):
    kwargs.setdefault("dropout", 0.1)  # inactive at inference; checks training=False paths
    return build_transformer_seq2seq(12, 11, num_layers=num_layers, d_model=16, num_heads=4,
                                     dff=32, max_positions=16, **kwargs)


@pytest.fixture(scope="module")
def two_layer_model():
    """`small_model(2)`, shared by the tests that only run it (no training, no
    change to its weights): the very model each of them built before, as its
    weights are drawn after the same seed the autouse fixture sets."""
    keras.utils.set_random_seed(1234)
    return small_model(2)


def test_max_target_length_is_the_search_default_within_the_position_table():
    model = small_model(1, max_target_length=6)
    assert (model.max_positions, model.max_target_length) == (16, 6)
    assert model.generate(SOURCE, method="greedy")[0].shape == (len(SOURCE), 1, 6)
    assert model.generate(SOURCE, method="greedy", max_length=16)[0].shape[-1] == 16
    assert type(model).from_config(model.get_config()).max_target_length == 6
    assert small_model(1).max_target_length == 16  # default: the whole table
    with pytest.raises(ValueError, match="max_target_length must be <= max_positions=16"):
        small_model(1, max_target_length=17)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_teacher_forced_call(num_layers, norm_first):
    model = small_model(num_layers, norm_first=norm_first)
    full = np.asarray(model([SOURCE, TARGET_IN]))
    incremental = seq2seq_checks.step_by_step_logits(model, SOURCE, TARGET_IN)
    real = TARGET_IN != 0  # at padded target positions the full call masks the padding keys
    np.testing.assert_allclose(incremental[real], full[real], atol=1e-5)
    assert incremental.dtype == np.float32


def test_state_contract_and_cache_writes_one_position(two_layer_model):
    model = two_layer_model
    state = model.encode(SOURCE)
    expected = {"source_mask", "attention_weights"} | {
        f"layer_{i}_{kind}_{part}" for i in range(2) for kind in ("self", "cross") for part in ("key", "value")
    }
    assert set(state) == expected
    for key, value in state.items():
        assert value.shape[0] == 3, key
    assert tuple(state["layer_1_self_key"].shape) == (3, 16, 4, 4)  # (batch, max_length, heads, key_dim)
    assert tuple(state["layer_0_cross_value"].shape) == (3, 6, 4, 4)  # (batch, source_length, heads, key_dim)
    for t in range(3):
        logits, new_state = model.decode_step(TARGET_IN[:, t], state, t)
        for key in state:  # static shapes and dtypes across steps
            assert new_state[key].shape == state[key].shape and new_state[key].dtype == state[key].dtype, key
        state = new_state
    cache = np.asarray(state["layer_0_self_key"])
    assert np.all(np.abs(cache[:, :3]).sum(axis=(2, 3)) > 0)  # positions 0..2 written
    assert np.all(cache[:, 3:] == 0)  # the rest untouched
    weights = np.asarray(state["attention_weights"])  # heads and layers averaged
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[1, 2:] == 0)


def test_causality_future_tokens_change_no_earlier_logits(two_layer_model):
    model = two_layer_model
    base = np.asarray(model([SOURCE, TARGET_IN]))
    changed_target = TARGET_IN.copy()
    changed_target[:, 3:] = [[7, 10], [4, 4], [9, 5]]
    changed = np.asarray(model([SOURCE, changed_target]))
    np.testing.assert_allclose(changed[:, :3], base[:, :3], atol=1e-6)
    assert not np.allclose(changed[0, 3:], base[0, 3:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_invariance(norm_first, two_layer_model):
    model = small_model(2, norm_first=True) if norm_first else two_layer_model
    base = seq2seq_checks.assert_padding_changes_nothing(model, atol=1e-5)
    # a row alone gives the logits it gets inside a padded batch
    alone = np.asarray(model([SOURCE[1:2, :2], TARGET_IN[1:2, :2]]))
    np.testing.assert_allclose(alone[0], base[1, :2], atol=1e-5)


def test_cross_attention_weights(two_layer_model):
    model = two_layer_model
    weights = np.asarray(model.cross_attention_weights(SOURCE, TARGET_IN))
    assert weights.shape == (3, 4, 5, 6)  # (batch, heads, target_length, source_length)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[1, :, :, 2:] == 0)
    first = np.asarray(model.cross_attention_weights(SOURCE, TARGET_IN, layer=0))
    assert not np.allclose(first, weights)
    assert tuple(model.teacher_forced_attention(SOURCE, TARGET_IN).shape) == (3, 5, 6)


def test_share_embeddings_and_tie_output_serialize(tmp_path):
    plain = build_transformer_seq2seq(12, 12, num_layers=1, d_model=16, num_heads=4, dff=32)
    shared = build_transformer_seq2seq(12, 12, num_layers=1, d_model=16, num_heads=4, dff=32,
                                       share_embeddings=True)
    tied = build_transformer_seq2seq(12, 12, num_layers=1, d_model=16, num_heads=4, dff=32,
                                     share_embeddings=True, tie_output=True)
    assert shared.source_embedding is shared.target_embedding
    assert tied.output_projection.embedding is tied.target_embedding.token_embedding
    assert plain.count_params() - shared.count_params() == 12 * 16  # one embedding matrix less
    assert shared.count_params() - tied.count_params() == 16 * 12  # no output kernel
    for model in (shared, tied):
        path = os.path.join(tmp_path, f"{model.name}.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        assert isinstance(loaded, TransformerSeq2Seq)
        assert loaded.get_config() == model.get_config()
        np.testing.assert_allclose(np.asarray(loaded([SOURCE, TARGET_IN])),
                                   np.asarray(model([SOURCE, TARGET_IN])), atol=1e-6)
    # The tie is real: training moves one matrix that both ends use.
    tied.compile(optimizer=keras.optimizers.SGD(0.5), loss=MaskedSparseCategoricalCrossentropy())
    tied.fit([SOURCE, TARGET_IN], TARGET_OUT, epochs=1, verbose=0)
    embedding = np.asarray(tied.target_embedding.token_embedding.embeddings)
    x = keras.random.normal((1, 1, 16))
    expected = np.asarray(x) @ embedding.T + np.asarray(tied.output_projection.bias)
    np.testing.assert_allclose(np.asarray(tied.output_projection(x)), expected, atol=1e-5)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match=r"d_model must be divisible by num_heads.*d_model=30, num_heads=4"):
        build_transformer_seq2seq(12, 11, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match=r"share_embeddings.*source_vocab_size=12.*target_vocab_size=11"):
        build_transformer_seq2seq(12, 11, share_embeddings=True)
    with pytest.raises(ValueError, match="num_layers"):
        build_transformer_seq2seq(12, 11, num_layers=0)
    with pytest.raises(ValueError, match="dropout"):
        build_transformer_seq2seq(12, 11, dropout=1.0)
    with pytest.raises(ValueError, match="source_vocab_size"):
        build_transformer_seq2seq(3, 11)
    with pytest.raises(ValueError, match="source_tokenizer"):
        build_transformer_seq2seq(None, 11)


def test_source_longer_than_max_positions_is_rejected():
    model = small_model(1)  # max_positions=16
    long_source = np.full((2, 17), 5, "int32")
    with pytest.raises(ValueError, match=r"max_positions=16.*source length=17"):
        model.generate(long_source)
    with pytest.raises(ValueError, match="max_positions=16"):
        model.encode(long_source)
    # Trailing padding beyond max_length is dropped: it changes nothing.
    padded = np.pad(SOURCE, ((0, 0), (0, 20)))
    np.testing.assert_array_equal(np.asarray(model.generate(padded, max_length=5)[0]),
                                  np.asarray(model.generate(SOURCE, max_length=5)[0]))
    with pytest.raises(ValueError, match=r"max_positions=16.*max_length=17"):
        model.generate(SOURCE, max_length=17)


def test_xla_greedy_decoding_matches_eager_graph(two_layer_model):
    model = two_layer_model
    ids, scores, lengths = model.generate(SOURCE, method="greedy", max_length=8)
    xla_ids, xla_scores, xla_lengths = model.generate(SOURCE, method="greedy", max_length=8,
                                                      jit_compile=True)
    np.testing.assert_array_equal(np.asarray(xla_ids), np.asarray(ids))
    np.testing.assert_allclose(np.asarray(xla_scores), np.asarray(scores), atol=1e-4)


def test_mixed_precision_forward_is_finite_and_float32():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = small_model(2, tie_output=True, norm_first=True)
        assert model.decoder_blocks[0].compute_dtype == "float16"
        assert model.output_projection.compute_dtype == "float32"
        logits = model([SOURCE, TARGET_IN])
        assert logits.dtype == "float32"
        assert np.all(np.isfinite(np.asarray(logits)))
        loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(TARGET_OUT, logits)
        assert loss.dtype == "float32" and np.isfinite(float(loss))
        step_logits, state = model.decode_step(TARGET_IN[:, 0], model.encode(SOURCE), 0)
        assert step_logits.dtype == "float32" and np.all(np.isfinite(np.asarray(step_logits)))
        assert state["layer_0_self_key"].dtype == "float16"
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="module")
def trained_g2p():
    """A tiny Transformer trained to memorise 30 words (90 optimizer steps: all 30
    words are right after 20 epochs already)."""
    model = tiny_g2p_model(build_transformer_seq2seq, 7, num_layers=1, d_model=64, num_heads=4,
                           dff=128, dropout=0.0, max_positions=16)
    return train_on_tiny_g2p(model, epochs=30, learning_rate=3e-3, clipnorm=1.0,  # 3 batches per epoch
                             metrics=[MaskedTokenAccuracy()])


def test_overfits_thirty_words(trained_g2p):
    seq2seq_checks.assert_overfits_thirty_words(*trained_g2p)


def test_keras_save_load_keeps_logits_and_decoding(trained_g2p, tmp_path):
    seq2seq_checks.assert_save_load_keeps_logits_and_decoding(
        *trained_g2p, tmp_path, searches=({}, dict(method="beam", num_beams=3)))


def test_beam_scores_equal_teacher_forced_log_probabilities(trained_g2p):
    model, entries = trained_g2p
    assert_beam_scores_equal_teacher_forcing(model, [w for w, _ in entries[:4]] + ["zebra"],
                                             num_beams=4, num_return=3, max_length=12)


def test_translate_errors_and_coverage_penalty(trained_g2p):
    model, _ = trained_g2p
    with pytest.raises(ValueError, match="max_positions=16"):
        model.translate("a" * 40)
    assert model.translate([""]) == [""]  # blank: nothing to search
    assert isinstance(model.translate("cat", method="beam", num_beams=3, coverage_penalty=0.2), str)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_logits_carry_no_keras_mask_and_fit_on_padded_batches_with_and_without_xla(jit_compile):
    # (test_logits_carry_no_keras_mask, merged here: the same model and evaluate)
    # A mask on y_pred would make Keras re-weight the (already masked) loss.
    model = small_model(1, dropout=0.0)
    logits = model([SOURCE, TARGET_IN])
    assert getattr(logits, "_keras_mask", None) is None
    loss = MaskedSparseCategoricalCrossentropy()
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss, jit_compile=jit_compile)
    before = model.evaluate([SOURCE, TARGET_IN], TARGET_OUT, verbose=0)
    np.testing.assert_allclose(before, float(loss(TARGET_OUT, logits)), rtol=1e-5)
    history = model.fit([SOURCE, TARGET_IN], TARGET_OUT, epochs=2, batch_size=3, verbose=0)
    # learning rate 0: the training-mode loss is the inference loss
    np.testing.assert_allclose(history.history["loss"], [before, before], rtol=1e-5)


@pytest.fixture(scope="module")
def seed_two_model():
    keras.utils.set_random_seed(2)
    return small_model()


@pytest.mark.parametrize("penalties", [{}, {"length_penalty": 0.6, "coverage_penalty": 0.3}])
def test_beam_search_with_shared_cross_caches_equals_tiled(penalties, seed_two_model):
    """The cross-attention caches stay untiled in beam search: same hypotheses and scores."""
    from kerasseq.decoding import beam_search

    model = seed_two_model  # built once for both cases
    assert model.shared_state_keys == ("layer_0_cross_key", "layer_0_cross_value",
                                       "layer_1_cross_key", "layer_1_cross_value")
    outputs = {}
    for shared in ((), model.shared_state_keys):
        state = model.encode(SOURCE)
        outputs[shared] = beam_search(model.decode_step, state, 3, 2, 3, num_beams=3,
                                      max_length=6, num_return=2, return_log_probs=True,
                                      shared_state=shared, **penalties)
    for tiled, shared in zip(outputs[()], outputs[model.shared_state_keys], strict=True):
        np.testing.assert_allclose(np.asarray(shared), np.asarray(tiled), atol=1e-5)
    with pytest.raises(ValueError, match="not in the state"):
        beam_search(model.decode_step, model.encode(SOURCE), 3, 2, 3, shared_state=("nope",))

    def step_that_writes_memory(token_ids, state, step):
        logits, new_state = model.decode_step(token_ids, state, step)
        return logits, dict(new_state, layer_0_cross_key=new_state["layer_0_cross_key"] * 1.0)

    with pytest.raises(ValueError, match="changed the shared state tensor 'layer_0_cross_key'"):
        beam_search(step_that_writes_memory, model.encode(SOURCE), 3, 2, 3, max_length=4,
                    shared_state=model.shared_state_keys)
