"""`kerasseq.Translator` and `SearchConfig`: the one inference path."""

import ast
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import kerasseq
from kerasseq import SearchConfig, SearchConfigError, Translator, decoding
from kerasseq.decoding import Seq2SeqDecodable
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.translator import get_translator, resolve_jit_compile
from tests.decoding.toy_models import sheep_ship_model
from tests.models.g2p_fixture import tiny_g2p_model, trained_tiny_g2p_rnn

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def g2p():
    """A small RNN trained for a few steps, so outputs differ from word to word."""
    model, words, _ = trained_tiny_g2p_rnn(seed=3, epochs=10)
    return model, words


@pytest.fixture(scope="module")
def tiny_transformer():
    """An untrained one-layer Transformer with a 12-position table (read-only in the tests)."""
    return tiny_g2p_model(build_transformer_seq2seq, 0, num_layers=1, d_model=16, num_heads=2,
                          dff=32, max_positions=12)


# ----------------------------------------------------------------- config
def test_one_set_of_defaults():
    config = SearchConfig()
    assert (config.method, config.num_beams, config.num_return) == ("beam", 4, 1)
    assert config.jit_compile == "auto" and config.batch_buckets == "pow2"
    assert config.replace(num_beams=8).num_beams == 8
    assert SearchConfig(batch_buckets=[16, 4]).batch_buckets == (4, 16)  # sorted, hashable
    assert hash(SearchConfig(batch_buckets=[4, 16])) == hash(SearchConfig(batch_buckets=(4, 16)))


@pytest.mark.parametrize("settings, field, message", [
    (dict(method="beams"), "method", "method must be one of"),
    (dict(num_beams=0), "num_beams", "num_beams must be >= 1"),
    (dict(num_beams=2.0), "num_beams", "num_beams must be an int >= 1"),
    (dict(num_beams=2, num_return=3), "num_return", "num_return must be <= num_beams=2"),
    (dict(method="greedy", num_return=2), "num_return",
     r"num_return > 1 needs method='beam' \(greedy search gives one hypothesis"),
    (dict(method="sample", num_return=3), "num_return", "num_return > 1 needs method='beam'"),
    (dict(length_penalty=float("nan")), "length_penalty", "length_penalty must be a finite float"),
    (dict(coverage_penalty=-1.0), "coverage_penalty", "coverage_penalty must be"),
    (dict(max_length=4, min_length=5), "min_length", "min_length must be <= max_length=4"),
    (dict(temperature=0.0), "temperature", "temperature must be a float > 0"),
    (dict(top_p=1.5), "top_p", "top_p must be"),
    (dict(seed=1.5), "seed", "seed must be an int or None"),
    (dict(return_log_probs=1), "return_log_probs", "return_log_probs must be a bool"),
    (dict(jit_compile="yes"), "jit_compile", "jit_compile must be True, False or 'auto'"),
    (dict(batch_size=0), "batch_size", "batch_size must be >= 1"),
    (dict(batch_buckets="pow3"), "batch_buckets", "batch_buckets must be"),
    (dict(max_source_length=0), "max_source_length", "max_source_length must be"),
    (dict(source_buckets="linear"), "source_buckets", "source_buckets must be one of"),
    (dict(max_length_a=-1.0), "max_length_a", "max_length_a must be a finite float"),
    (dict(max_length_b=-1), "max_length_b", "max_length_b must be >= 0"),
])
def test_bad_settings_are_named(settings, field, message):
    with pytest.raises(SearchConfigError, match=message) as caught:
        SearchConfig(**settings)
    assert isinstance(caught.value, ValueError) and caught.value.field == field


def test_num_return_is_refused_by_every_door_outside_beam_search(g2p):
    # one rule, in SearchConfig: no door silently returns one hypothesis
    model, words = g2p
    for call in (lambda: model.translate(words[:2], method="greedy", num_return=2),
                 lambda: kerasseq.translate(model, words[:2], method="sample", num_return=2),
                 lambda: model.generate(np.array([[5, 6, 0]]), method="greedy", num_return=2),
                 lambda: Translator(model, method="greedy", num_return=2)):
        with pytest.raises(SearchConfigError, match="num_return > 1 needs method='beam'"):
            call()


def test_unknown_setting_is_a_type_error(g2p):
    model, words = g2p
    with pytest.raises(TypeError, match=r"Unknown search setting\(s\) \['beams'\]"):
        model.translate(words[:2], beams=4)
    with pytest.raises(TypeError, match="config must be a kerasseq.SearchConfig"):
        Translator(model, {"num_beams": 4})


