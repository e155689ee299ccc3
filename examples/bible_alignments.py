"""Does attention align? Trained Spanish → English models scored against Strong's links.

    .venv/bin/python examples/bible_alignments.py \
        --model transformer=runs/bible/transformer/model.keras \
        --model rnn_attention=runs/bible/rnn_attention/model.keras --output-dir runs/bible
    .venv/bin/python examples/bible_alignments.py --smoke --output-dir /tmp/bible_alignments

For every test verse (`kerasseq.data.load_bible_pairs`, split "test") the
models read the reference translation with teacher forcing
(`kerasseq.alignment.align_texts`): each English word is linked to the
Spanish word it attends to most. The links are scored against the verse's
Strong's links (Spanish and English words tagged with the same Strong's
number), beside two other aligners on the same verses:

- `eflomal` (PyPI `eflomal`, a Bayesian IBM-model aligner), trained without
  supervision on the lower-cased words of every verse pair (all splits, as
  aligners are used), both directions and their grow-diag-final-and;
- a diagonal baseline: English word j of n_t to Spanish word
  round((j + 0.5) n_s / n_t - 0.5) of n_s.

Scores (`kerasseq.alignment`): precision, recall, F1 and AER against every
Strong's link; the hit rate (the share of Strong's-linked English words
whose linked Spanish word(s) include a Strong's one); the same hit rate on
the New Testament, and on one-to-one links only (an English word with one
Strong's link to a Spanish word that has no other). For the Transformer
every decoder layer and head is scored, and their averages.

Writes OUTPUT_DIR/alignments.json, OUTPUT_DIR/alignments.md (the table) and
OUTPUT_DIR/alignment_VERSE.png (a verse's attention with its Strong's links).
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq.alignment import (  # noqa: E402
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
    result["hit_rate_new_testament"], _ = target_word_hit_rate(
        [p for p, keep in zip(predicted, testament, strict=True) if keep],
        [g for g, keep in zip(gold, testament, strict=True) if keep])
    result["hit_rate_one_to_one"], result["one_to_one_words"] = target_word_hit_rate(
        predicted, [one_to_one(links) for links in gold])
    return result


def eflomal_links(all_pairs, wanted):
    """eflomal's forward, reverse and grow-diag-final-and links of the `wanted` pairs.

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
    result["grow-diag-final-and"] = [symmetrize(f, r) for f, r in
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


def attention_aligners(name, model, pairs):
    """`{aligner name: links per pair}` of one model: averages and every layer/head."""
    results = align_texts(model, [p.source for p in pairs], [p.target for p in pairs],
                          heads=True, batch_size=32)
    heads = [result["head_weights"] for result in results]  # (layers, heads, T, S) each
    num_layers, num_heads = heads[0].shape[:2]
    aligners = {}
    if num_layers * num_heads == 1:
        aligners[name] = [links_from_weights(h[0, 0]) for h in heads]
        return aligners, heads
    aligners[f"{name} (all layers and heads averaged)"] = [
        links_from_weights(h.mean(axis=(0, 1))) for h in heads]
    aligners[f"{name} (last layer, heads averaged)"] = [
        links_from_weights(h[-1].mean(axis=0)) for h in heads]
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
    ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(pair.source_words)), pair.source_words, rotation=90, fontsize=8)
    ax.set_yticks(range(len(pair.target_words)), pair.target_words, fontsize=8)
    if pair.links:
        ax.scatter([i for i, _ in pair.links], [j for _, j in pair.links], s=26,
                   facecolors="none", edgecolors="white", linewidths=1.2, label="Strong's link")
        ax.legend(loc="lower left", fontsize=7)
    predicted = links_from_weights(weights)
    ax.scatter([i for i, _ in predicted], [j for _, j in predicted], s=6, c="red",
               label="arg-max")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("Spanish (source)")
    ax.set_ylabel("English (target)")
    figure.savefig(path, dpi=110)


def markdown_table(scores, order):
    lines = ["| aligner | precision | recall | F1 | AER | hit rate | hit rate NT | "
             "hit rate 1-to-1 |", "|---|---|---|---|---|---|---|---|"]
    for name in order:
        s = scores[name]
        lines.append(f"| {name} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | "
                     f"{s['aer']:.3f} | {s['hit_rate']:.3f} | {s['hit_rate_new_testament']:.3f} "
                     f"| {s['hit_rate_one_to_one']:.3f} |")
    return "\n".join(lines)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", default=[],
                        help="NAME=PATH of a trained .keras model (repeatable)")
    parser.add_argument("--output-dir", default="runs/bible_es_en")
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--eflomal", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--plot-verse", default="John 3:16")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny untrained model on a few verses (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:
        all_pairs, report = load_bible_pairs(return_report=True)
    except SwordError as error:
        print(f"Skipping the alignment example: {error}")
        return None
    pairs = [pair for pair in all_pairs if pair.split == args.split]
    models = {}
    for item in args.model:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"--model takes NAME=PATH. Received: {item!r}")
        models[name] = keras.models.load_model(path)
    if args.smoke:
        from kerasseq.data import WordPieceTextTokenizer
        from kerasseq.models import build_transformer_seq2seq

        pairs = pairs[:24]
        all_pairs = [pair for pair in all_pairs if pair.split == "train"][:300] + pairs
        models = {"transformer": build_transformer_seq2seq(
            num_layers=2, d_model=16, num_heads=2, dff=16, max_length=256,
            source_tokenizer=WordPieceTextTokenizer.from_texts(
                [p.source for p in all_pairs], max_tokens=300, lowercase=True),
            target_tokenizer=WordPieceTextTokenizer.from_texts(
                [p.target for p in all_pairs], max_tokens=300))}
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
        model_aligners, head_weights[name] = attention_aligners(name, model, scored)
        aligners.update(model_aligners)
        timings[f"{name}_seconds"] = round(time.time() - started, 1)
    scores = {name: score(links, scored) for name, links in aligners.items()}
    order = sorted(scores, key=lambda name: -scores[name]["hit_rate"])
    table = markdown_table(scores, order)
    print(table)
    results = {"split": args.split, "verses": len(pairs), "verses_scored": len(scored),
               "strong_links": sum(len(p.links) for p in scored), "data": report,
               "models": {name: item.partition("=")[2] for name, item in
                          ((item.partition("=")[0], item) for item in args.model)},
               "timings": timings, "scores": scores}
    with open(os.path.join(args.output_dir, "alignments.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)
    with open(os.path.join(args.output_dir, "alignments.md"), "w", encoding="utf-8") as handle:
        handle.write(table + "\n")

    by_id = {pair.verse_id: index for index, pair in enumerate(scored)}
    verse = by_id.get(args.plot_verse, 0) if scored else None
    if verse is not None:
        for name, weights in head_weights.items():
            best = next((aligner for aligner in order if aligner.startswith(f"{name} layer ")
                         and " head " in aligner), None)
            pair = scored[verse]
            if best is None:
                matrix, title = weights[verse][0, 0], name
            else:
                layer, head = (int(part) for part in best.split(" layer ")[1].split(" head "))
                matrix, title = weights[verse][layer, head], f"{name}, layer {layer} head {head}"
            stem = pair.verse_id.replace(" ", "_").replace(":", "_")
            plot_verse(pair, matrix, f"{pair.verse_id}: {title}",
                       os.path.join(args.output_dir, f"alignment_{name}_{stem}.png"))
    return results


if __name__ == "__main__":
    main()
