"""Figures for sequence-to-sequence models: attention heatmaps and training curves.

Every function builds a `matplotlib.figure.Figure` directly (never through
`pyplot`), so it works with the non-interactive Agg backend, on servers and in
tests, and leaves no global figure state behind. Pass `ax=` to draw into an
existing axes instead.

Tokens in a non-Latin script (Bengali, Devanagari, Arabic, ...) need a font
that has their glyphs. The heatmap functions look for one among the installed
fonts (e.g. "Noto Sans Bengali", "Lohit Bengali", "FreeSans") and use it for
the tick labels. When no installed font covers the script they emit a single
`UserWarning` naming the script, and the figure is still drawn (the missing
glyphs show as boxes).
"""

import functools
import math
import os
import warnings

import numpy as np
from matplotlib.figure import Figure

from kerasseq._files import replace_atomically
from kerasseq._validation import check_positive_int

# Unicode blocks of the scripts we know how to look a font up for:
# script name -> (first code point, last code point, preferred font families).
SCRIPTS = {
    "Bengali": (0x0980, 0x09FF, ("Noto Sans Bengali", "Noto Serif Bengali", "Lohit Bengali",
                                 "Mukti Narrow", "FreeSans", "FreeSerif")),
    "Devanagari": (0x0900, 0x097F, ("Noto Sans Devanagari", "Lohit Devanagari", "FreeSans")),
    "Arabic": (0x0600, 0x06FF, ("Noto Sans Arabic", "Noto Naskh Arabic", "DejaVu Sans",
                                "FreeSerif")),
    "Hebrew": (0x0590, 0x05FF, ("Noto Sans Hebrew", "DejaVu Sans", "FreeSans")),
    "Thai": (0x0E00, 0x0E7F, ("Noto Sans Thai", "Loma", "FreeSerif")),
    "Tamil": (0x0B80, 0x0BFF, ("Noto Sans Tamil", "Lohit Tamil", "FreeSerif")),
    "Hangul": (0xAC00, 0xD7AF, ("Noto Sans CJK KR", "NanumGothic", "UnDotum")),
    "CJK": (0x4E00, 0x9FFF, ("Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Zen Hei",
                             "Droid Sans Fallback")),
    "Hiragana/Katakana": (0x3040, 0x30FF, ("Noto Sans CJK JP", "IPAGothic", "TakaoGothic")),
}

FALLBACK_FAMILY = "DejaVu Sans"


# ---------------------------------------------------------------------- fonts
def scripts_in(texts):
    """Names of the scripts of `SCRIPTS` used by any character of `texts`.

    Example:

    >>> scripts_in(["the", "আমি"])
    ['Bengali']
    """
    found = set()
    for text in texts:
        for character in str(text):
            code = ord(character)
            if code < 0x0590:  # Latin, Greek, Cyrillic: DejaVu Sans has them
                continue
            for name, (first, last, _) in SCRIPTS.items():
                if first <= code <= last:
                    found.add(name)
    return sorted(found)


def _sample_character(script):
    first, last, _ = SCRIPTS[script]
    return {"Bengali": "আ", "Devanagari": "क", "Arabic": "ب", "Hebrew": "א",
            "Thai": "ก", "Tamil": "க"}.get(script, chr(first))


