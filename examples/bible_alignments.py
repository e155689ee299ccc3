"""Does attention align? Trained Spanish → English models scored against Strong's links.

    .venv/bin/python examples/bible_alignments.py \
        --model transformer=runs/bible/transformer \
        --model rnn_attention=runs/bible/rnn_attention --output-dir runs/bible
    .venv/bin/python examples/bible_alignments.py --smoke --output-dir /tmp/bible_alignments

`--model NAME=PATH` names a saved model (`.keras`) or a model's folder of
examples/spanish_to_english_bible.py (`runs/bible/transformer`): there the
model its evaluate phase scored, `averaged.keras` when it wrote one (the
average of the last checkpoints won on dev), else `model.keras`.

For every verse of `--split` (`kerasseq.data.load_bible_pairs`; "test" by default) the
models read the reference translation with teacher forcing
(`kerasseq.alignment.align_texts`): each English word is linked to the
Spanish word it attends to most. The links are scored against the verse's
Strong's links (Spanish and English words tagged with the same Strong's
number), beside two other aligners on the same verses:

- `eflomal` (PyPI `eflomal`, a Bayesian IBM-model aligner), trained without
  supervision on the lower-cased words of every verse pair (all splits, as
  aligners are used), both directions and their grow-diag-final-and,
  intersection and union;
- a diagonal baseline: English word j of n_t to Spanish word
  round((j + 0.5) n_s / n_t - 0.5) of n_s.

Scores (`kerasseq.alignment`): precision, recall, F1 and AER against every
Strong's link; the hit rate (the share of Strong's-linked English words
whose linked Spanish word(s) include a Strong's one); the same hit rate on
the New Testament, and on one-to-one links only (an English word with one
Strong's link to a Spanish word that has no other). For the Transformer
every decoder layer and head is scored, and their averages. A model's own
reading (its one attention; for a Transformer the average of every layer
and head, and a guided model's guided head) is also read the other way
(`[source]`: each Spanish word to the English word that attended to it
most) and both ways combined (`[intersection]`, `[union]`,
`[grow-diag-final-and]`), as eflomal's two directions are. `best` in
alignments.json names the best reading of the split the script read: to
choose a reading without looking at test, read `--split dev` first.
`--alignment-head NAME=PATH` adds the attention of a `ShiftedAlignmentHead`
trained on model NAME (`examples/bible_alignment_head.py`), read the same
five ways as `NAME (shifted head: layer L, shift S)`.

Writes only under OUTPUT_DIR (and `--figures-dir` when given):
alignments.json (every score, each model's best aligner and its distance to
eflomal), alignments.md (the table, best F1 first) and, for one verse
(`--plot-verse`, by default one chosen by its Strong's links alone), each
model's attention with the verse's Strong's links drawn on it and, for a
Transformer, every layer's every head (alignment_NAME_VERSE.png,
alignment_NAME_VERSE_heads.png). With `--figures-dir`, the same figures
under the names the docs give them, for a separate copy into docs/images:
bible_attention_NAME.png, and bible_attention_heads.png for the model named
`transformer` (bible_attention_heads_SUFFIX.png for `transformer_SUFFIX`,
bible_attention_heads_NAME.png for another name). Models are loaded with
`keras.models.load_model` after kerasseq's import, as a user loads them;
`--smoke` scores the `--model`s given on a few verses, or else saves and
loads a tiny untrained model the same way.
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq.alignment import (  # noqa: E402
    LINK_METHODS,
    ShiftedAlignmentHead,
    align_texts,
    alignment_scores,
    diagonal_links,
    links_from_weights,
    symmetrize,
    target_word_hit_rate,
    word_starts,
)
from kerasseq.data.sword import SwordError, load_bible_pairs  # noqa: E402


def one_to_one(links):
    """The links whose two words have no other link."""
    sources = [i for i, _ in links]
    targets = [j for _, j in links]
    return [(i, j) for i, j in links if sources.count(i) == 1 and targets.count(j) == 1]


def score(predicted, pairs):
    """Every score of one aligner on `pairs` (predicted: one list of links per pair)."""
    gold = [pair.links for pair in pairs]
    result = alignment_scores(predicted, gold)
    result["hit_rate"], result["hit_words"] = target_word_hit_rate(predicted, gold)
    testament = [pair.testament == 2 for pair in pairs]
    new_predicted = [p for p, keep in zip(predicted, testament, strict=True) if keep]
    new_gold = [g for g, keep in zip(gold, testament, strict=True) if keep]
    if new_gold:
        result["new_testament"] = {key: value for key, value in
                                   alignment_scores(new_predicted, new_gold).items()
                                   if key in ("precision", "recall", "f1", "aer")}
    result["hit_rate_new_testament"], _ = target_word_hit_rate(new_predicted, new_gold)
    result["hit_rate_one_to_one"], result["one_to_one_words"] = target_word_hit_rate(
        predicted, [one_to_one(links) for links in gold])
    return result


def eflomal_links(all_pairs, wanted):
    """eflomal's links of the `wanted` pairs: forward, reverse, and the two combined
    (grow-diag-final-and, intersection, union).

    Trained on every pair's lower-cased words (no supervision).
    """
    import eflomal

    index = {pair.verse_id: row for row, pair in enumerate(all_pairs)}
    sources = [" ".join(pair.source_words).lower() for pair in all_pairs]
    targets = [" ".join(pair.target_words).lower() for pair in all_pairs]
    with tempfile.TemporaryDirectory() as directory:
        forward, reverse = os.path.join(directory, "fwd"), os.path.join(directory, "rev")
        eflomal.Aligner().align(sources, targets, links_filename_fwd=forward,
                                links_filename_rev=reverse, quiet=True)
        lines = {}
        for name, path in (("forward", forward), ("reverse", reverse)):
            with open(path, encoding="utf-8") as handle:
                lines[name] = [[tuple(int(x) for x in link.split("-")) for link in line.split()]
                               for line in handle.read().splitlines()]
    result = {name: [lines[name][index[pair.verse_id]] for pair in wanted]
              for name in ("forward", "reverse")}
    for method in ("grow-diag-final-and", "intersection", "union"):
        result[method] = [symmetrize(f, r, method) for f, r in
                          zip(result["forward"], result["reverse"], strict=True)]
    return result


def same_words(model, pairs):
    """The pairs whose tokenizer words are the loader's words (the same word indices)."""
    kept = []
    for pair in pairs:
        source = model.source_tokenizer.encode(pair.source).numpy()
        target = model.target_tokenizer.encode(pair.target).numpy()
        if (word_starts(model.source_tokenizer, source).sum() == len(pair.source_words)
                and word_starts(model.target_tokenizer, target).sum() == len(pair.target_words)):
            kept.append(pair)
    return kept


