import warnings

import keras
import numpy as np
import pytest

from kerasseq import plotting
from kerasseq.plotting import (
    plot_attention,
    plot_cross_attention_heads,
    plot_history,
    plot_learning_curves,
    plot_scores_by_length,
    save_figure,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _tick_texts(labels):
    return [label.get_text() for label in labels]


def _assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 1000


def test_plot_attention_labels_and_png(tmp_path):
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
    figure = plot_attention(weights, ["the", "black", "cat"], ["le", "chat"], title="demo")
    heatmap = figure.axes[0]
    assert len(figure.axes) == 2  # heatmap + colour bar
    assert _tick_texts(heatmap.get_xticklabels()) == ["the", "black", "cat"]
    assert _tick_texts(heatmap.get_yticklabels()) == ["le", "chat"]
    np.testing.assert_allclose(heatmap.images[0].get_array(), weights)
    path = save_figure(figure, tmp_path / "nested" / "attention.png")
    _assert_png(tmp_path / "nested" / "attention.png")
    assert path.endswith("attention.png")
    assert [p.name for p in (tmp_path / "nested").iterdir()] == ["attention.png"]  # no temp file


def test_plot_attention_into_existing_axes_and_batch_of_one():
    from matplotlib.figure import Figure

    figure = Figure()
    ax = figure.add_subplot()
    returned = plot_attention(np.full((1, 2, 2), 0.5), ["a", "b"], ["x", "y"], ax=ax, colorbar=False)
    assert returned is figure
    assert len(figure.axes) == 1


def test_plot_attention_rejects_mismatched_tokens():
    with pytest.raises(ValueError, match="target_length, source_length"):
        plot_attention(np.ones((2, 3)), ["a", "b"], ["x", "y"])
    with pytest.raises(ValueError, match="2 dimensions"):
        plot_attention(np.ones((2, 3, 4, 5)), ["a"], ["x"])


def test_cross_attention_heads_one_axes_per_head(tmp_path):
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(4), size=(6, 3))  # (num_heads, target_length, source_length)
    figure = plot_cross_attention_heads(weights, list("abcd"), ["x", "y", "z"], ncols=4)
    heads = [ax for ax in figure.axes if ax.get_title().startswith("head")]
    assert len(heads) == 6
    assert len(figure.axes) == 7  # + one shared colour bar
    for ax in heads:
        assert _tick_texts(ax.get_xticklabels()) == list("abcd")
        assert _tick_texts(ax.get_yticklabels()) == ["x", "y", "z"]
    save_figure(figure, tmp_path / "heads.png")
    _assert_png(tmp_path / "heads.png")


def test_missing_bengali_font_warns_once_and_still_renders(tmp_path, monkeypatch):
    monkeypatch.setattr(plotting, "find_font", lambda script: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = plot_attention(
            [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]], ["I", "love", "Bangladesh"], ["আমি", "ভালোবাসি"]
        )
        save_figure(figure, tmp_path / "bengali.png")
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    assert "Bengali" in messages[0]
    _assert_png(tmp_path / "bengali.png")
    assert _tick_texts(figure.axes[0].get_yticklabels()) == ["আমি", "ভালোবাসি"]


def test_installed_font_is_used_for_bengali(monkeypatch):
    monkeypatch.setattr(plotting, "find_font", lambda script: "DejaVu Serif")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figure = plot_attention([[1.0]], ["a"], ["আমি"])
    label = figure.axes[0].get_yticklabels()[0]
    assert label.get_fontfamily()[0] == "DejaVu Serif"


def test_latin_labels_never_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_attention([[1.0]], ["naïve"], ["ok"])
    assert plotting.scripts_in(["naïve", "Straße"]) == []
    assert plotting.scripts_in(["ভালো"]) == ["Bengali"]


def test_plot_history_from_keras_history(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    x = np.ones((8, 2), "float32")
    history = model.fit(x, np.zeros((8, 1)), validation_data=(x, np.zeros((8, 1))),
                        epochs=3, verbose=0)
    figure = plot_history(history, metrics=("loss", "mae"))
    assert len(figure.axes) == 2
    for ax, name in zip(figure.axes, ("loss", "mae"), strict=True):
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels == ["train", "validation"]
        np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), history.history[name])
        np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), history.history[f"val_{name}"])
        assert list(ax.get_lines()[0].get_xdata()) == [1, 2, 3]
    save_figure(figure, tmp_path / "history.png")
    _assert_png(tmp_path / "history.png")


def test_plot_history_from_dict_without_validation():
    figure = plot_history({"loss": [3.0, 2.0]}, metrics="loss")
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["train"]
    with pytest.raises(ValueError, match="Available"):
        plot_history({"loss": [1.0]}, metrics=("accuracy",))