def test_auto_jit_is_xla_on_a_gpu_only(monkeypatch):
    assert resolve_jit_compile(False) is False and resolve_jit_compile(True) is True
    real = tf.config.list_physical_devices

    def with_gpu(device_type=None):
        if device_type in (None, "GPU"):
            return real(device_type) + [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
        return real(device_type)

    monkeypatch.setattr(tf.config, "list_physical_devices", with_gpu)
    assert resolve_jit_compile("auto") is True
    monkeypatch.setattr(tf.config, "list_physical_devices", real)
    # On CPU no XLA: benchmarks/translate_long.py measured the compiles to cost
    # more than XLA saves on a corpus translated once. On a GPU, XLA.
    assert resolve_jit_compile("auto") is bool(real("GPU"))


# ------------------------------------------------------------- one path
def test_every_entry_point_gives_the_same_translations(g2p):
    model, words = g2p
    words = words[:9]
    expected = Translator(model).translate(words)
    assert len(set(expected)) > 1  # not a constant output
    assert model.translate(words) == expected
    assert kerasseq.translate(model, words) == expected
    assert model.translator() is model.translator(SearchConfig())  # cached per config
    greedy = Translator(model, method="greedy").translate(words)
    assert model.translate(words, method="greedy") == greedy
    assert kerasseq.translate(model, words, config=SearchConfig(method="greedy")) == greedy


def test_sorted_batches_keep_the_input_order(g2p):
    model, words = g2p
    words = words[:11]
    one_by_one = [model.translate(word) for word in words]
    assert model.translate(words, batch_size=3) == one_by_one
    assert model.translate(list(reversed(words)), batch_size=4) == list(reversed(one_by_one))


@pytest.mark.slow
def test_xla_and_plain_searches_agree(g2p):
    model, words = g2p
    words = words[:6]
    for method in ("greedy", "beam"):
        xla, xla_scores = model.translate(words, method=method, jit_compile=True, return_scores=True)
        plain, plain_scores = model.translate(words, method=method, jit_compile=False,
                                              return_scores=True)
        assert xla == plain
        np.testing.assert_allclose(xla_scores, plain_scores, atol=1e-4)
    assert model.translator(jit_compile=True).jit_compile is True
    assert model.translator(jit_compile=False).jit_compile is False


def test_compiled_shapes_stay_bounded(g2p):
    model, words = g2p
    translator = Translator(model, method="greedy")
    for count in range(1, 10):  # 9 batch sizes -> row buckets 1, 2, 4, 8, 16
        translator.translate(words[:count])
    shapes = set(translator.compiled_shapes)
    assert {rows for rows, _ in shapes} <= {1, 2, 4, 8, 16}
    assert all(length % model.source_length_multiple == 0 for _, length in shapes)
    traces = translator.trace_count
    assert traces == len(shapes)  # one trace per bucket shape
    for count in range(1, 10):  # the same shapes again: nothing new is compiled
        translator.translate(words[:count])
    assert translator.trace_count == traces


def test_row_buckets_and_padding_rows():
    from kerasseq._buckets import pad_rows, row_edges, smallest_edge

    def bucket(rows, buckets="pow2"):
        return int(smallest_edge(row_edges(buckets), rows))

    assert [bucket(n) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]
    assert bucket(5, buckets=(4, 16, 64)) == 16
    assert bucket(100, buckets=(4, 16, 64)) == 100  # past the last bucket: as it is
    padded = pad_rows(tf.reshape(tf.range(6), [3, 2]), 4)  # extra rows repeat row 0
    assert padded.numpy().tolist() == [[0, 1], [2, 3], [4, 5], [0, 1]]


def test_source_buckets_geometric_and_multiple():
    from kerasseq._buckets import smallest_edge, source_bucket_edges

    def bucket(length, scheme="geometric"):
        return int(smallest_edge(source_bucket_edges(8, scheme), max(length, 1)))

    assert source_bucket_edges(8, up_to=300) == [8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384]
    assert source_bucket_edges(8, "multiple", up_to=40) == [8, 16, 24, 32, 40]
    assert [bucket(n) for n in (1, 8, 9, 25, 33, 49, 97, 129, 200)] == [
        8, 8, 16, 32, 48, 64, 128, 192, 256]
    assert [bucket(n, "multiple") for n in (1, 9, 33, 200)] == [8, 16, 40, 200]
    # never more than half again as long (once past 2 multiples)
    edges = source_bucket_edges(8)
    assert all(int(smallest_edge(edges, n)) <= 1.5 * n for n in range(17, 2000, 7))
    with pytest.raises(ValueError, match="source_buckets must be one of"):
        SearchConfig(source_buckets="pow2")
    with pytest.raises(ValueError, match="max_length_a must be a finite float >= 0"):
        SearchConfig(max_length_a=-1.0)


def test_geometric_buckets_compile_fewer_shapes_same_translations(g2p):
    model, words = g2p
    texts = [word * repeat for repeat in (1, 2, 3, 4, 5) for word in words[:8]]
    translations = {}
    for scheme in ("multiple", "geometric"):
        translator = Translator(model, method="greedy", batch_size=8, source_buckets=scheme)
        translations[scheme] = translator.translate(texts)
        lengths = {length for _, length in translator.compiled_shapes}
        if scheme == "geometric":
            assert lengths <= {8, 16, 24, 32, 48, 64, 96}
    assert translations["multiple"] == translations["geometric"]


def test_max_length_tied_to_the_source(g2p):
    model, words = g2p
    free = Translator(model, method="greedy", max_length=20)
    tied = Translator(model, method="greedy", max_length=20, max_length_a=0.25, max_length_b=1)
    ids = model.source_tokenizer.encode(words[:6]).to_tensor().numpy()
    free_ids, _, free_lengths = free.generate(ids)
    tied_ids, _, tied_lengths = tied.generate(ids)
    # sources padded to 8 columns: at most ceil(0.25 * 8 + 1) = 3 tokens, the same prefix
    assert tied_ids.shape == free_ids.shape == (6, 1, 20)
    (free_ids, free_lengths), (tied_ids, tied_lengths) = (
        (ids[:, 0], lengths[:, 0]) for ids, lengths in ((free_ids, free_lengths),
                                                        (tied_ids, tied_lengths)))
    assert (tied_lengths == np.minimum(free_lengths, 3)).all()
    np.testing.assert_array_equal(tied_ids[:, :3], free_ids[:, :3])
    assert not tied_ids[:, 3:].any()
    loose = Translator(model, method="beam", max_length=20, max_length_a=2.0, max_length_b=10)
    assert loose.translate(words[:6]) == Translator(model, max_length=20).translate(words[:6])


def test_transformer_cache_sized_to_the_search():
    model = tiny_g2p_model(build_transformer_seq2seq, 1, num_layers=2, d_model=16, num_heads=2,
                           dff=32, max_positions=40)
    ids = model.source_tokenizer.encode(["adopt", "ado"]).to_tensor()
    state = model.encode(ids, max_length=6)
    assert state["layer_0_self_key"].shape[1] == 6
    assert model.encode(ids)["layer_0_self_key"].shape[1] == 40
    with pytest.raises(ValueError, match=r"max_length must be an int in \[1, 40\]"):
        model.encode(ids, max_length=41)
    # the same tokens and scores as a search over the whole 40-position cache
    small = Translator(model, method="beam", max_length=6, jit_compile=False).generate(ids)
    full_state = model.encode(ids)
    token_ids, scores, lengths = decoding.beam_search(
        model.decode_step, full_state, batch_size=2, start_id=2, end_id=3, max_length=6,
        num_beams=4, shared_state=model.shared_state_keys)
    np.testing.assert_array_equal(small[0][:, 0], token_ids.numpy()[:, 0])
    np.testing.assert_allclose(small[1][:, 0], scores.numpy()[:, 0], atol=1e-5)


def test_buckets_are_not_reported_as_retracing(g2p):
    import logging

    model, words = g2p
    translator = Translator(model, method="greedy", batch_size=4, source_buckets="multiple")
    records = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")  # TensorFlow's own logger (no propagation)
    logger.addHandler(handler)
    try:
        for repeat in range(1, 9):  # eight source-length buckets, each traced once
            translator.translate([word * repeat for word in words[:4]])
    finally:
        logger.removeHandler(handler)
    assert translator.trace_count >= 6
    assert not [r for r in records if "retracing" in r.getMessage()]


def test_transformer_through_the_translator(tiny_transformer):
    model = tiny_transformer
    words = ["adopt", "adore", "ado"]
    ids, scores, lengths = model.generate(model.source_tokenizer.encode(words), method="beam",
                                          max_length=6)
    assert ids.shape == (3, 1, 6) and scores.shape == (3, 1) and lengths.shape == (3, 1)
    texts = model.translate(words, max_length=6)
    assert texts == model.target_tokenizer.decode_to_strings(ids[:, 0])
    with pytest.raises(ValueError, match=r"max_length must be <= the model.s max_positions=12 \(its position table\)"):
        model.translate(words, max_length=13)


def test_one_source_limit_for_the_eager_and_the_graph_path(g2p):
    """`Translator.source_limit` is read by `translate` (eager) and by
    `translate_tensor` (the graph an export serves): the same cut in both."""
    model, words = g2p
    long_words = [word * 6 for word in words[:3]]  # 18+ characters
    translator = Translator(model, method="greedy", max_source_length=5, jit_compile=False)
    assert translator.source_limit == 5
    eager = translator.translate(long_words)
    graph = tf.function(lambda text: translator.translate_tensor(text)[0])(
        tf.constant(long_words))
    assert [t.decode() for t in graph.numpy()[:, 0]] == eager
    assert eager == Translator(model, method="greedy").translate([w[:5] for w in long_words])
    # no limit: every token in both paths (an RNN reads any length; the graph
    # path used to cut at 256 tokens)
    free = Translator(model, method="greedy", jit_compile=False)
    assert free.source_limit is None
    very_long = [(word * 100)[:300] for word in words[:2]]
    searched = tf.function(lambda text: free._translate_tensor_ids(text, 1)[2])(
        tf.constant(very_long))
    assert np.count_nonzero(searched.numpy(), axis=1).tolist() == [300, 300]  # every character
    graph = tf.function(lambda text: free.translate_tensor(text)[0])(tf.constant(very_long))
    assert [t.decode() for t in graph.numpy()[:, 0]] == free.translate(very_long)


def test_transformer_position_table_is_one_rule_in_both_paths(tiny_transformer):
    model = tiny_transformer
    with pytest.raises(SearchConfigError, match="max_source_length must be <= the model's "
                                                "max_positions=12") as caught:
        model.translate(["adopt"], max_source_length=13)
    assert caught.value.field == "max_source_length"
    translator = Translator(model, method="greedy", jit_compile=False)
    too_long = ["abcdefghijklmnop"]  # 16 characters > the 12 positions
    with pytest.raises(ValueError, match="more than max_positions=12 tokens"):
        translator.translate(too_long)
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than max_positions=12 tokens"):
        tf.function(lambda text: translator.translate_tensor(text)[0])(tf.constant(too_long))
    # with a limit, both paths cut to it
    cut = Translator(model, method="greedy", jit_compile=False, max_source_length=12)
    graph = tf.function(lambda text: cut.translate_tensor(text)[0])(tf.constant(too_long))
    assert [t.decode() for t in graph.numpy()[:, 0]] == cut.translate(too_long) == \
        translator.translate([too_long[0][:12]])


# ------------------------------------------------------------- contract
class TableDecodable:
    """A non-Keras object that meets the contract: the sheep/ship Markov table."""

    start_id, end_id, max_target_length = 1, 2, 5  # [start], [end] of that table

    def __init__(self):
        self.table, self.vocabulary = sheep_ship_model()

    def encode(self, source_ids):
        rows = tf.shape(source_ids)[0]
        return {"unused": tf.zeros([rows, 1])}

    def decode_step(self, token_ids, state, step):
        return self.table.step_fn(token_ids, state, step)


def test_text_needs_tokenizers_and_alignments_attention():
    """One check and one message for a model without tokenizers, on the eager
    and the graph path alike (`Translator.text_tokenizers`); `align_tensor` on
    a model without attention fails with the alignment's own error."""
    ids_only = build_rnn_seq2seq(10, 10, embedding_dim=4, units=4, max_target_length=3)
    translator = Translator(ids_only, method="greedy", jit_compile=False)
    assert translator.generate(np.ones([1, 2], np.int32))[0].shape == (1, 1, 3)
    message = r"needs a model built with source_tokenizer .* Received: model.source_tokenizer=None"
    with pytest.raises(ValueError, match=message):
        translator.translate(["abc"])
    with pytest.raises(ValueError, match=message):
        tf.function(translator.translate_tensor)(tf.constant(["abc"]))
    no_attention = tiny_g2p_model(build_rnn_seq2seq, 0, embedding_dim=4, units=4,
                                  attention=None, max_target_length=3)
    translator = Translator(no_attention, method="greedy", jit_compile=False)
    assert translator.text_tokenizers == (no_attention.source_tokenizer,
                                          no_attention.target_tokenizer)
    for align in (lambda: translator.translate(["abc"], return_alignments=True),
                  lambda: tf.function(translator.align_tensor)(tf.constant(["abc"]))):
        with pytest.raises(ValueError, match="Word alignments need a model with attention"):
            align()


def test_progress_bar_counts_every_text_blank_ones_included(capsys):
    model = tiny_g2p_model(build_rnn_seq2seq, 0, embedding_dim=4, units=4, max_target_length=3)
    translator = Translator(model, method="greedy", jit_compile=False, batch_size=2)
    translations = translator.translate(["", "abc", " ", "ab", "a"], verbose=1)
    assert translations[0] == translations[2] == "" and len(translations) == 5
    assert "5/5" in capsys.readouterr().out
    translator.translate(["abc"])  # verbose=0: silent
    assert capsys.readouterr().out == ""


def test_any_decodable_is_searched_like_a_model():
    decodable = TableDecodable()
    assert isinstance(decodable, Seq2SeqDecodable)
    assert isinstance(build_rnn_seq2seq(10, 10, units=8), Seq2SeqDecodable)
    source_ids = np.ones([3, 2], np.int32)  # 3 rows: padded to the 4-row bucket and back
    ids, scores, lengths = Translator(decodable, num_beams=2, jit_compile=False).generate(source_ids)
    direct = decoding.beam_search(decodable.decode_step, {"unused": tf.zeros([3, 1])}, 3,
                                  1, 2, num_beams=2, max_length=5)
    words = [decodable.vocabulary[i] for i in ids[0, 0, :lengths[0, 0]]]
    assert words == ["ship", "passed"]  # beam search finds the better path
    for ours, reference in zip((ids, scores, lengths), direct, strict=True):
        np.testing.assert_allclose(ours, np.asarray(reference), atol=1e-6)
    with pytest.raises(TypeError, match="decoding contract"):
        Translator(object())


def test_models_do_not_import_the_search():
    """docs/design.md: models implement the contract; the translator owns the search."""
    for path in sorted((REPO / "kerasseq" / "models").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            # The contract (its state keys) is what models implement, and a model's
            # own search limits raise the settings' error; the searches are not theirs.
            searches = [name for name in names if name.startswith("kerasseq.decoding")
                        and not name.startswith(("kerasseq.decoding.contract",
                                                 "kerasseq.decoding.config"))]
            assert not searches, (path, names)


def test_the_contract_lists_every_hook_the_translator_reads():
    """The translator reads a model only through the protocol's list of hooks."""
    from kerasseq.decoding import contract

    source = (REPO / "kerasseq" / "translator.py").read_text()
    tree = ast.parse(source)
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "getattr" and ast.unparse(node.args[0]) in ("model", "self.model") \
                and isinstance(node.args[1], ast.Constant):
            raise AssertionError(f"getattr on the model outside the contract: {ast.unparse(node)}")
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "contract.optional":
            read.add(node.args[1].value)
    assert "trim_source_ids" in read and read <= set(contract.OPTIONAL_ATTRIBUTES)
    with pytest.raises(KeyError, match="not an attribute of the decoding contract"):
        contract.optional(object(), "anything")


def test_one_definition_of_ids_state_keys_and_serving_code():
    from kerasseq import translator
    from kerasseq.data import tokenizer
    from kerasseq.decoding import contract
    from kerasseq.models import ensemble

    assert (translator.PAD_ID, translator.START_ID, translator.END_ID) == (
        tokenizer.PAD_ID, tokenizer.START_ID, tokenizer.END_ID)
    assert "PAD_ID, START_ID, END_ID =" not in (REPO / "kerasseq" / "translator.py").read_text()
    assert ensemble.ATTENTION_WEIGHTS is contract.ATTENTION_WEIGHTS
    assert ensemble.SOURCE_MASK is contract.SOURCE_MASK
    assert not hasattr(translator, "ServingModule")
    assert "class ServingModule" not in (REPO / "kerasseq" / "translator.py").read_text()
    assert "_python" not in (REPO / "kerasseq" / "export.py").read_text().replace(
        "self._python", "")


def test_translator_cache_lives_on_the_model(g2p):
    import gc
    import weakref

    model, words = g2p
    translator = get_translator(model, method="greedy", batch_size=3)
    assert model.translator_cache[translator.config] is translator
    assert "_kerasseq_translators" not in vars(model)
    # a model that is dropped takes its translators with it
    temporary = build_rnn_seq2seq(10, 10, units=4, max_target_length=3)
    temporary.generate(np.ones([2, 2], np.int32))
    reference = weakref.ref(temporary)
    del temporary
    gc.collect()
    assert reference() is None
    # an object without a translator_cache gets a new translator every time
    decodable = TableDecodable()
    assert get_translator(decodable, num_beams=2) is not get_translator(decodable, num_beams=2)


def test_get_translator_reuses_compiled_functions(g2p):
    model, words = g2p
    first = get_translator(model, method="greedy")
    first.translate(words[:3])
    assert get_translator(model, SearchConfig(method="greedy")) is first
    assert get_translator(model, method="greedy", num_beams=2) is not first