def read_both_ways(label, matrices):
    """`{aligner name: links per pair}` of one attention reading, read every way
    `links_from_weights` reads a matrix: `label` itself by target word (each
    English word to its most attended Spanish word), `label [source]` by source
    word, and `label [METHOD]` the two combined (intersection, union,
    grow-diag-final-and), as eflomal's two directions are."""
    return {(label if method == "target" else f"{label} [{method}]"):
            [links_from_weights(matrix, method) for matrix in matrices]
            for method in LINK_METHODS}


def attention_aligners(name, model, pairs, aligner=None):
    """`{aligner name: links per pair}` of one model: averages and every layer/head.

    The model's own reading (its one attention, the average of every layer
    and head, and a guided model's guided head) is read both ways
    (`read_both_ways`); each layer and head by target word only. With
    `aligner` (a `ShiftedAlignmentHead` trained on the model) its attention
    is read both ways too, as `NAME (shifted head: layer L, shift S)`.
    """
    aligners = {}
    # one pass: "weights" are the aligner's (when given), "head_weights" the model's
    results = align_texts(model, [p.source for p in pairs], [p.target for p in pairs],
                          heads=True, batch_size=32, aligner=aligner)
    if aligner is not None:
        aligners.update(read_both_ways(
            f"{name} (shifted head: layer {aligner.layer}, shift {aligner.shift})",
            [result["weights"] for result in results]))
    heads = [result["head_weights"] for result in results]  # (layers, heads, T, S) each
    num_layers, num_heads = heads[0].shape[:2]
    if num_layers * num_heads == 1:
        aligners.update(read_both_ways(name, [h[0, 0] for h in heads]))
        return aligners, heads
    aligners.update(read_both_ways(f"{name} (all layers and heads averaged)",
                                   [h.mean(axis=(0, 1)) for h in heads]))
    aligners[f"{name} (last layer, heads averaged)"] = [
        links_from_weights(h[-1].mean(axis=0)) for h in heads]
    guided = getattr(model, "guided_head", None)
    if guided is not None:  # what the translator returns by default for this model
        layer, head = guided
        aligners.update(read_both_ways(f"{name} (guided head: layer {layer} head {head})",
                                       [h[layer, head] for h in heads]))
    for layer in range(num_layers):
        aligners[f"{name} layer {layer} (heads averaged)"] = [
            links_from_weights(h[layer].mean(axis=0)) for h in heads]
        for head in range(num_heads):
            aligners[f"{name} layer {layer} head {head}"] = [
                links_from_weights(h[layer, head]) for h in heads]
    return aligners, heads