def test_plot_scores_by_length_forms(tmp_path):
    rows = [
        {"bucket": "0-9", "min_length": 0, "max_length": 9, "count": 3, "score": 40.0},
        {"bucket": "10+", "min_length": 10, "max_length": None, "count": 0, "score": None},
    ]
    figure = plot_scores_by_length(rows, ylabel="BLEU")
    ax = figure.axes[0]
    assert _tick_texts(ax.get_xticklabels()) == ["0-9", "10+"]
    assert [patch.get_height() for patch in ax.patches] == [40.0]  # empty bucket: no bar

    figure = plot_scores_by_length([((0, 9), 35.0), ((10, None), 25.0)])
    assert _tick_texts(figure.axes[0].get_xticklabels()) == ["0-9", "10+"]

    figure = plot_scores_by_length(
        {"context vector": {"<10": 35.0, "10-20": 25.0}, "attention": {"<10": 40.0, "10-20": 35.0}}
    )
    ax = figure.axes[0]
    assert len(ax.patches) == 4
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["context vector", "attention"]
    save_figure(figure, tmp_path / "scores.png")
    _assert_png(tmp_path / "scores.png")


def test_save_figure_is_atomic_on_failure(tmp_path):
    target = tmp_path / "keep.png"
    target.write_bytes(b"old")
    figure = plot_scores_by_length({"a": 1.0})
    with pytest.raises(ValueError):
        save_figure(figure, tmp_path / "keep.notaformat")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.png"]


def test_plot_learning_curves_one_colour_per_model(tmp_path):
    rnn = {"loss": [3.0, 2.0, 1.5], "val_loss": [3.1, 2.5, 2.2], "dev_bleu": [1.0, 4.0, 6.0]}
    transformer = keras.callbacks.History()
    transformer.history = {"loss": [2.5, 1.0], "dev_bleu": [2.0, 9.0]}  # no validation loss
    path = tmp_path / "curves.png"
    figure = plot_learning_curves({"rnn": rnn, "transformer": transformer},
                                  score_title="dev BLEU (greedy, dev verses)", path=path)
    loss_ax, score_ax = figure.axes
    assert [line.get_label() for line in loss_ax.lines] == ["rnn train", "rnn dev",
                                                            "transformer train"]
    assert loss_ax.lines[0].get_color() == loss_ax.lines[1].get_color() == "C0"
    assert loss_ax.lines[0].get_linestyle() == "--" and loss_ax.lines[2].get_color() == "C1"
    assert [line.get_label() for line in score_ax.lines] == ["rnn", "transformer"]
    np.testing.assert_allclose(score_ax.lines[1].get_ydata(), [2.0, 9.0])
    np.testing.assert_allclose(score_ax.lines[0].get_xdata(), [1, 2, 3])
    assert score_ax.get_title() == "dev BLEU (greedy, dev verses)"
    assert score_ax.get_ylabel() == "BLEU"
    _assert_png(path)
    with pytest.raises(ValueError, match="has no 'loss'"):
        plot_learning_curves({"rnn": {"dev_bleu": [1.0]}})
    with pytest.raises(ValueError, match="at least one model"):
        plot_learning_curves({})


def test_plot_learning_curves_against_minutes_of_training():
    """`x="fit_minutes"`: each model's points sit at its own minutes (models whose
    epochs took different times share one time axis)."""
    rnn = {"loss": [3.0, 2.0], "val_loss": [3.1, 2.5], "dev_bleu": [1.0, 4.0],
           "fit_minutes": [7.5, 15.2]}
    transformer = {"loss": [2.5, 1.0, 0.9], "dev_bleu": [2.0, 9.0, 9.5],
                   "fit_minutes": [5.0, 10.1, 14.9]}
    figure = plot_learning_curves({"rnn": rnn, "transformer": transformer}, x="fit_minutes",
                                  x_label="minutes of fit")
    loss_ax, score_ax = figure.axes
    np.testing.assert_allclose(loss_ax.lines[1].get_xdata(), [7.5, 15.2])
    np.testing.assert_allclose(score_ax.lines[1].get_xdata(), [5.0, 10.1, 14.9])
    np.testing.assert_allclose(score_ax.lines[1].get_ydata(), [2.0, 9.0, 9.5])
    assert score_ax.get_xlabel() == loss_ax.get_xlabel() == "minutes of fit"
    with pytest.raises(ValueError, match="x='fit_minutes' must be a list in the history of 'rnn'"):
        plot_learning_curves({"rnn": {"loss": [1.0, 0.5], "fit_minutes": [3.0]}},
                             x="fit_minutes")