def _font_covers(path, character):
    from matplotlib.ft2font import FT2Font

    try:
        return ord(character) in FT2Font(path).get_charmap()
    except (OSError, RuntimeError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def find_font(script):
    """The family name of an installed font that covers `script`, or None.

    Preferred families (see `SCRIPTS`) are tried first; then every font
    matplotlib knows is checked for a glyph of the script.

    Args:
        script: a key of `SCRIPTS`, e.g. "Bengali".

    Returns:
        str (a family name usable as `fontfamily=`) or None.
    """
    from matplotlib import font_manager

    if script not in SCRIPTS:
        raise ValueError(f"script must be one of {sorted(SCRIPTS)}. Received: script={script!r}")
    character = _sample_character(script)
    fonts = font_manager.fontManager.ttflist
    by_name = {}
    for font in fonts:
        if not font.name.startswith("Last Resort"):  # placeholder boxes for every code point
            by_name.setdefault(font.name, font.fname)
    for family in SCRIPTS[script][2]:
        if family in by_name and _font_covers(by_name[family], character):
            return family
    for name, path in sorted(by_name.items()):
        if _font_covers(path, character):
            return name
    return None


def _label_fonts(texts):
    """Font families for labels made of `texts`; warns once about missing scripts.

    Returns:
        `(families, missing_scripts)`: a list of family names to pass as
        `fontfamily=` (None when the default font will do) and the scripts
        no installed font covers.
    """
    families, missing = [], []
    for script in scripts_in(texts):
        family = find_font(script)
        if family is None:
            missing.append(script)
        elif family not in families:
            families.append(family)
    if missing:
        warnings.warn(
            f"No installed font covers the {', '.join(missing)} script used in the "
            "token labels; they are drawn with the default font and may show as boxes. "
            "Install one (e.g. the Debian package fonts-noto-core or fonts-lohit-beng-"
            "bengali) and clear matplotlib's font cache.",
            UserWarning,
            stacklevel=3,
        )
    if families:
        families.append(FALLBACK_FAMILY)
    return (families or None), missing


# ------------------------------------------------------------------ helpers
def _new_axes(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    figure = Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _as_weights(weights, name, ndim):
    array = np.asarray(weights, dtype="float64")
    if array.ndim == ndim + 1 and array.shape[0] == 1:
        array = array[0]  # a batch of one
    if array.ndim != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimensions (or {ndim + 1} with a batch of one). "
            f"Received: {name}.shape={array.shape}"
        )
    return array


def _check_tokens(weights_shape, source_tokens, target_tokens):
    source_tokens = [str(token) for token in source_tokens]
    target_tokens = [str(token) for token in target_tokens]
    expected = (len(target_tokens), len(source_tokens))
    if tuple(weights_shape[-2:]) != expected:
        raise ValueError(
            "The last two axes of weights must be (target_length, source_length) = "
            f"(len(target_tokens), len(source_tokens)) = {expected}. Received: "
            f"weights.shape={tuple(weights_shape)}. Slice off padding first, e.g. "
            "weights[:len(target_tokens), :len(source_tokens)]."
        )
    return source_tokens, target_tokens


def _mark_missing(figure, missing):
    if missing:
        previous = getattr(figure, "_kerasseq_missing_scripts", ())
        figure._kerasseq_missing_scripts = tuple(sorted(set(previous) | set(missing)))


def _draw_heatmap(ax, weights, source_tokens, target_tokens, families, vmax, annotate):
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto",
                      interpolation="nearest")
    rotation = 90 if max((len(t) for t in source_tokens), default=0) > 2 else 0
    ax.set_xticks(range(len(source_tokens)), source_tokens, rotation=rotation)
    ax.set_yticks(range(len(target_tokens)), target_tokens)
    if families:
        for label in ax.get_xticklabels() + ax.get_yticklabels():
            label.set_fontfamily(families)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    if annotate:
        for row in range(weights.shape[0]):
            for column in range(weights.shape[1]):
                value = weights[row, column]
                color = "black" if value > 0.6 * vmax else "white"
                ax.text(column, row, f"{value:.2f}", ha="center", va="center",
                        color=color, fontsize=8)
    return image


