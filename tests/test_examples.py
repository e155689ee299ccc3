"""Smoke tests of the runnable scripts in examples/: each runs `main(["--smoke", ...])`.

A smoke run trains a tiny model for a few steps and goes through the whole
script (data, tokenizers, fit, greedy and beam decoding, scoring, saving); the
numbers are meaningless, so the tests check the results' shape and files.
"""

import importlib.util
import json
import os
import pathlib
import sys

import pytest

pytestmark = pytest.mark.slow  # the examples: `make test-all` only

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load_example(name):
    """Import examples/<name>.py as a module (examples/ is not a package; as
    when a script runs, its folder is on the path, for examples/_*.py)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_english_to_bengali_numbers_smoke(tmp_path):
    module = load_example("english_to_bengali_numbers")
    results = module.main(["--smoke", "--output-dir", str(tmp_path)])
    for key in ("dev_exact_match_greedy", "dev_exact_match_beam"):
        assert 0.0 <= results[key] <= 1.0
    assert 0.0 <= results["dev_bleu_greedy"] <= 100.0
    assert (tmp_path / "attention.png").stat().st_size > 0
    assert (tmp_path / "model.keras").exists()


def test_english_to_bengali_numbers_split_is_deterministic_and_disjoint():
    module = load_example("english_to_bengali_numbers")
    splits = [module.split_of(number) for number in range(10_000)]
    assert splits == [module.split_of(number) for number in range(10_000)]
    counts = {name: splits.count(name) for name in ("train", "dev", "test")}
    assert sum(counts.values()) == 10_000
    assert all(800 < counts[name] < 1200 for name in ("dev", "test"))
    # Every two-digit ending appears in training (a `n % 100`-style rule would not do that).
    assert {n % 100 for n in range(10_000) if splits[n] == "train"} == set(range(100))
    assert module.make_pairs("dev", limit=20) == [
        (module.num2words(n, lang="en"), module.num2words(n, lang="bn"))
        for n in range(20) if splits[n] == "dev"
    ]


def test_tfds_translate_smoke_with_mock_data(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    module = load_example("tfds_translate")
    # Random examples generated from the dataset's features: no download, no network.
    with tfds.testing.mock_data(num_examples=64, policy=tfds.testing.MockPolicy.USE_CODE):
        results = module.main(["--smoke", "--output-dir", str(tmp_path)])
    assert results["train_pairs"] > 0
    assert results["validation"]["examples"] == 8
    assert 0.0 <= results["validation"]["bleu_greedy"] <= 100.0
    assert (tmp_path / "model.keras").exists()


def test_tfds_translate_load_pairs_decodes_to_str():
    tfds = pytest.importorskip("tensorflow_datasets")
    module = load_example("tfds_translate")
    with tfds.testing.mock_data(num_examples=5, policy=tfds.testing.MockPolicy.USE_CODE):
        pairs = module.load_pairs("train", limit=3)
    assert len(pairs) == 3
    assert all(isinstance(text, str) and text for pair in pairs for text in pair)


def test_german_to_english_ding_smoke(tmp_path):
    module = load_example("german_to_english_ding")
    if not os.path.exists(module.DEFAULT_PATH):
        pytest.skip(f"{module.DEFAULT_PATH} is missing: the German example needs the Debian "
                    "package dict-freedict-deu-eng (make examples-data)")
    results = module.main(["--smoke", "--output-dir", str(tmp_path)])
    assert results["test_pairs"] == 16
    models = results["models"]
    assert list(models) == ["transformer", "rnn_attention", "rnn_none"]
    for name, scores in models.items():
        assert 0.0 <= scores["test_bleu_greedy"] <= 100.0
        assert 0.0 <= scores["test_bleu_beam"] <= 100.0
        assert len(scores["history"]["dev_bleu"]) == scores["epochs_run"] == 1
        assert sum(row["count"] for row in scores["test_bleu_by_length_beam"]) == 16
        assert (tmp_path / f"{name}.keras").exists()
    assert models["rnn_attention"]["parameters"] > models["rnn_none"]["parameters"]
    assert json.loads((tmp_path / "results.json").read_text())["test_pairs"] == 16
    assert (tmp_path / "learning_curves.png").stat().st_size > 0


def test_german_to_english_ding_missing_dictionary_exits_cleanly(tmp_path, capsys):
    module = load_example("german_to_english_ding")
    missing = tmp_path / "missing.dict.dz"
    assert module.main(["--smoke", "--dict-path", str(missing),
                        "--output-dir", str(tmp_path)]) is None
    assert "dict-freedict-deu-eng" in capsys.readouterr().out


def test_german_example_tokenizers_give_readable_text():
    """The example's subwords are kerasseq.data.WordPieceTextTokenizer's: pieces in,
    readable text out (## pieces glued, punctuation attached)."""
    from kerasseq.data import WordPieceTextTokenizer

    module = load_example("german_to_english_ding")
    pairs = [("Ich glaube nicht, wirklich.", "I don't think so, really."),
             ("Das ist allgemein bekannt!", "That is well-known!")]
    source, target = module.make_tokenizers(pairs, vocabulary_size=100)
    assert isinstance(source, WordPieceTextTokenizer) and source.name == "source_tokenizer"
    assert isinstance(target, WordPieceTextTokenizer) and target.name == "target_tokenizer"
    english = [english for _, english in pairs]
    assert target.decode_to_strings(target.encode(english)) == [
        "i don't think so, really.", "that is well-known!"]


def test_information_bottleneck_smoke(tmp_path):
    module = load_example("information_bottleneck")
    summary = module.main(["--smoke", "--output-dir", str(tmp_path)])
    assert summary["train_pairs"] == 256 and summary["test_pairs"] == 64
    models = summary["models"]
    assert [result["attention"] for result in models.values()] == [None, "bahdanau"]
    for result in models.values():
        assert 0.0 <= result["exact_match"] <= 1.0 and result["character_error_rate"] >= 0.0
        assert [row["bucket"] for row in result["by_length"]][-1] == "26+"
        assert sum(row["count"] for row in result["by_length"]) == 64
    assert (tmp_path / "bottleneck_by_length.png").stat().st_size > 0
    assert json.loads((tmp_path / "results.json").read_text())["table"] == summary["table"]


def test_information_bottleneck_pairs():
    module = load_example("information_bottleneck")
    train = module.make_pairs(200, seed=0)
    test = module.make_pairs(50, seed=1, exclude=[source for source, _ in train])
    assert train == module.make_pairs(200, seed=0)
    assert not {source for source, _ in train} & {source for source, _ in test}
    assert all(2 <= len(source) <= 30 and target == " ".join(reversed(source))
               for source, target in train + test)
    assert module.reverse_target("abc") == "c b a"


def test_plot_attention_heatmap_smoke(tmp_path):
    output = tmp_path / "attention.png"
    path = load_example("plot_attention_heatmap").main(["--smoke", "--output", str(output)])
    assert path == str(output) and output.stat().st_size > 0


def test_plot_transformer_attention_smoke(tmp_path):
    module = load_example("plot_transformer_attention")
    summary = module.main(["--smoke", "--output-dir", str(tmp_path)])
    assert summary["train_pairs"] == 576 and summary["test_pairs"] == 144
    assert 0.0 <= summary["test_exact_match"] <= 1.0
    assert 0.0 <= summary["test_alignment_accuracy"] <= 1.0
    for name in ("causal_mask.png", "cross_attention_svo_sov.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_plot_transformer_attention_pairs():
    module = load_example("plot_transformer_attention")
    pairs = module.make_pairs()
    assert len(pairs) == 10 * 9 * 8 and len(set(pairs)) == len(pairs)
    assert ("cat sees dog", "baku gomu sekta") in pairs  # S V O -> S' O' V'
    train, test = module.split_pairs(pairs)
    assert len(test) == 144 and not {s for s, _ in train} & {s for s, _ in test}
    assert module.EXAMPLE in {source for source, _ in test}


def test_readme_lists_every_script():
    """examples/README.md has a row for every script (and names the helper module)."""
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    missing = [path.name for path in sorted(EXAMPLES.glob("*.py")) if f"`{path.name}`" not in readme]
    assert not missing, f"examples/README.md does not mention {missing}"