def plot_verse(pair, weights, title, path):
    """A verse's word attention with its Strong's links drawn on it (white circles)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 0.32 * len(pair.source_words) + 2),
                             max(4.0, 0.28 * len(pair.target_words) + 1.5)),
                    layout="constrained")
    ax = figure.add_subplot(1, 1, 1)
    _draw_links(ax, pair, weights)
    ax.scatter([], [], s=22, facecolors="none", edgecolors="black", label="Strong's link")
    ax.scatter([], [], s=5, c="red", label="arg-max of the attention")
    ax.legend(loc="lower left", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("Spanish (source)")
    ax.set_ylabel("English (target)")
    figure.savefig(path, dpi=110)


def markdown_table(scores, order):
    """All links: precision, recall, F1, AER, hit rate; the New Testament's F1,
    AER and hit rate; the hit rate on one-to-one links."""
    lines = ["| aligner | precision | recall | F1 | AER | hit rate | NT F1 | NT AER | NT hit rate "
             "| 1-to-1 hit rate |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in order:
        s = scores[name]
        nt = s.get("new_testament", {"f1": float("nan"), "aer": float("nan")})
        lines.append(f"| {name} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | "
                     f"{s['aer']:.3f} | {s['hit_rate']:.3f} | {nt['f1']:.3f} | {nt['aer']:.3f} "
                     f"| {s['hit_rate_new_testament']:.3f} | {s['hit_rate_one_to_one']:.3f} |")
    return "\n".join(lines)


def pick_plot_verse(pairs):
    """A verse to draw, chosen by its gold links only (never by a model's score):
    the New Testament verse of 10-14 words on both sides whose English words
    are most often Strong's-linked (ties: the first)."""
    def linked_share(pair):
        return len({j for _, j in pair.links}) / len(pair.target_words)

    candidates = [pair for pair in pairs if pair.testament == 2 and pair.links
                  and 10 <= len(pair.source_words) <= 14 and 10 <= len(pair.target_words) <= 14]
    return max(candidates or pairs, key=linked_share, default=None)


def plot_heads(pair, heads, title, path):
    """Every cross-attention head (layers × heads) of one verse, Strong's links drawn on each."""
    from matplotlib.figure import Figure

    num_layers, num_heads = heads.shape[:2]
    panel = (0.24 * len(pair.source_words) + 1.3, 0.22 * len(pair.target_words) + 1.2)
    figure = Figure(figsize=(panel[0] * num_heads, panel[1] * num_layers), layout="constrained")
    for layer in range(num_layers):
        for head in range(num_heads):
            ax = figure.add_subplot(num_layers, num_heads, layer * num_heads + head + 1)
            _draw_links(ax, pair, heads[layer, head], labels=(layer == num_layers - 1, head == 0))
            ax.set_title(f"layer {layer}, head {head}", fontsize=9)
    figure.suptitle(title, fontsize=10)
    figure.savefig(path, dpi=100)


def _draw_links(ax, pair, weights, labels=(True, True)):
    ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(pair.source_words)),
                  pair.source_words if labels[0] else [], rotation=90, fontsize=7)
    ax.set_yticks(range(len(pair.target_words)), pair.target_words if labels[1] else [],
                  fontsize=7)
    if pair.links:
        ax.scatter([i for i, _ in pair.links], [j for _, j in pair.links], s=22,
                   facecolors="none", edgecolors="white", linewidths=1.0)
    predicted = links_from_weights(weights)
    ax.scatter([i for i, _ in predicted], [j for _, j in predicted], s=5, c="red")


