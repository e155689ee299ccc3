"""The int8 quality cost of a CTranslate2 export, on a trained model's test split.

A trained kerasseq Transformer is exported twice with
`kerasseq.export.export_ctranslate2`: float32 (the weights as they are) and
int8 (`quantization="int8"`, CTranslate2's per-row weight quantization). The
test split is translated by both exports, beam 4 with the length penalty
the model's dev run chose, and, with `--kerasseq`, by kerasseq's own
`Translator` with the same settings, and each output is scored:

- `--task g2p`: a model of `examples/g2p_cmudict.py`; CMUdict's 12,604 test
  words, word and phoneme error rates (`kerasseq.evaluation.g2p_error_rates`);
- `--task bible`: a model of `examples/spanish_to_english_bible.py`
  (`model.keras` or `averaged.keras`); the 1,576 test verses, sacreBLEU's
  BLEU and chrF.

The int8 cost is the int8 export's score against the float32 export's: same
engine, same search, only the weights differ. Also printed: the share of
outputs that are the same string in both, and each engine's wall time (one
pass, `--threads` threads).

The test split is translated here to measure the export, not to choose
anything: every setting comes from the model's dev run.

    .venv/bin/python benchmarks/ctranslate2_quality.py --task g2p runs/g2p/model.keras \
        --length-penalty 0 --kerasseq --out runs/g2p/ctranslate2_quality.json
    .venv/bin/python benchmarks/ctranslate2_quality.py --task bible \
        runs/bible/transformer/averaged.keras --length-penalty 1.0 --kerasseq
"""

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

from kerasseq import SearchConfig  # noqa: E402
from kerasseq._files import write_text_atomically  # noqa: E402
from kerasseq.evaluation import corpus_bleu, corpus_chrf, g2p_error_rates  # noqa: E402
from kerasseq.export import CTranslate2Translator, export_ctranslate2  # noqa: E402

# per task: the test split's (sources, references), its scores, the search limits
# of its example (the Bible's --max-output-pieces and position table)


def bible_test():
    from kerasseq.data.sword import load_bible_pairs

    pairs = [pair for pair in load_bible_pairs("spaRV1909eb", "engWEB2015eb")
             if pair.split == "test"]
    return [pair.source for pair in pairs], [pair.target for pair in pairs]


def g2p_test():
    from kerasseq.data import load_cmudict

    entries = load_cmudict("test")
    return [word for word, _ in entries], [pronunciations for _, pronunciations in entries]


def bible_scores(texts, references):
    return {"bleu": corpus_bleu(texts, references), "chrf": corpus_chrf(texts, references)}


def g2p_scores(texts, references):
    rates = g2p_error_rates(texts, references)
    return {"wer": 100 * rates["wer"], "per": 100 * rates["per"]}


TASKS = {
    "bible": {"test": bible_test, "scores": bible_scores, "main": "bleu",
              "limits": {"max_length": 200, "max_source_length": 256}, "batch_size": 64},
    "g2p": {"test": g2p_test, "scores": g2p_scores, "main": "wer", "limits": {},
            "batch_size": 256},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a .keras file of the task's example")
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--length-penalty", type=float, required=True,
                        help="the penalty the model's dev run chose (results.json)")
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kerasseq", action="store_true",
                        help="also translate with kerasseq's Translator (same settings)")
    parser.add_argument("--limit", type=int, default=0, help="first N test examples (0: all)")
    parser.add_argument("--out", help="write the table as JSON here")
    parser.add_argument("--outputs", help="write every test example's output of every engine "
                        "here (TSV: source, then one column per engine), to re-score later")
    args = parser.parse_args(argv)

    task = TASKS[args.task]
    sources, references = task["test"]()
    sources, references = sources[: args.limit or None], references[: args.limit or None]
    config = SearchConfig(method="beam", num_beams=args.num_beams,
                          length_penalty=args.length_penalty, batch_size=task["batch_size"],
                          **task["limits"])
    model = keras.models.load_model(args.model)
    outputs, seconds = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        for quantization in ("float32", "int8"):
            path = os.path.join(scratch, quantization)
            export_ctranslate2(model, path,
                               quantization=None if quantization == "float32" else quantization)
            translator = CTranslate2Translator(path, config, intra_threads=args.threads)
            started = time.perf_counter()
            outputs[f"ctranslate2 {quantization}"] = translator.translate(sources)
            seconds[f"ctranslate2 {quantization}"] = time.perf_counter() - started
    if args.kerasseq:
        started = time.perf_counter()
        outputs["kerasseq Translator"] = model.translate(sources, config)
        seconds["kerasseq Translator"] = time.perf_counter() - started
    float32 = outputs["ctranslate2 float32"]
    rows = {}
    for name, texts in outputs.items():
        rows[name] = {**task["scores"](texts, references),
                      "same_as_ctranslate2_float32": sum(a == b for a, b in
                                                         zip(texts, float32, strict=True))
                      / len(texts),
                      "seconds": round(seconds[name], 1)}
    main = task["main"]
    record = {"model": args.model, "task": args.task, "test_examples": len(sources),
              "num_beams": args.num_beams, "length_penalty": args.length_penalty,
              "limits": task["limits"], "threads": args.threads, "rows": rows,
              f"int8_{main}_change": rows["ctranslate2 int8"][main]
              - rows["ctranslate2 float32"][main]}
    names = [key for key in rows["ctranslate2 float32"] if key not in
             ("same_as_ctranslate2_float32", "seconds")]
    print(f"{args.task}: {len(sources)} test examples, beam {args.num_beams}, length penalty "
          f"{args.length_penalty}, {args.threads} threads")
    print(f"| engine | {' | '.join(names)} | same text as CTranslate2 float32 | seconds |")
    print("|---|" + "---:|" * (len(names) + 2))
    for name, row in rows.items():
        print(f"| {name} | {' | '.join(f'{row[key]:.2f}' for key in names)} | "
              f"{100 * row['same_as_ctranslate2_float32']:.1f} % | {row['seconds']:.0f} |")
    print(f"int8 against float32: {record[f'int8_{main}_change']:+.2f} {main}")
    if args.outputs:
        lines = ["\t".join(" ".join(text.split()) for text in
                           [source, *(texts[index] for texts in outputs.values())])
                 for index, source in enumerate(sources)]
        write_text_atomically(args.outputs, "\n".join(["\t".join(["source", *outputs]), *lines])
                              + "\n")
    if args.out:
        write_text_atomically(args.out, json.dumps(record, indent=2))
    return record


if __name__ == "__main__":
    main()