# ----------------------------------------------------------------- heatmaps
def plot_attention(weights, source_tokens, target_tokens, ax=None, title=None,
                   annotate=False, colorbar=True):
    """Heatmap of attention weights: one row per target token, one column per source token.

    Row t shows α_{t,1..S}, the distribution over source positions that the
    decoder used to produce target token t (Bahdanau et al. 2014, figure 3).

    Args:
        weights: array-like `(target_length, source_length)` (a leading batch
            axis of size 1 is dropped), e.g. `RNNSeq2Seq.teacher_forced_attention(...)[0]`.
        source_tokens: list of str, the column labels (`source_length` of them).
        target_tokens: list of str, the row labels (`target_length` of them).
        ax: optional matplotlib axes to draw into; by default a new figure.
        title: optional str.
        annotate: bool, write each weight in its cell (for small matrices).
        colorbar: bool, add a colour bar (one extra axes in the figure).

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> figure = plot_attention([[0.9, 0.1], [0.2, 0.8]], ["a", "b"], ["x", "y"])
    >>> save_figure(figure, "attention.png")
    'attention.png'
    """
    weights = _as_weights(weights, "weights", 2)
    source_tokens, target_tokens = _check_tokens(weights.shape, source_tokens, target_tokens)
    families, missing = _label_fonts(source_tokens + target_tokens)
    width = max(3.0, 0.45 * len(source_tokens) + 2.0)
    height = max(2.5, 0.4 * len(target_tokens) + 1.5)
    figure, ax = _new_axes(ax, (width, height))
    _mark_missing(figure, missing)
    vmax = max(float(weights.max(initial=0.0)), 1e-9)
    image = _draw_heatmap(ax, weights, source_tokens, target_tokens, families, vmax, annotate)
    if title is not None:
        ax.set_title(title, fontfamily=families)
    if colorbar:
        figure.colorbar(image, ax=ax, label="attention weight")
    return figure


def plot_cross_attention_heads(weights, source_tokens, target_tokens, ncols=4, title=None):
    """One attention heatmap per head, on a shared colour scale.

    Args:
        weights: array-like `(num_heads, target_length, source_length)` (a
            leading batch axis of size 1 is dropped), e.g. the cross-attention
            scores of a `TransformerDecoderBlock` for one sentence.
        source_tokens: list of str, `source_length` column labels.
        target_tokens: list of str, `target_length` row labels.
        ncols: int, heads per row of the grid.
        title: optional str, the figure title.

    Returns:
        The `matplotlib.figure.Figure`, with one axes per head (titled
        "head 0", "head 1", ...) followed by one colour-bar axes.
    """
    weights = _as_weights(weights, "weights", 3)
    ncols = check_positive_int("ncols", ncols)
    source_tokens, target_tokens = _check_tokens(weights.shape, source_tokens, target_tokens)
    families, missing = _label_fonts(source_tokens + target_tokens)
    num_heads = weights.shape[0]
    ncols = min(int(ncols), num_heads)
    nrows = math.ceil(num_heads / ncols)
    panel_width = max(2.5, 0.4 * len(source_tokens) + 1.2)
    panel_height = max(2.2, 0.35 * len(target_tokens) + 1.2)
    figure = Figure(figsize=(panel_width * ncols + 1.0, panel_height * nrows),
                    layout="constrained")
    _mark_missing(figure, missing)
    vmax = max(float(weights.max(initial=0.0)), 1e-9)
    axes = []
    for head in range(num_heads):
        ax = figure.add_subplot(nrows, ncols, head + 1)
        image = _draw_heatmap(ax, weights[head], source_tokens, target_tokens, families,
                              vmax, annotate=False)
        ax.set_title(f"head {head}")
        axes.append(ax)
    figure.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    if title is not None:
        figure.suptitle(title)
    return figure


# --------------------------------------------------------- training curves
def _history_dict(history_or_dict):
    history = getattr(history_or_dict, "history", history_or_dict)
    if not isinstance(history, dict):
        raise ValueError(
            "history_or_dict must be a keras.callbacks.History or a dict of lists. "
            f"Received: {type(history_or_dict).__name__}"
        )
    return history


