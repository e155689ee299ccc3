"""TensorBoard logging for a translation run: the dev score and an attention heatmap per epoch.

Keras' own `keras.callbacks.TensorBoard` writes the loss, the metrics (token
accuracy) and the learning rate of every epoch; `TranslationSummaries` adds
what only a seq2seq model has: the score of its *translations* of a few dev
sources (WER for G2P, BLEU otherwise) and the attention of the first one, as
an image. `kerasseq train` writes both to `OUTPUT_DIR/tensorboard`:

    tensorboard --logdir runs/g2p/tensorboard
"""

import io
import os

import keras
import numpy as np
import tensorflow as tf

from kerasseq.evaluation import corpus_bleu, g2p_error_rates


class TranslationSummaries(keras.callbacks.Callback):
    """At the end of every `every`-th epoch: translate dev sources, log their score and attention.

    Args:
        log_dir: str, the TensorBoard directory (events go to `log_dir/validation`,
            next to the Keras callback's `validation` metrics).
        sources: list of str, dev source texts (keep it small: a few hundred).
        references: list (one per source) of str or list of str.
        metric: "wer" (word error rate of `kerasseq.evaluation.g2p_error_rates`,
            also logs "per") or "bleu" (sacreBLEU `corpus_bleu`).
        every: int, log every `every` epochs.
        search: `kerasseq.SearchConfig` fields for the translations (default:
            greedy, the cheapest).
    """

    def __init__(self, log_dir, sources, references, metric="wer", every=1, **search):
        super().__init__()
        if metric not in ("wer", "bleu"):
            raise ValueError(f"metric must be 'wer' or 'bleu'. Received: metric={metric!r}")
        if len(sources) != len(references):
            raise ValueError(f"sources and references differ in length: {len(sources)} vs "
                             f"{len(references)}")
        self.log_dir = log_dir
        self.sources = list(sources)
        self.references = list(references)
        self.metric = metric
        self.every = int(every)
        self.search = {"method": "greedy", **search}
        self._writer = None

    def _file_writer(self):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "validation"))
        return self._writer

    def scores(self):
        """`{name: value}` of the model's current translations of the sources."""
        hypotheses = self.model.translate(self.sources, **self.search)
        if self.metric == "wer":
            rates = g2p_error_rates(hypotheses, self.references)
            return {"dev_wer": rates["wer"], "dev_per": rates["per"]}
        return {"dev_bleu": float(corpus_bleu(hypotheses, self.references))}

    def attention_image(self):
        """The attention heatmap of the first source as a `(1, H, W, 4)` uint8 image, or None
        (a model without attention)."""
        from kerasseq.plotting import plot_attention

        model = self.model
        attention = getattr(model, "teacher_forced_attention", None)
        source_tokenizer, target_tokenizer = model.source_tokenizer, model.target_tokenizer
        if attention is None or source_tokenizer is None or target_tokenizer is None:
            return None
        source = self.sources[0]
        translation = model.translate([source], **self.search)[0]
        source_ids = source_tokenizer.encode([source]).to_tensor()
        target_ids = target_tokenizer.encode([translation]).to_tensor().numpy()
        target_in = np.concatenate([[[target_tokenizer.start_id]], target_ids], axis=1)
        try:
            weights = np.asarray(attention(source_ids, target_in))[0]
        except (TypeError, ValueError, AttributeError):
            return None  # e.g. an RNN without attention
        source_tokens = [t.decode() for t in source_tokenizer.tokenize(source).numpy()]
        target_tokens = [t.decode() for t in target_tokenizer.tokenize(translation).numpy()]
        target_tokens.append("[END]")
        if weights.shape != (len(target_tokens), len(source_tokens)):
            return None
        figure = plot_attention(weights, source_tokens, target_tokens,
                                title=f"{source} → {translation}")
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=80)
        return tf.image.decode_png(buffer.getvalue(), channels=4)[None]

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every:
            return

        scores = self.scores()
        image = self.attention_image()
        with self._file_writer().as_default():
            for name, value in scores.items():
                tf.summary.scalar("epoch_" + name, value, step=epoch)
            if image is not None:
                tf.summary.image("attention", image, step=epoch)
        self._file_writer().flush()
        if logs is not None:
            # History and the callbacks after this one see them too; `kerasseq
            # train` runs it after the CSVLogger, so history.csv keeps the same
            # columns whatever the TensorBoard flags of a resumed run.
            logs.update(scores)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
