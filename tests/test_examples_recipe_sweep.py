"""examples/bible_recipe_sweep.py on a folder the test writes: the pieces read by
a whitespace TextTokenizer get the WordPiece ids, the step budgets follow the
timed step costs, and `train-one` + `score` run end to end (2 steps)."""

import json

import pytest

from tests.test_examples import load_example

pytestmark = pytest.mark.slow  # the examples: `make test-all` only

TEXTS = ["the heavens and the earth were finished", "and god rested on the seventh day",
         "he blessed the seventh day", "the earth was formless and empty"]


@pytest.fixture(scope="module")
def sweep():
    return load_example("bible_recipe_sweep")


@pytest.fixture(scope="module")
def data(tmp_path_factory, sweep):
    from kerasseq.data import WordPieceTextTokenizer

    folder = tmp_path_factory.mktemp("sweep_data")
    tokenizer = WordPieceTextTokenizer.from_texts(TEXTS, max_tokens=60)
    vocabulary = tokenizer.get_vocabulary()
    (folder / "vocabulary.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    pieces = [" ".join(vocabulary[i] for i in row) for row in tokenizer.encode(TEXTS).to_list()]
    rows = "".join(f"{source}\t{target}\t{text}\n"
                   for source, target, text in zip(pieces, pieces[::-1], TEXTS[::-1],
                                                   strict=True))
    (folder / "train.tsv").write_text(rows * 8, encoding="utf-8")
    (folder / "dev.tsv").write_text(rows, encoding="utf-8")
    return folder, tokenizer, pieces


def test_whitespace_pieces_get_the_wordpiece_ids(data, sweep):
    folder, tokenizer, pieces = data
    assert any("##" in text for text in pieces)  # words split into pieces
    ids = sweep.whitespace_tokenizer(str(folder)).encode(pieces).to_list()
    assert ids == tokenizer.encode(TEXTS).to_list()


def test_step_budgets_give_each_recipe_the_base_run_s_time(sweep):
    timed = {"base": 2.0, "dff_1024": 2.5, "layers_4": 3.0, "batch_128": 4.0, "guided": 1.9,
             "tokens": 2.0}
    steps = sweep.step_budgets({name: {"cpu_step_seconds": seconds}
                                for name, seconds in timed.items()})
    budget = {name: values["steps"] for name, values in steps.items()}
    base = sweep.BASE_STEPS
    assert budget["base"] == base == 5394
    assert budget["dff_1024"] == round(base * 2.0 / 2.5) == 4315
    assert budget["layers_4"] == round(base * 2.0 / 3.0) == 3596
    assert budget["batch_128"] == base // 2
    assert budget["guided"] == base  # timed faster than the base (noise): capped
    assert budget["lr_scale_2"] == budget["dropout_0"] == base
    assert steps["dropout_0"]["timed_as"] == "base"
    assert budget["guided_weight_0.5"] == budget["guided_weight_0.5_layer_2"] == base
    assert set(budget) == set(sweep.RECIPES)


def test_tokens_recipe_batches_hold_the_base_recipe_s_mean_pieces(data, sweep):
    """The `tokens` recipe's budget is the base recipe's mean padded pieces per
    batch; its batches stay within it (or hold one verse) and keep every verse."""
    import numpy as np

    folder = str(data[0])
    base = list(sweep.dataset(folder, sweep.recipe("base"), seed=1))
    sizes = [target_out.shape[0] * target_out.shape[1] for _, target_out in base]
    budget = sweep.mean_batch_tokens(base)
    assert budget == round(np.mean(sizes)) and budget > 0
    tokens = list(sweep.dataset(folder, sweep.recipe("tokens"), seed=1))
    for _, target_out in tokens:
        assert target_out.shape[0] * target_out.shape[1] <= budget or target_out.shape[0] == 1
    real = [int(np.asarray(target_out).any(axis=1).sum()) for _, target_out in tokens]
    assert sum(real) == sum(int(np.asarray(t).any(axis=1).sum()) for _, t in base) == 32


def test_train_one_and_score_run_end_to_end(data, sweep, tmp_path, capsys):
    folder = data[0]
    out = tmp_path / "base.json"
    weights = tmp_path / "base.npz"
    sweep.main(["train-one", "--data", str(folder), "--recipe", "base", "--steps", "2",
                "--minutes", "5", "--threads", "0", "--dev-examples", "2", "--out", str(out),
                "--weights", str(weights)])
    record = json.loads(out.read_text())
    assert record["steps"] == 2 and record["target_steps"] == 2
    assert len(record["dev_greedy_ids"]) == 2
    assert all(isinstance(i, int) for row in record["dev_greedy_ids"] for i in row)
    capsys.readouterr()
    sweep.main(["score", "--data", str(folder), str(out)])
    table = capsys.readouterr().out
    assert "| base | 2 (2) |" in table


def test_train_runs_the_recipes_in_waves_of_parallel_processes(data, sweep, tmp_path, capsys):
    folder = data[0]
    budget = tmp_path / "steps.json"
    budget.write_text(json.dumps({"recipes": {"base": {"steps": 2}, "dropout_0": {"steps": 1}}}),
                      encoding="utf-8")
    out, logs = tmp_path / "out", tmp_path / "logs"
    logs.mkdir()
    sweep.main(["train", "--data", str(folder), "--steps", str(budget), "--out", str(out),
                "--logs", str(logs), "--parallel", "1", "--threads", "1", "--minutes", "5"])
    printed = capsys.readouterr().out
    assert printed.index("base: exit 0") < printed.index("dropout_0: exit 0")  # one at a time
    steps = {name: json.loads((out / f"{name}.json").read_text())["steps"]
             for name in ("base", "dropout_0")}
    assert steps == {"base": 2, "dropout_0": 1}
    assert json.loads((out / "dropout_0.json").read_text())["settings"]["transformer_dropout"] == 0.0
    assert (logs / "base.log").exists()


def test_to_keras_puts_the_weights_into_a_model_with_the_wordpiece_tokenizers(data, sweep,
                                                                               tmp_path):
    import keras
    import numpy as np

    from kerasseq.data import WordPieceTextTokenizer

    folder, tokenizer, _ = data
    assert sweep.POSITIONS == load_example("spanish_to_english_bible").POSITIONS
    model = sweep.build(sweep.recipe("base"), (tokenizer, tokenizer))
    weights = [np.asarray(w) for w in model.get_weights()]
    npz = tmp_path / "w.npz"
    np.savez(npz, *[w.astype("float16") for w in weights])
    path = tmp_path / "model.keras"
    sweep.main(["to-keras", "--data", str(folder), "--recipe", "base", "--weights", str(npz),
                "--out", str(path)])
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.source_tokenizer, WordPieceTextTokenizer)
    assert loaded.source_tokenizer.encode(TEXTS).to_list() == tokenizer.encode(TEXTS).to_list()
    for got, expected in zip(loaded.get_weights(), weights, strict=True):
        np.testing.assert_array_equal(got, expected.astype("float16").astype("float32"))