def plot_history(history_or_dict, metrics=("loss",), title=None):
    """Training curves: one axes per metric, the training and validation values per epoch.

    Args:
        history_or_dict: the `keras.callbacks.History` returned by `fit`, or
            its `.history` dict (`{"loss": [...], "val_loss": [...], ...}`).
        metrics: names of the metrics to plot (a str is one metric). Each gets
            a "train" line and, when `"val_" + name` is present, a
            "validation" line.
        title: optional figure title.

    Returns:
        The `matplotlib.figure.Figure`, with `len(metrics)` axes.

    Example:

    >>> figure = plot_history({"loss": [2.0, 1.2], "val_loss": [2.1, 1.5]})
    """
    history = _history_dict(history_or_dict)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("metrics must name at least one metric. Received: metrics=()")
    unknown = [name for name in metrics if name not in history]
    if unknown:
        raise ValueError(
            f"metrics {unknown} are not in the history. Available: {sorted(history)}"
        )
    figure = Figure(figsize=(4.0 * len(metrics), 3.0), layout="constrained")
    for index, name in enumerate(metrics):
        ax = figure.add_subplot(1, len(metrics), index + 1)
        for key, label in ((name, "train"), (f"val_{name}", "validation")):
            if key in history:
                values = np.asarray(history[key], dtype="float64")
                ax.plot(np.arange(1, len(values) + 1), values, marker="o", markersize=3, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend()
    if title is not None:
        figure.suptitle(title)
    return figure


def plot_learning_curves(histories, score="dev_bleu", score_title="dev BLEU (greedy)",
                         score_ylabel="BLEU", loss_ylabel="loss", path=None, x=None,
                         x_label=None):
    """Train/dev loss and a dev score per epoch of several models, in one figure.

    Left axes: each model's training loss (dashed) and validation loss
    (solid), one colour per model; right axes: its `score` per epoch (e.g. the
    `dev_bleu` that `kerasseq.training.DevBleuEarlyStopping` logs).

    Args:
        histories: `{model name: history}`, each history a
            `keras.callbacks.History` or its `.history` dict with "loss" and,
            when present, "val_loss" and `score` lists.
        score: str, the key of the dev score in each history.
        score_title, score_ylabel: str, the title and y label of the score axes.
        loss_ylabel: str, the y label of the loss axes.
        path: optional str, where to save the figure (`save_figure`, dpi 120).
        x: optional str, the key of a history list to draw against instead of
            the epoch number, e.g. the minutes of training at the end of each
            epoch (every history must then hold it, one value per epoch).
        x_label: str, the x label (default: "epoch", or `x` when given).

    Returns:
        The `matplotlib.figure.Figure`, with 2 axes.

    Example:

    >>> figure = plot_learning_curves({"rnn": {"loss": [3.0, 2.0], "val_loss": [3.1, 2.4],
    ...                                        "dev_bleu": [1.0, 4.5]}})
    """
    histories = {name: _history_dict(history) for name, history in dict(histories).items()}
    if not histories:
        raise ValueError("histories must hold at least one model. Received: histories={}")
    for name, history in histories.items():
        if "loss" not in history:
            raise ValueError(f"the history of {name!r} has no 'loss'. Available: {sorted(history)}")
        if x is not None and (x not in history or len(history[x]) != len(history["loss"])):
            raise ValueError(f"x={x!r} must be a list in the history of {name!r} with one value "
                             f"per epoch ({len(history['loss'])}). Available: {sorted(history)}")

    figure = Figure(figsize=(9.0, 3.2), layout="constrained")
    loss_ax, score_ax = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    for index, (name, history) in enumerate(histories.items()):
        lines = ((loss_ax, "loss", dict(linestyle="--", label=f"{name} train")),
                 (loss_ax, "val_loss", dict(label=f"{name} dev")),
                 (score_ax, score, dict(marker="o", markersize=3, label=name)))
        for ax, key, style in lines:
            if key in history:
                count = len(history[key])
                positions = (np.asarray(history[x][:count], dtype=float) if x is not None
                             else np.arange(1, count + 1))
                ax.plot(positions, history[key], color=f"C{index}", **style)
    x_label = x_label or (x if x is not None else "epoch")
    loss_ax.set(xlabel=x_label, ylabel=loss_ylabel, title="loss")
    score_ax.set(xlabel=x_label, ylabel=score_ylabel, title=score_title)
    for ax in (loss_ax, score_ax):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    if path is not None:
        save_figure(figure, path, dpi=120)
    return figure


# ------------------------------------------------------- scores by length
def _bucket_label(bucket):
    if isinstance(bucket, (tuple, list)) and len(bucket) == 2:
        low, high = bucket
        return f"{low}+" if high is None or high == math.inf else f"{low}-{high}"
    return str(bucket)


def _as_series(scores):
    """`[(label, score, count or None), ...]` from the accepted input forms."""
    series = []
    for item in (scores.items() if isinstance(scores, dict) else scores):
        if isinstance(item, dict):  # a row of kerasseq.evaluation.scores_by_length
            series.append((str(item["bucket"]), item["score"], item.get("count")))
        else:
            bucket, score = item
            series.append((_bucket_label(bucket), score, None))
    return series


def _is_multi_series(lengths_to_scores):
    return isinstance(lengths_to_scores, dict) and bool(lengths_to_scores) and all(
        isinstance(value, (dict, list, tuple)) for value in lengths_to_scores.values()
    )


def plot_scores_by_length(lengths_to_scores, ax=None, title=None, ylabel="score",
                          xlabel="source length"):
    """Bar chart of a score per source-length bucket.

    Args:
        lengths_to_scores: one of
            * a dict `{bucket: score}` or a list of `(bucket, score)` pairs,
              where a bucket is a label or a `(low, high)` tuple;
            * the list of dicts returned by
              `kerasseq.evaluation.scores_by_length` (bars are then annotated
              with the number of sentences);
            * a dict `{system_name: one of the above}` to compare systems
              with grouped bars (e.g. with and without attention).
            Buckets whose score is None (empty buckets) get no bar.
        ax: optional axes to draw into.
        title: optional str.
        ylabel, xlabel: axis labels.

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> figure = plot_scores_by_length({"1-10": 35.0, "11-20": 25.0, "21-30": 15.0})
    """
    if _is_multi_series(lengths_to_scores):
        systems = {name: _as_series(value) for name, value in lengths_to_scores.items()}
    else:
        systems = {None: _as_series(lengths_to_scores)}
    labels = list(dict.fromkeys(label for series in systems.values() for label, _, _ in series))
    if not labels:
        raise ValueError("lengths_to_scores is empty; there is nothing to plot.")
    figure, ax = _new_axes(ax, (max(4.0, 0.6 * len(labels) * len(systems) + 2.0), 3.2))
    width = 0.8 / len(systems)
    for index, (name, series) in enumerate(systems.items()):
        by_label = {label: (score, count) for label, score, count in series}
        positions, heights, counts = [], [], []
        for position, label in enumerate(labels):
            score, count = by_label.get(label, (None, None))
            if score is None:
                continue
            positions.append(position - 0.4 + width * (index + 0.5))
            heights.append(float(score))
            counts.append(count)
        bars = ax.bar(positions, heights, width=width * 0.95, label=name)
        if any(count is not None for count in counts):
            ax.bar_label(bars, labels=[f"n={c}" if c is not None else "" for c in counts],
                         fontsize=7)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if len(systems) > 1:
        ax.legend()
    if title is not None:
        ax.set_title(title)
    return figure


# ------------------------------------------------------------------- saving
def save_figure(figure, path, dpi=150):
    """Write `figure` to `path` atomically (temporary file, then `os.replace`).

    A reader never sees a half-written image, and an existing file is left
    untouched if saving fails. The format comes from the file extension
    (".png", ".svg", ".pdf", ...). Missing parent directories are created.

    Args:
        figure: a `matplotlib.figure.Figure`.
        path: str or path-like, where to write.
        dpi: int, resolution for raster formats.

    Returns:
        The path, as a str.
    """
    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    if not extension:
        raise ValueError(f"path needs an extension such as .png or .svg. Received: path={path!r}")

    def write(temporary):
        with warnings.catch_warnings():
            if getattr(figure, "_kerasseq_missing_scripts", ()):
                # Already reported once by _label_fonts; skip one warning per glyph.
                warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            figure.savefig(temporary, format=extension, dpi=dpi)

    replace_atomically(write, path, suffix=f".{extension}")
    return path


__all__ = [
    "plot_attention",
    "plot_cross_attention_heads",
    "plot_history",
    "plot_learning_curves",
    "plot_scores_by_length",
    "save_figure",
]
