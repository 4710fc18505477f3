"""Forced decoding: the score a model gives to a given translation (`Scorer`, `score`).

The teacher-forced pass reads `[BOS] + pieces` and every position's hidden state goes
through the head's decoding scores (`OutputHead.scores`, the very scores the search
adds up), gathered at `pieces + [EOS]`. For every categorical head (softmax, tied,
joint, sampled-softmax-trained, ReWE-trained, shared-private) and for the continuous
head with `scoring="posterior"` those scores are log-probabilities, so a sentence's sum
is its log-probability and minus the corpus mean per token is the cross-entropy in
nats (no label smoothing: it is the model's distribution, not its training loss).
A continuous head with `scoring="cosine"` or `"log_likelihood"` gives the search's
scores, which are not a distribution (`Scorer.log_probabilities` is then False): they
rank translations under that model but compare with no other head's.

The search's constraints (`eos_bias`, `block_repeats`: `tf_outheads.decoding.constraints`)
steer which output is chosen and never enter a score: forced decoding ignores them, and
the search reports the model's scores, so a greedy output still scores here what the
search said it scored.
"""

import logging

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding.graph import tokenize_text
from tf_outheads.decoding.translator import string_tensor
from tf_outheads.models.seq2seq import inference_model
from tf_outheads.validation import int_at_least

logger = logging.getLogger(__name__)

__all__ = ["Scorer", "score"]