def best_aligners(scores, models):
    """Per model: its best aligner by F1 against all Strong's links, its gap to
    eflomal's grow-diag-final-and, and to eflomal's best reading."""
    best = {}
    reference = scores.get("eflomal grow-diag-final-and")
    eflomal = [aligner for aligner in scores if aligner.startswith("eflomal ")]
    best_eflomal = max(eflomal, key=lambda aligner: scores[aligner]["f1"], default=None)
    for name in models:
        own = [aligner for aligner in scores if aligner == name
               or aligner.startswith(f"{name} ")]
        if not own:
            continue
        top = max(own, key=lambda aligner: scores[aligner]["f1"])
        best[name] = {"aligner": top, "f1": scores[top]["f1"], "aer": scores[top]["aer"]}
        if reference is not None:
            best[name]["f1_below_eflomal"] = reference["f1"] - scores[top]["f1"]
        if best_eflomal is not None:
            best[name]["best_eflomal"] = best_eflomal
            best[name]["f1_below_best_eflomal"] = scores[best_eflomal]["f1"] - scores[top]["f1"]
    return best


def model_path(path):
    """The `.keras` file `--model NAME=PATH` names: PATH itself, or in a model's
    folder of examples/spanish_to_english_bible.py the model its evaluate phase
    scored (averaged.keras when it wrote one, else model.keras)."""
    if not os.path.isdir(path):
        return path
    for name in ("averaged.keras", "model.keras"):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    raise SystemExit(f"--model: {path} is a folder without averaged.keras or model.keras "
                     "(a model's folder of examples/spanish_to_english_bible.py holds them)")


