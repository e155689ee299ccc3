"""Decoding speed: kerasseq's cached greedy / beam search vs keras-hub and no-cache loops.

Every method decodes the same batch with the same (untrained, randomly
initialised) `build_transformer_seq2seq` model:

- kerasseq `greedy` and `beam_search(num_beams=4)` inside one `tf.function`
  with `model.encode` (the caller compiles: the decoders keep no compiled
  functions), `jit_compile` off and on, driven by the model's cached
  `decode_step` (beam search with
  `shared_state=model.shared_state_keys`, as the Translator runs it: one copy
  of the cross-attention caches per source instead of one per beam);
- `keras_hub.samplers.BeamSampler(num_beams=4)` driven by the SAME cached
  `decode_step` (the kerasseq state dict is passed as keras-hub's `cache`; the
  sampler tiles and reorders every tensor of the nested structure), inside one
  `tf.function`, `jit_compile` off and on;
- the tutorials' no-cache greedy loop: a `tf.function` that at every step
  re-runs the teacher-forced model `model([source_ids, prefix])` on the whole
  prefix (the encoder included, as in the TensorFlow Transformer tutorial) and
  takes the arg-max at the last position;
- a no-cache beam-4: `BeamSampler(4)` whose `next` re-runs
  `model([source_ids, prompt[:, :index]])` on the whole prefix.

Equal work. Every method generates exactly `N = max_length - 1` tokens per
sentence: the output bias of the end token (and of the padding id 0) is set to
-1e4 so that no search ever picks them, and kerasseq's searches also get
`min_length = N`. Without end tokens every beam search is a plain beam search,
so kerasseq's best beam should equal keras-hub's top beam (checked below), and
the cached greedy output should equal the no-cache greedy output.

Timing. Each timed call includes `encode` (in the same `tf.function`) for the
cached methods; the no-cache loops re-run the encoder at every step by design. Each
method is called once to trace / compile (reported as "first call"), then the
methods are timed in `R` interleaved rounds and the median is reported.
Throughput counts the `batch * N` tokens of the returned sentences (beam
searches do ~4x the model work for the same count).

Memory. `tf.config.experimental.get_memory_info("CPU:0")` returns zeros on
CPU, so the table shows the peak resident set size (RSS, sampled every 2 ms
from /proc/self/statm) during a timed call minus the RSS just before it. TF's
allocator keeps freed memory, so this is a rough upper-level indicator of the
transient working set, not an exact allocation count.

Usage:

    .venv/bin/python benchmarks/decode_speed.py            # full: d_model 256, 3 layers
    .venv/bin/python benchmarks/decode_speed.py --quick    # small model, < 3 minutes
    .venv/bin/python benchmarks/decode_speed.py --layers 6 --d-model 512 --heads 8 \
        --dff 2048 --batch 256 --max-length 64               # the large GPU setting
    .venv/bin/python benchmarks/decode_speed.py --only Translator,keras-hub

The two "Translator" rows run `kerasseq.Translator.generate` (the path of
`model.translate`, the CLI and exports) with `jit_compile="auto"`, the
default: they include the id checks, bucket padding and the host copy of the
result. Every row uses the model's start and end ids (kerasseq's reserved 2
and 3), and the Translator rows must decode the same tokens as the direct
rows of the same jit setting (the run stops otherwise).
"""

import argparse
import os
import statistics
import sys
import threading
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from kerasseq import SearchConfig, Translator  # noqa: E402  (and the backend check)
from kerasseq.decoding import beam_search, greedy  # noqa: E402
from kerasseq.models import build_transformer_seq2seq  # noqa: E402
from kerasseq.translator import resolve_jit_compile  # noqa: E402

SETTINGS = {
    "full": dict(num_layers=3, d_model=256, num_heads=4, dff=1024, vocab_size=1000,
                 batch_size=32, source_length=20, max_length=32, repeats=5),
    "quick": dict(num_layers=2, d_model=64, num_heads=4, dff=256, vocab_size=200,
                  batch_size=32, source_length=20, max_length=32, repeats=5),
}
# The model's own ids (kerasseq's reserved ids, which `Translator` reads from a
# model without tokenizers), in every row: the direct calls and the Translator
# rows decode the same tokens, checked at the end.
from kerasseq.data.tokenizer import END_ID, PAD_ID, START_ID  # noqa: E402