class Scorer:
    """Scores given translations of given sources under a trained model.

    Args:
        model: a `Seq2SeqModel` (`teacher_forced` and a `head` with `scores`).
        source_tokenizer, target_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        batch_size: sentence pairs per teacher-forced pass (pairs are sorted by
            length first, so padding stays small). The scores do not depend on it.
        max_source_length, max_target_length: pieces read, EOS included;
            longer sides are cut (their indices in `truncated_indices`, with a
            warning), as the translator cuts sources.
        max_input_bytes: int or `None`: raw strings are cut to this many bytes
            first (as the export does). Defaults to `None`.
        quantize: `None` or `"int8"`: score with a quantized copy of the model
            (as `Translator`). Defaults to `None`.

    Example:

    ```python
    scorer = Scorer(model, source_tokenizer, target_tokenizer)
    (result,) = scorer.score(["En el principio creó Dios los cielos y la tierra."],
                             ["In the beginning God created the heavens and the earth."])
    result["log_prob"], result["tokens"]  # sum over the pieces and EOS, their number
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, batch_size=32,
                 max_source_length=256, max_target_length=256, max_input_bytes=None,
                 quantize=None):
        self.batch_size = int_at_least("batch_size", batch_size, 1)
        self.max_source_length = int_at_least("max_source_length", max_source_length, 2)
        self.max_target_length = int_at_least("max_target_length", max_target_length, 2)
        self.max_input_bytes = (None if max_input_bytes is None
                                else int_at_least("max_input_bytes", max_input_bytes, 1))
        self.model = inference_model(model, quantize)
        self.quantize = quantize
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.log_probabilities = bool(getattr(model.head, "scores_are_log_probabilities",
                                              True))
        self.truncated_indices = []
        self._score_batch = None  # traced at the first batch (`_compile`)

    # -- in the graph -----------------------------------------------------------------
    def encode(self, sources, targets):
        """Raw strings `(B,)` twice → `source_ids (B, S)` with EOS, `target_in (B, T)`
        (`[BOS] + pieces`), `target_out (B, T)` (`pieces + [EOS]`), padded with PAD, and
        whether either side was cut `(B,)`. Both sides are read as the search reads a
        source (`tokenize_text`: invalid UTF-8 → U+FFFD)."""
        source_pieces, source_cut = tokenize_text(self.source_tokenizer, sources,
                                                  self.max_source_length - 1,
                                                  self.max_input_bytes)
        target_pieces, target_cut = tokenize_text(self.target_tokenizer, targets,
                                                  self.max_target_length - 1,
                                                  self.max_input_bytes)
        truncated = tf.logical_or(source_cut, target_cut)
        rows = tf.shape(sources)[0]
        eos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], EOS_ID))
        bos = tf.RaggedTensor.from_tensor(tf.fill([rows, 1], BOS_ID))
        source_ids = tf.concat([source_pieces, eos], axis=1).to_tensor(PAD_ID)
        target_in = tf.concat([bos, target_pieces], axis=1).to_tensor(PAD_ID)
        target_out = tf.concat([target_pieces, eos], axis=1).to_tensor(PAD_ID)
        return source_ids, target_in, target_out, truncated

    def score_graph(self, sources, targets, cache, checks=None):
        """Raw strings `(B,)` twice → the `score` signature's outputs, in graph ops:
        `log_prob` `(B,)`, `tokens` `(B,)` int32 (pieces and EOS), `token_log_probs`
        `(B, T)` (0 past each row's tokens), `pieces` `(B, T)` string (`""` past them),
        `truncated` `(B,)` bool.

        `checks`: `None`, or a callable `(pieces (B,)) -> list of asserts`, run on the
        pieces of both sides of each pair (EOS not counted) before the teacher-forced
        pass. An empty batch
        gives empty outputs (a recurrent pass cannot run zero steps).
        """
        def empty():
            return {"log_prob": tf.zeros([0]), "tokens": tf.zeros([0], tf.int32),
                    "token_log_probs": tf.zeros([0, 0]), "pieces": tf.fill([0, 0], ""),
                    "truncated": tf.zeros([0], tf.bool)}

        return tf.cond(tf.size(sources) > 0,
                       lambda: self._score_strings(sources, targets, cache, checks), empty)

    def _score_strings(self, sources, targets, cache, checks):
        source_ids, target_in, target_out, truncated = self.encode(sources, targets)
        if checks is not None:
            pieces = (tf.reduce_sum(tf.cast(source_ids != PAD_ID, tf.int32), axis=1)
                      + tf.reduce_sum(tf.cast(target_out != PAD_ID, tf.int32), axis=1) - 2)
            asserts = checks(pieces)
            if asserts:
                with tf.control_dependencies(asserts):
                    source_ids = tf.identity(source_ids)
        token_scores = self._token_scores(source_ids, target_in, target_out, cache)
        present = tf.not_equal(target_out, PAD_ID)
        with tf.device("/cpu:0"):
            pieces = tf.where(present, self.target_tokenizer.id_to_string(target_out), "")
        return {"log_prob": tf.reduce_sum(token_scores, axis=1),
                "tokens": tf.reduce_sum(tf.cast(present, tf.int32), axis=1),
                "token_log_probs": token_scores, "pieces": pieces, "truncated": truncated}

    def _token_scores(self, source_ids, target_in, target_out, cache):
        """`(B, T)` float32: each target piece's score (0 at padding)."""
        hidden = self.model.teacher_forced(source_ids, target_in, training=False)
        batch, length = tf.shape(hidden)[0], tf.shape(hidden)[1]
        flat = tf.reshape(hidden, [batch * length, hidden.shape[-1]])
        scores = self.model.head.scores(flat, cache)  # (B·T, V)
        picked = tf.gather(scores, tf.reshape(target_out, [-1]), batch_dims=1)
        picked = tf.reshape(tf.cast(picked, tf.float32), [batch, length])
        return tf.where(tf.not_equal(target_out, PAD_ID), picked, 0.0)

    def _compile(self, cache):
        """The teacher-forced pass as one `tf.function`, traced once for every batch shape
        (as `Translator` traces its search)."""
        matrix = tf.TensorSpec([None, None], tf.int32)
        signature = [matrix, matrix, matrix, tf.nest.map_structure(
            lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), cache)]
        return tf.function(self._token_scores, input_signature=signature)

    # -- the whole request -----------------------------------------------------------
    def score(self, sources, targets, per_token=False):
        """Scores `targets[i]` as the translation of `sources[i]`.

        Args:
            sources, targets: equal-length lists of str.
            per_token: also return each target piece (and EOS) with its score.

        Returns:
            list of dict, in input order: `log_prob` (the sum over the target's
            pieces and EOS), `tokens` (their number), `mean_log_prob`; with
            `per_token`, `pieces` (strings, `"</s>"` last) and `token_log_probs`.

        Raises:
            ValueError: lists of different lengths, or an item that is not a string.
        """
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError("`sources` and `targets` must have one line each per pair. "
                             f"Received: {len(sources)} sources and {len(targets)} targets")
        self.truncated_indices = []
        if not sources:
            return []
        source_ids, target_in, target_out, truncated = (t.numpy() for t in self.encode(
            string_tensor(sources, "sources"), string_tensor(targets, "targets")))
        self.truncated_indices = np.flatnonzero(truncated).tolist()
        if self.truncated_indices:
            logger.warning("%d of %d pairs had a side longer than the model reads "
                           "(max_source_length=%d, max_target_length=%d) and were cut",
                           len(self.truncated_indices), len(sources), self.max_source_length,
                           self.max_target_length)
        return self._score_arrays(source_ids, target_in, target_out, per_token)

    def score_ids(self, source_ids, target_ids, per_token=False):
        """Scores given piece ids, as `score` scores strings: `target_ids[i]` (the
        target's pieces, without BOS or EOS) as the translation of `source_ids[i]` (the
        source's pieces, without EOS). What a reranker holds, or a search's output,
        scored exactly as it was produced (no detokenizing and tokenizing again).

        Args:
            source_ids, target_ids: equal-length lists of lists of int.
            per_token: as in `score`.

        Returns:
            as `score`.
        """
        source_ids, target_ids = list(source_ids), list(target_ids)
        if len(source_ids) != len(target_ids):
            raise ValueError("`source_ids` and `target_ids` must have one row each per pair. "
                             f"Received: {len(source_ids)} and {len(target_ids)} rows")
        if not source_ids:
            return []
        rows = len(source_ids)
        sources = [list(map(int, ids))[:self.max_source_length - 1] + [EOS_ID]
                   for ids in source_ids]
        targets = [list(map(int, ids))[:self.max_target_length - 1] for ids in target_ids]
        self.truncated_indices = [i for i in range(rows)
                                  if len(source_ids[i]) > self.max_source_length - 1
                                  or len(target_ids[i]) > self.max_target_length - 1]
        width_s = max(len(ids) for ids in sources)
        width_t = max(len(ids) for ids in targets) + 1
        source_array = np.full((rows, width_s), PAD_ID, np.int32)
        target_in = np.full((rows, width_t), PAD_ID, np.int32)
        target_out = np.full((rows, width_t), PAD_ID, np.int32)
        for row, (source, target) in enumerate(zip(sources, targets)):
            source_array[row, :len(source)] = source
            target_in[row, :len(target) + 1] = [BOS_ID] + target
            target_out[row, :len(target) + 1] = target + [EOS_ID]
        return self._score_arrays(source_array, target_in, target_out, per_token)

    def _score_arrays(self, source_ids, target_in, target_out, per_token):
        """Padded `(B, S)`, `(B, T)`, `(B, T)` int arrays → the results of `score`."""
        target_lengths = (target_out != PAD_ID).sum(axis=1)
        source_lengths = (source_ids != PAD_ID).sum(axis=1)
        cache = self.model.head.inference_cache()
        if self._score_batch is None:
            self._score_batch = self._compile(cache)
        token_scores = [None] * len(source_ids)
        order = np.lexsort((source_lengths, target_lengths))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width_s, width_t = source_lengths[rows].max(), target_lengths[rows].max()
            scores = self._score_batch(
                tf.constant(source_ids[rows, :width_s]), tf.constant(target_in[rows, :width_t]),
                tf.constant(target_out[rows, :width_t]), cache).numpy()
            for row, values in zip(rows, scores):
                token_scores[row] = values[:target_lengths[row]].astype(np.float64)
        results = []
        for row, values in enumerate(token_scores):
            total = float(values.sum())
            result = {"log_prob": total, "tokens": int(values.size),
                      "mean_log_prob": total / values.size}
            if per_token:
                ids = target_out[row, :values.size]
                result["pieces"] = [self.target_tokenizer.id_to_piece(int(i)) for i in ids]
                result["token_log_probs"] = [float(v) for v in values]
            results.append(result)
        return results


def score(model, sources, targets, source_tokenizer, target_tokenizer, per_token=False,
          **kwargs):
    """One-call form of :class:`Scorer` (each call traces its pass again)."""
    return Scorer(model, source_tokenizer, target_tokenizer, **kwargs).score(
        sources, targets, per_token=per_token)
