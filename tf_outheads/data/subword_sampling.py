"""Subword regularisation: sampled segmentations of training sentences (Kudo 2018).

Kudo (2018, §3.2) trains on segmentations sampled from the unigram language model
instead of the single best one: a sentence is cut into one of its `l` best
segmentations, drawn with probability `P(x)^α / Σ P(x')^α` over those `l` (his Eq. 9,
SentencePiece's `nbest_size` = `l` and `alpha` = `α`). Here the draw is made in the
graph with a *stateless* seed per example, so the batches are a function of the
seed and of the example's position in the stream: a training run interrupted and
resumed from its iterator checkpoint sees the same segmentations as one that was not.

SentencePiece draws from its own thread-local generator, which cannot be seeded
per call; so the `l` best segmentations come from tensorflow-text's SentencePiece op
(deterministic), their log-probabilities are the sums of their pieces' scores (the
unigram model's log-probabilities, `<unk>` at the lowest score minus 10, as
SentencePiece scores it), and `tf.random.stateless_categorical` picks one. That is
SentencePiece's own `SampleEncode` for `nbest_size > 1`. Sampling from the whole
lattice (`nbest_size = -1`) and BPE-dropout (a BPE model's `alpha`) only exist behind
SentencePiece's unseeded generator, so they are refused, as is a BPE model.

Only training batches are sampled: dev, test, decoding, scoring and export always use
the best segmentation (`SubwordTokenizer.tokenize`).
"""

import dataclasses

import numpy as np
import tensorflow as tf
import tensorflow_text

from tf_outheads.data.special_tokens import UNK_ID

__all__ = ["SubwordSampling"]

# SentencePiece's unigram model scores an unknown piece at its lowest score minus this
# (`kUnkPenalty` in unigram_model.cc).
_UNK_PENALTY = 10.0


@dataclasses.dataclass(frozen=True)
class SubwordSampling:
    """Sample each training sentence's segmentation among its `nbest_size` best.

    Args:
        nbest_size: int ≥ 2. How many of the best segmentations a sentence is drawn
            from (Kudo's `l`; he used 64 and the whole lattice). Each sentence costs
            an `nbest_size`-best search: on the embedded corpus's English side with
            4,000 pieces, ~0.07 ms a sentence at 8, ~0.43 ms at 64 (0.01 ms for the
            best one alone), on one core of the tf.data pipeline.
        alpha: float ≥ 0. Smoothing `α` of the draw: 0 is uniform over the
            `nbest_size`; larger values favour the best segmentation (Kudo: 0.1–1).

    Raises:
        ValueError: naming the argument, for an `nbest_size` below 2 (−1, the whole
            lattice, cannot be seeded per example; 0 and 1 do not sample) or a
            negative or non-finite `alpha`.

    Example:

    ```python
    sampling = SubwordSampling(nbest_size=64, alpha=0.1)
    dataset = tf_outheads.data.make_training_dataset(
        sources, targets, source_tokenizer, target_tokenizer, repeat=True,
        subword_sampling=sampling)
    ```
    """

    nbest_size: int
    alpha: float

    def __post_init__(self):
        if isinstance(self.nbest_size, bool) or not isinstance(self.nbest_size,
                                                               (int, np.integer)):
            raise ValueError(f"`nbest_size` must be an int ≥ 2. Received: "
                             f"nbest_size={self.nbest_size!r}")
        if self.nbest_size < 2:
            reason = ("-1 (the whole lattice) draws from SentencePiece's own generator, "
                      "which cannot be seeded per example, so a resumed run would not "
                      "see the same batches; use e.g. 64"
                      if self.nbest_size < 0 else "0 and 1 give the best segmentation "
                      "only: leave subword sampling off instead")
            raise ValueError(f"`nbest_size` must be ≥ 2: {reason}. "
                             f"Received: nbest_size={self.nbest_size}")
        if (isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float))
                or not np.isfinite(self.alpha) or self.alpha < 0):
            raise ValueError(f"`alpha` must be a finite number ≥ 0. Received: "
                             f"alpha={self.alpha!r}")

    @classmethod
    def from_config(cls, config):
        """`None` for `None`, else a `SubwordSampling` from `{"nbest_size", "alpha"}`."""
        if config is None or isinstance(config, cls):
            return config
        if not isinstance(config, dict) or set(config) != {"nbest_size", "alpha"}:
            raise ValueError("Subword sampling takes exactly the keys `nbest_size` and "
                             f"`alpha` (e.g. {{nbest_size: 64, alpha: 0.1}}). "
                             f"Received: {config!r}")
        return cls(**config)

    def get_config(self):
        return {"nbest_size": int(self.nbest_size), "alpha": float(self.alpha)}

    def sampler(self, tokenizer, name="tokenizer"):
        """A function `(string, seed, max_pieces) -> ids` for `tokenizer`.

        `string` is a scalar string tensor, `seed` a `(2,)` int seed of
        `tf.random.stateless_categorical`, `max_pieces` an int (or `None`):
        segmentations longer than it are not drawn, unless the best one is (then
        the best is returned, and the caller's length filter decides). Returns the
        `(length,)` int32 ids, without `</s>`.

        Raises:
            ValueError: naming `name`, if `tokenizer` is not a unigram model.
        """
        if tokenizer.model_type != "unigram":
            raise ValueError(
                f"Subword sampling needs unigram SentencePiece models (Kudo 2018), "
                f"and the {name} is a {tokenizer.model_type} model: set "
                "`data.tokenizer_type: unigram` (`model_type='unigram'`). BPE-dropout "
                "draws from SentencePiece's unseeded generator, so it cannot be "
                "reproduced batch for batch after a resume.")
        nbest = tensorflow_text.SentencepieceTokenizer(
            model=tokenizer.model_proto, out_type=tf.int32, nbest_size=self.nbest_size,
            alpha=self.alpha, return_nbest=True)
        scores = np.array([tokenizer.piece_score(i) for i in range(tokenizer.vocab_size)],
                          dtype=np.float32)
        scores[UNK_ID] = scores[UNK_ID + 1:].min() - _UNK_PENALTY
        scores = tf.constant(scores)
        alpha = float(self.alpha)

        def sample(string, seed, max_pieces=None):
            # Up to `nbest_size` rows (fewer for a short sentence), best first.
            candidates = nbest.tokenize(tf.reshape(string, [1]))
            log_probs = tf.reduce_sum(tf.gather(scores, candidates), axis=1)
            logits = alpha * log_probs
            if max_pieces is not None:  # the best one always stays drawable
                lengths = candidates.row_lengths()
                allowed = ((tf.range(tf.size(lengths, out_type=tf.int64)) == 0)
                           | (lengths <= tf.cast(max_pieces, tf.int64)))
                logits = tf.where(allowed, logits, -np.inf)
            choice = tf.random.stateless_categorical(logits[tf.newaxis], 1, seed,
                                                     dtype=tf.int32)[0, 0]
            return candidates[choice]

        return sample