NUM_BEAMS = 4


class PeakRSS:
    """Samples the process RSS in a thread; `peak - baseline` in MiB."""

    def __init__(self, interval=0.002):
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")

    def rss(self):
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def __enter__(self):
        self.baseline = self.peak = self.rss()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while self.running:
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def growth_mib(self):
        return (self.peak - self.baseline) / 2**20


def build_model(settings):
    keras.utils.set_random_seed(0)
    model = build_transformer_seq2seq(
        settings["vocab_size"], settings["vocab_size"], num_layers=settings["num_layers"],
        d_model=settings["d_model"], num_heads=settings["num_heads"], dff=settings["dff"],
        dropout=0.0, max_positions=settings["max_length"],
    )
    # Random weights; make the end and padding tokens unreachable so that every
    # method generates exactly max_length - 1 tokens.
    bias = model.output_projection.bias
    # Small random bias so that the arg-max is not dominated by ties.
    value = np.random.default_rng(0).normal(0.0, 0.5, size=bias.shape[0]).astype(np.float32)
    value[[PAD_ID, END_ID]] = -1e4
    bias.assign(value)
    return model


def make_methods(model, num_new):
    """name -> (function(source_ids) -> tokens (batch, num_new) best first, jit)."""
    step_fn = model.decode_step

    # The decoders keep no compiled functions: like keras-hub's sampler below,
    # each runs inside one tf.function of the caller (encode + search), XLA or not.
    def kerasseq_greedy(jit):
        @tf.function(jit_compile=jit)
        def run(source_ids):
            state = model.encode(source_ids)
            ids, _, _ = greedy(step_fn, state, source_ids.shape[0], START_ID, END_ID,
                               max_length=num_new, min_length=num_new)
            return ids
        return run

    def kerasseq_beam(jit):
        @tf.function(jit_compile=jit)
        def run(source_ids):
            state = model.encode(source_ids)
            ids, _, _ = beam_search(step_fn, state, source_ids.shape[0], START_ID, END_ID,
                                    num_beams=NUM_BEAMS, max_length=num_new,
                                    min_length=num_new, shared_state=model.shared_state_keys)
            return ids[:, 0]
        return run

    def hub_prompt(source_ids):
        batch = tf.shape(source_ids)[0]
        start = tf.fill([batch, 1], START_ID)
        return tf.concat([start, tf.zeros([batch, num_new], tf.int32)], axis=1)
        # (batch, num_new + 1): start token at position 0, generate from index 1

    def hub_beam_cached(jit):
        sampler = keras_hub.samplers.BeamSampler(num_beams=NUM_BEAMS)

        def next_fn(prompt, cache, index):
            token = prompt[:, index - 1]  # (rows,)
            logits, cache = step_fn(token, cache, index - 1)
            return logits, None, cache

        @tf.function(jit_compile=jit)
        def run_graph(source_ids):
            return sampler(next_fn, hub_prompt(source_ids), cache=model.encode(source_ids),
                           index=1)

        return lambda source_ids: run_graph(source_ids)[:, 1:]

    @tf.function
    def nocache_greedy(source_ids):
        batch = tf.shape(source_ids)[0]
        output = tf.TensorArray(tf.int32, size=num_new + 1)
        output = output.write(0, tf.fill([batch], START_ID))
        for i in tf.range(num_new):
            prefix = tf.transpose(output.stack()[: i + 1])  # (batch, i + 1)
            logits = model([source_ids, prefix], training=False)  # (batch, i + 1, vocab)
            output = output.write(i + 1, tf.argmax(logits[:, -1], axis=-1, output_type=tf.int32))
        return tf.transpose(output.stack())[:, 1:]

    nocache_sampler = keras_hub.samplers.BeamSampler(num_beams=NUM_BEAMS)

    def nocache_next(prompt, cache, index):
        logits = model([cache["source_ids"], prompt[:, :index]], training=False)
        return logits[:, -1], None, cache

    @tf.function
    def nocache_beam(source_ids):
        return nocache_sampler(nocache_next, hub_prompt(source_ids),
                               cache={"source_ids": source_ids}, index=1)[:, 1:]

    def translator_method(method, jit):
        # The one inference path (what model.translate, the CLI and exports run):
        # checks, row/column buckets, one compiled encode + search function.
        translator = Translator(model, SearchConfig(
            method=method, num_beams=NUM_BEAMS, max_length=num_new, min_length=num_new,
            jit_compile=jit, batch_size=1 << 20))

        def run(source_ids):
            return translator.generate(source_ids.numpy())[0][:, 0]  # (rows, length): the best
        return run

    return {
        "Translator greedy (jit auto)": (translator_method("greedy", "auto"), True),
        "Translator beam-4 (jit auto)": (translator_method("beam", "auto"), True),
        "kerasseq greedy": (kerasseq_greedy(False), False),
        "kerasseq greedy XLA": (kerasseq_greedy(True), True),
        "kerasseq beam-4": (kerasseq_beam(False), False),
        "kerasseq beam-4 XLA": (kerasseq_beam(True), True),
        "keras-hub BeamSampler-4 (cached)": (hub_beam_cached(False), False),
        "keras-hub BeamSampler-4 (cached) XLA": (hub_beam_cached(True), True),
        "no-cache greedy (tutorial loop)": (nocache_greedy, False),
        "no-cache beam-4 (BeamSampler)": (nocache_beam, False),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small model, < 1 minute")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (median)")
    parser.add_argument("--skip", default="", help="comma-separated substrings of methods to skip")
    parser.add_argument("--only", default="", help="comma-separated substrings: run only these methods")
    parser.add_argument("--tf32", action="store_true",
                        help="keep TensorFloat-32 matmuls on (GPU): faster, but near-ties between "
                             "tokens then break differently in each method, so the equality "
                             "checks report less than 100 %% (off by default)")
    for name, help_text in (("layers", "decoder (and encoder) layers"), ("d-model", "model width"),
                            ("heads", "attention heads"), ("dff", "feed-forward width"),
                            ("vocab", "vocabulary size"), ("batch", "sentences per batch"),
                            ("source-length", "source tokens"),
                            ("max-length", "target positions (new tokens = max-length - 1)")):
        parser.add_argument(f"--{name}", type=int, default=None, help=f"{help_text} (overrides the preset)")
    args = parser.parse_args(argv)
    # Exact float32 on a GPU unless --tf32: the methods are compared token for token.
    tf.config.experimental.enable_tensor_float_32_execution(bool(args.tf32))
    settings = dict(SETTINGS["quick" if args.quick else "full"])
    if args.repeats:
        settings["repeats"] = args.repeats
    for name, key in (("layers", "num_layers"), ("d_model", "d_model"), ("heads", "num_heads"),
                      ("dff", "dff"), ("vocab", "vocab_size"), ("batch", "batch_size"),
                      ("source_length", "source_length"), ("max_length", "max_length")):
        if getattr(args, name) is not None:
            settings[key] = getattr(args, name)
    num_new = settings["max_length"] - 1
    batch = settings["batch_size"]

    wall_start = time.perf_counter()
    model = build_model(settings)
    rng = np.random.default_rng(1)
    source_ids = rng.integers(END_ID + 1, settings["vocab_size"],
                              size=(batch, settings["source_length"]))
    source_ids = tf.constant(source_ids, tf.int32)
    skip = [s for s in args.skip.split(",") if s]
    only = [s for s in args.only.split(",") if s]
    methods = {name: fn for name, fn in make_methods(model, num_new).items()
               if not any(s in name for s in skip) and (not only or any(s in name for s in only))}

    print(f"model: {settings['num_layers']} layers, d_model {settings['d_model']}, "
          f"{settings['num_heads']} heads, dff {settings['dff']}, vocab {settings['vocab_size']}, "
          f"{model.count_params():,} parameters (random weights)")
    print(f"batch {batch}, source length {settings['source_length']}, exactly {num_new} new "
          f"tokens per sentence (end/pad tokens made unreachable, min_length={num_new}), "
          f"{settings['repeats']} timed rounds, median reported")
    print(f"load average before: {os.getloadavg()}", flush=True)

    first_call, outputs = {}, {}
    for name, (fn, _) in methods.items():
        start = time.perf_counter()
        outputs[name] = np.asarray(fn(source_ids))
        first_call[name] = time.perf_counter() - start
        print(f"  first call {name}: {first_call[name]:.1f} s", flush=True)

    times = {name: [] for name in methods}
    memory = {name: 0.0 for name in methods}
    for _ in range(settings["repeats"]):
        for name, (fn, _) in methods.items():
            with PeakRSS() as rss:
                start = time.perf_counter()
                np.asarray(fn(source_ids))
                times[name].append(time.perf_counter() - start)
            memory[name] = max(memory[name], rss.growth_mib)

    median = {name: statistics.median(t) for name, t in times.items()}
    tokens = batch * num_new
    header = ("| method | first call s | median s | sentences/s | tokens/s | peak RSS growth MiB |\n"
              "|---|---:|---:|---:|---:|---:|")
    print()
    print(header)
    for name in methods:
        print(f"| {name} | {first_call[name]:.1f} | {median[name]:.3f} | "
              f"{batch / median[name]:,.1f} | {tokens / median[name]:,.0f} | {memory[name]:.1f} |")

    def best(*names):
        present = [n for n in names if n in median]
        return min(present, key=median.get) if present else None

    def ratio(label, numerator, denominator, goal):
        if numerator in median and denominator in median:
            print(f"- {label}: {median[numerator] / median[denominator]:.2f}x "
                  f"({numerator} / {denominator}; goal {goal})")

    ks_beam = best("kerasseq beam-4", "kerasseq beam-4 XLA")
    ks_greedy = best("kerasseq greedy", "kerasseq greedy XLA")
    hub_beam = best("keras-hub BeamSampler-4 (cached)", "keras-hub BeamSampler-4 (cached) XLA")
    print("\nratios of median times (best jit setting of each):")
    ratio("keras-hub beam time / kerasseq beam time", hub_beam, ks_beam, ">= 3")
    for jit in ("", " XLA"):
        ratio(f"  same jit{jit or ' off'}", "keras-hub BeamSampler-4 (cached)" + jit,
              "kerasseq beam-4" + jit, ">= 3")
    ratio("no-cache greedy time / kerasseq greedy time", "no-cache greedy (tutorial loop)",
          ks_greedy, ">= 10")
    ratio("no-cache beam-4 time / kerasseq beam-4 time", "no-cache beam-4 (BeamSampler)",
          ks_beam, "-")
    ratio("kerasseq beam-4 time / kerasseq greedy time", ks_beam, ks_greedy, "<= 4")
    for jit in ("", " XLA"):
        ratio(f"  same jit{jit or ' off'}", "kerasseq beam-4" + jit, "kerasseq greedy" + jit, "<= 4")

    print("\noutput checks:")
    for name, out in outputs.items():
        print(f"- {name}: shape {out.shape}, end/pad tokens present: "
              f"{bool(np.isin(out, [PAD_ID, END_ID]).any())}")

    def agree(a, b):
        if a in outputs and b in outputs:
            rows = np.mean(np.all(outputs[a] == outputs[b], axis=1))
            print(f"- {a} == {b}: {rows:.0%} of sentences identical")

    agree("kerasseq beam-4", "keras-hub BeamSampler-4 (cached)")
    agree("kerasseq beam-4 XLA", "keras-hub BeamSampler-4 (cached) XLA")
    agree("kerasseq beam-4", "no-cache beam-4 (BeamSampler)")
    agree("kerasseq beam-4", "kerasseq beam-4 XLA")
    agree("kerasseq greedy", "no-cache greedy (tutorial loop)")
    agree("kerasseq greedy", "kerasseq greedy XLA")
    # The Translator rows run the direct rows' search (its jit "auto" resolved
    # here), with the same ids: the same tokens, or the benchmark stops.
    jit = " XLA" if resolve_jit_compile("auto") else ""
    for translator_row, direct_row in (("Translator greedy (jit auto)", "kerasseq greedy" + jit),
                                       ("Translator beam-4 (jit auto)", "kerasseq beam-4" + jit)):
        agree(translator_row, direct_row)
        if translator_row in outputs and direct_row in outputs and not np.array_equal(
                outputs[translator_row], outputs[direct_row]):
            raise SystemExit(f"{translator_row} decoded other tokens than {direct_row}")
    print(f"\nload average after: {os.getloadavg()}; wall time "
          f"{time.perf_counter() - wall_start:.0f} s")


if __name__ == "__main__":
    main()