def heads_figure_name(name):
    """The docs' file name of model `name`'s every-head figure: bible_attention_heads.png
    for `transformer`, bible_attention_heads_guided.png for `transformer_guided`."""
    if name == "transformer":
        return "bible_attention_heads.png"
    return f"bible_attention_heads_{name.removeprefix('transformer_')}.png"


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", default=[],
                        help="NAME=PATH of a trained .keras model, or of a model's folder "
                             "written by spanish_to_english_bible.py (repeatable)")
    parser.add_argument("--alignment-head", action="append", default=[],
                        help="NAME=PATH: a ShiftedAlignmentHead (.keras, written by "
                             "examples/bible_alignment_head.py) trained on the model NAME; "
                             "its attention is scored beside the model's heads (repeatable)")
    parser.add_argument("--output-dir", default="runs/bible_es_en")
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--eflomal", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--plot-verse", default=None,
                        help="the verse drawn (default: chosen by its Strong's links alone, "
                             "see pick_plot_verse)")
    parser.add_argument("--figures-dir", default=None,
                        help="also write the verse figures here under the docs' names "
                             "(bible_attention_NAME.png, bible_attention_heads.png), to be "
                             "copied into docs/images as a step of its own")
    parser.add_argument("--max-verses", type=int, default=0,
                        help="score only the first N verses of the split (0: all; a slice "
                             "for tests)")
    parser.add_argument("--smoke", action="store_true",
                        help="a few verses: the --model models, or a tiny untrained one "
                             "without --model (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:
        all_pairs, report = load_bible_pairs(return_report=True)
    except SwordError as error:
        print(f"Skipping the alignment example: {error}")
        return None
    pairs = [pair for pair in all_pairs if pair.split == args.split][: args.max_verses or None]
    models, model_files = {}, {}
    for item in args.model:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"--model takes NAME=PATH. Received: {item!r}")
        model_files[name] = model_path(path)
        models[name] = keras.models.load_model(model_files[name])
    heads_of = {}
    for item in args.alignment_head:
        name, _, path = item.partition("=")
        if name in heads_of:
            raise SystemExit(f"--alignment-head: {name!r} is given twice; one head per model")
        if not path or name not in models:
            raise SystemExit(f"--alignment-head takes NAME=PATH with NAME a --model name "
                             f"({sorted(models)}). Received: {item!r}")
        heads_of[name] = keras.models.load_model(path)
        if not isinstance(heads_of[name], ShiftedAlignmentHead):
            raise SystemExit(f"--alignment-head {item!r}: not a ShiftedAlignmentHead "
                             f"({type(heads_of[name]).__name__})")
        model_files[f"{name} alignment head"] = path
    if args.smoke:
        pairs = pairs[:24]
        all_pairs = [pair for pair in all_pairs if pair.split == "train"][:300] + pairs
    if args.smoke and not models:
        from kerasseq.data import WordPieceTextTokenizer
        from kerasseq.models import build_transformer_seq2seq

        tiny = build_transformer_seq2seq(
            num_layers=2, d_model=16, num_heads=2, dff=16, max_positions=256,
            source_tokenizer=WordPieceTextTokenizer.from_texts(
                [p.source for p in all_pairs], max_tokens=300, lowercase=True),
            target_tokenizer=WordPieceTextTokenizer.from_texts(
                [p.target for p in all_pairs], max_tokens=300))
        os.makedirs(args.output_dir, exist_ok=True)
        path = model_files["transformer"] = os.path.join(args.output_dir,
                                                         "smoke_transformer.keras")
        tiny.save(path)  # loaded back as the full run loads its trained models
        models = {"transformer": keras.models.load_model(path)}
    os.makedirs(args.output_dir, exist_ok=True)
    # Verses every model splits into the loader's words (word indices then agree).
    scored = pairs
    for model in models.values():
        scored = same_words(model, scored)
    scored = [pair for pair in scored if len(pair.source_words) <= 200]
    print(f"{len(pairs)} {args.split} verses, {len(scored)} scored (the same words for every "
          f"tokenizer; {sum(len(p.links) for p in scored)} Strong's links)", flush=True)

    aligners = {"diagonal": [diagonal_links(len(p.source_words), len(p.target_words))
                             for p in scored]}
    timings = {}
    if args.eflomal:
        started = time.time()
        for name, links in eflomal_links(all_pairs, scored).items():
            aligners[f"eflomal {name}"] = links
        timings["eflomal_seconds"] = round(time.time() - started, 1)
    head_weights = {}
    for name, model in models.items():
        started = time.time()
        model_aligners, head_weights[name] = attention_aligners(name, model, scored,
                                                                heads_of.get(name))
        aligners.update(model_aligners)
        timings[f"{name}_seconds"] = round(time.time() - started, 1)
    scores = {name: score(links, scored) for name, links in aligners.items()}
    order = sorted(scores, key=lambda name: -scores[name]["f1"])
    table = markdown_table(scores, order)
    print(table)
    results = {"split": args.split, "verses": len(pairs), "verses_scored": len(scored),
               "strong_links": sum(len(p.links) for p in scored), "data": report,
               "models": model_files,
               "timings": timings, "scores": scores, "best": best_aligners(scores, models)}
    with open(os.path.join(args.output_dir, "alignments.md"), "w", encoding="utf-8") as handle:
        handle.write(table + "\n")

    plot_pair = (next((p for p in scored if p.verse_id == args.plot_verse), None)
                 if args.plot_verse else pick_plot_verse(scored))
    if plot_pair is not None:
        index = scored.index(plot_pair)
        results["plot_verse"] = plot_pair.verse_id
        stem = plot_pair.verse_id.replace(" ", "_").replace(":", "_")
        for name, weights in head_weights.items():
            verse_heads = weights[index]  # (layers, heads, T, S)
            paths = [os.path.join(args.output_dir, f"alignment_{name}_{stem}.png")]
            if args.figures_dir:
                os.makedirs(args.figures_dir, exist_ok=True)
                paths.append(os.path.join(args.figures_dir, f"bible_attention_{name}.png"))
            single = verse_heads.shape[0] * verse_heads.shape[1] == 1
            matrix = verse_heads[0, 0] if single else verse_heads.mean(axis=(0, 1))
            label = name if single else f"{name}, all layers and heads averaged"
            for path in paths:
                plot_verse(plot_pair, matrix, f"{plot_pair.verse_id}: {label}", path)
            if not single:
                paths = [os.path.join(args.output_dir, f"alignment_{name}_{stem}_heads.png")]
                if args.figures_dir:
                    paths.append(os.path.join(args.figures_dir, heads_figure_name(name)))
                for path in paths:
                    plot_heads(plot_pair, verse_heads, f"{plot_pair.verse_id}: every "
                               f"cross-attention head of the {name} (white circles: Strong's "
                               "links; red dots: arg-max)", path)
    with open(os.path.join(args.output_dir, "alignments.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)
    return results


if __name__ == "__main__":
    main()
