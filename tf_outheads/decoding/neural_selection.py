"""Neural vocabulary selection at inference (Domhan et al. 2022; issue 56).

A model built with a selection head (`tf_outheads.VocabularySelectionHead`) predicts,
from the encoder outputs, the probability that each target piece occurs in the
translation. A `NeuralSelection` decodes a batch over the pieces predicted above a
threshold (for any of its sources), as a `Shortlist` decodes over its lexical
candidates (`tf_outheads.decoding.selection`: the same candidate space, the same
search):

    candidates = sorted(specials ∪ prefix pieces ∪ {v : max_b σ(b_v) > threshold}),
                 padded with the next most probable pieces to a multiple of `bucket`

(Sockeye's `_get_nvs_vocab_slice_ids`, with our bucket padding). The encoder runs once:
the graph asks the model for its decoding state and encoder outputs together
(`initial_decoding_state(..., return_memory=True)`).
"""

import dataclasses
import json
import os

import tensorflow as tf

from tf_outheads.decoding.selection import DEFAULT_BUCKET, SPECIAL_IDS

SELECTION_FILE = "selection.json"
# Sockeye's `--nvs-thresh` default.
DEFAULT_THRESHOLD = 0.5


@dataclasses.dataclass(frozen=True)
class NeuralSelection:
    """Decode over the pieces a model's selection head predicts (module doc).

    Attributes:
        threshold: float in (0, 1): a piece is in when its probability exceeds it
            for some source of the batch (`tf-outheads shortlist` chooses it on dev
            for a stated recall).
        bucket: int >= 1: candidate counts are rounded up to a multiple of it.
    """

    threshold: float = DEFAULT_THRESHOLD
    bucket: int = DEFAULT_BUCKET

    # The graph gives `candidates` the model's probabilities (module doc).
    reads_model = True

    def __post_init__(self):
        if (isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float))
                or not 0.0 < self.threshold < 1.0):
            raise ValueError(f"`threshold` must be a number in (0, 1). "
                             f"Received: threshold={self.threshold!r}")
        if isinstance(self.bucket, bool) or not isinstance(self.bucket, int) or self.bucket < 1:
            raise ValueError(f"`bucket` must be a positive int. Received: bucket={self.bucket!r}")
        object.__setattr__(self, "threshold", float(self.threshold))

    def check(self, model, source_tokenizer=None, target_tokenizer=None):
        """Refuse a model without a selection head of its target vocabulary."""
        del source_tokenizer  # the model's own head reads the source
        head = getattr(model, "selection", None)
        if head is None:
            raise ValueError(
                "Neural vocabulary selection needs a model trained with a selection head "
                "(`selection=`, e.g. the presets ending in -nvs); this model has none. Use "
                "a lexical shortlist instead (tf-outheads shortlist --method lexical)")
        if target_tokenizer is not None and target_tokenizer.vocab_size != head.vocabulary_size:
            raise ValueError(f"The selection head predicts {head.vocabulary_size} pieces; the "
                             f"target tokenizer has {target_tokenizer.vocab_size}")

    def describe(self):
        """What an export's metadata says of it."""
        return {"method": "neural", "threshold": self.threshold, "bucket": self.bucket}

    def candidates(self, source_ids, prefix_ids=None, probabilities=None):
        """The batch's candidate piece ids, sorted, int32 `(K,)` (TensorFlow ops).

        Args:
            source_ids: int `(B, S)` (unused: the probabilities hold the source).
            prefix_ids: `None` or int `(B, P)`: target prefix pieces, always in.
            probabilities: float `(B, V)`, the model's `selection_probabilities`.
        """
        del source_ids
        if probabilities is None:
            raise ValueError("NeuralSelection.candidates needs the model's probabilities")
        score = tf.reduce_max(tf.cast(probabilities, tf.float32), axis=0)  # (V,)
        size = tf.shape(score)[0]
        forced = tf.constant(SPECIAL_IDS, tf.int32)
        if prefix_ids is not None:
            forced = tf.concat([forced, tf.reshape(tf.cast(prefix_ids, tf.int32), [-1])], 0)
        # Above every probability: always chosen, first.
        score = tf.tensor_scatter_nd_update(score, forced[:, tf.newaxis],
                                            tf.fill(tf.shape(forced), 2.0))
        count = tf.reduce_sum(tf.cast(score > self.threshold, tf.int32))
        wanted = tf.minimum(size, -(-count // self.bucket) * self.bucket)
        _, chosen = tf.math.top_k(score, k=wanted, sorted=False)
        return tf.sort(tf.cast(chosen, tf.int32))

    def save(self, path):
        """Write to `path` (JSON, `describe()`; written whole then renamed)."""
        # Imported here: tf_outheads.training imports the decoders (an import circle).
        from tf_outheads.training.backup import write_atomically

        def write(temporary):
            with open(temporary, "w", encoding="utf-8") as stream:
                json.dump(self.describe(), stream, indent=2)

        return write_atomically(os.fspath(path), write)

    @classmethod
    def load(cls, path):
        """Read a `save`d selection.

        Raises:
            ValueError: naming `path`, if it is not one.
        """
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as stream:
                stored = json.load(stream)
            if not isinstance(stored, dict) or stored.get("method") != "neural":
                raise ValueError("no neural selection in it")
            return cls(stored["threshold"], int(stored.get("bucket", DEFAULT_BUCKET)))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: not a selection written by NeuralSelection.save "
                             f"({error})") from error


__all__ = ["DEFAULT_THRESHOLD", "NeuralSelection", "SELECTION_FILE"]
