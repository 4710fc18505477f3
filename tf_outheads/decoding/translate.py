"""Translate raw sentences with any model that follows the decoding contract.

A model exposes `initial_decoding_state(source_ids, max_length)` and
`make_step_fn(cache)` (docs/architecture.md); this module batches sentences by
length, runs the search in one compiled `tf.function`, detokenizes and restores
input order. `max_length` is the number of steps the search may run (the
largest per-sentence limit of the batch): a model that preallocates per-step
caches (`zoo.TransformerSeq2Seq`) sizes them with it.
"""

import logging

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tf_outheads.decoding.beam import beam_search
from tf_outheads.decoding.greedy import greedy_search, max_length_from_source
from tf_outheads.decoding.options import check_length_limits, check_length_penalty
from tf_outheads.decoding.unk import replace_unknown_words
from tf_outheads.validation import int_at_least

logger = logging.getLogger(__name__)


class Translator:
    """Greedy or beam-search translation of raw strings with a trained model.

    The head's `inference_cache()` (E' = g_out(E) for a joint head) depends
    only on the weights: it is never computed per decoding step, and is kept
    across `translate` calls until the weights change. A change is detected
    by a content fingerprint of the head's weights (the sum and the sum of
    squares of each, one cheap pass over them per call), so training steps,
    `load_weights` or a direct `assign` all refresh it.

    Every source gives one translation, in input order, and no string is
    refused: a source with no subword piece (empty, whitespace, zero-width or
    control characters only, invalid bytes only) translates to `""`; invalid
    UTF-8 bytes (in a `bytes` source, or a lone surrogate in a `str`) are read
    as U+FFFD, as the exported signature does. A source longer than
    `max_source_length - 1` pieces is translated from its first
    `max_source_length - 1`: `translate` counts these (`truncated_count`,
    `truncated_indices`) and logs a warning on the `tf_outheads` logger.

    Args:
        model: a model with `initial_decoding_state(source_ids, max_length)`
            and `make_step_fn(cache)`.
        source_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        target_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        batch_size: int >= 1. Sentences per decoding batch. Defaults to 64.
        max_length_ratio: float > 0. Output limit = ratio × source length +
            offset (in subword tokens). Defaults to 1.5.
        max_length_offset: int >= 0. Defaults to 10.
        max_source_length: int >= 2. Longer sources are truncated to this
            many subword tokens (EOS kept), so one pathological line cannot
            blow up memory. Defaults to 256.
        beam_size: int >= 1. 1 decodes greedily; more runs
            `tf_outheads.decoding.beam_search` and keeps its best hypothesis.
            Defaults to 1.
        length_penalty: float, GNMT α of the beam search, finite, in
            `[0, 10]` (`tf_outheads.decoding.options.MAX_LENGTH_PENALTY`).
            Defaults to 0.0.
        replace_unk: bool. Write the most-attended source word over every
            `<unk>` the model outputs (`tf_outheads.decoding.replace_unknown_words`;
            the model needs `source_alignments(source_ids, target_in)`).
            Batches without `<unk>` cost nothing extra; the others one
            teacher-forced pass over the chosen outputs. Defaults to `False`.

    Attributes:
        truncated_indices: list of int. Positions, in the last `translate`
            call's input, of the sources that were cut to
            `max_source_length - 1` pieces (empty before any call).
        truncated_count: int. `len(truncated_indices)`.

    Raises:
        ValueError: an option out of range (`batch_size`, `beam_size`,
            `length_penalty`, `max_length_ratio`, `max_length_offset`,
            `max_source_length`), named with the value received; or
            `replace_unk=True` with a model that cannot align.

    Example:
    ```python
    translator = Translator(model, source_tokenizer, target_tokenizer)
    translator.translate(["En el principio creó Dios los cielos y la tierra."])
    translator.truncated_count  # 0: no source was longer than 255 pieces
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, batch_size=64,
                 max_length_ratio=1.5, max_length_offset=10, max_source_length=256,
                 beam_size=1, length_penalty=0.0, replace_unk=False):
        batch_size = int_at_least("batch_size", batch_size, 1)
        beam_size = int_at_least("beam_size", beam_size, 1)
        length_penalty = check_length_penalty(length_penalty)
        max_length_ratio, max_length_offset, max_source_length = check_length_limits(
            max_length_ratio, max_length_offset, max_source_length)
        if replace_unk and not callable(getattr(model, "source_alignments", None)):
            raise ValueError(
                "`replace_unk=True` needs a model with `source_alignments(source_ids, "
                f"target_in)`. Received: a {type(model).__name__} without it")
        self.beam_size = int(beam_size)
        self.length_penalty = length_penalty
        self.replace_unk = bool(replace_unk)
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.batch_size = int(batch_size)
        self.max_length_ratio = max_length_ratio
        self.max_length_offset = max_length_offset
        self.max_source_length = max_source_length
        self._decode = tf.function(self._decode_batch, reduce_retracing=True)
        self._fingerprint = tf.function(self._weights_fingerprint)
        self._align = None
        if self.replace_unk:
            self._align = tf.function(model.source_alignments, reduce_retracing=True)
        self._cache = None
        self._cache_fingerprint = None
        self.truncated_indices = []

    @property
    def truncated_count(self):
        """int, sources of the last `translate` call cut to `max_source_length - 1` pieces."""
        return len(self.truncated_indices)

    def _weights_fingerprint(self):
        sums = []
        for weight in self.model.head.weights:
            value = tf.cast(tf.convert_to_tensor(weight), tf.float64)
            sums += [tf.reduce_sum(value), tf.reduce_sum(value * value)]
        return tf.stack(sums)

    def head_cache(self):
        """The head's inference cache, recomputed only when its weights changed."""
        fingerprint = self._fingerprint().numpy()
        if self._cache is None or not np.array_equal(fingerprint, self._cache_fingerprint):
            self._cache = self.model.head.inference_cache()
            self._cache_fingerprint = fingerprint
        return self._cache

    def _decode_batch(self, source_ids, cache):
        source_lengths = tf.reduce_sum(tf.cast(source_ids != PAD_ID, tf.int32), axis=1)
        max_length = max_length_from_source(
            source_lengths, ratio=self.max_length_ratio, offset=self.max_length_offset
        )
        step_fn = self.model.make_step_fn(cache)
        # The search's loop bound: the largest per-sentence limit.
        state = self.model.initial_decoding_state(source_ids,
                                                  max_length=tf.reduce_max(max_length))
        batch_size = tf.shape(source_ids)[0]
        if self.beam_size == 1:
            result = greedy_search(step_fn, state, batch_size, max_length)
            return result.ids, result.scores
        # The bound on one step's score that lets the search stop early: 0 for
        # log-probabilities; heads with other scores say theirs.
        bound = getattr(self.model.head, "max_step_score", 0.0)
        result = beam_search(step_fn, state, batch_size, self.beam_size, max_length,
                             length_penalty=self.length_penalty, max_step_score=bound)
        return result.ids[:, 0], result.scores[:, 0]

    def _encode(self, sentences):
        """Source ids with EOS, and the positions of the sources that were cut."""
        raw = []
        for index, sentence in enumerate(sentences):
            if isinstance(sentence, str):
                # A lone surrogate (text read with errors="surrogateescape")
                # becomes invalid bytes, then U+FFFD below.
                raw.append(sentence.encode("utf-8", "surrogatepass"))
            elif isinstance(sentence, (bytes, np.bytes_)):
                raw.append(bytes(sentence))
            else:
                raise ValueError("`sentences` must hold strings (str or bytes). "
                                 f"Received: item {index} of type {type(sentence).__name__}")
        # Invalid UTF-8 → U+FFFD, as the exported signature reads its input.
        text = tf.strings.unicode_transcode(tf.constant(raw, dtype=tf.string), "UTF-8", "UTF-8",
                                            errors="replace", replacement_char=0xFFFD,
                                            replace_control_characters=False)
        ids = self.source_tokenizer.tokenize(text).to_list()
        limit = self.max_source_length - 1
        truncated = [index for index, row in enumerate(ids) if len(row) > limit]
        return [row[:limit] + [EOS_ID] for row in ids], truncated

    def _texts(self, source_ids, ids):
        if not (self.replace_unk and (ids == UNK_ID).any()):
            return self.target_tokenizer.decode_to_text(ids)
        target_in = np.concatenate(
            [np.full((ids.shape[0], 1), BOS_ID, ids.dtype), ids[:, :-1]], axis=1)
        alignments = self._align(tf.constant(source_ids), tf.constant(target_in))
        texts = replace_unknown_words(ids, source_ids, alignments,
                                      self.source_tokenizer, self.target_tokenizer)
        return [text.decode("utf-8") for text in texts.numpy()]

    def translate(self, sentences):
        """Translate raw source strings.

        Args:
            sentences: iterable of str (or UTF-8 bytes).

        Returns:
            list of str, one translation per source, in input order (`""` for
            a source with no subword piece).

        Raises:
            ValueError: an item that is neither str nor bytes.

        Sources longer than `max_source_length - 1` pieces are cut there:
        their positions are recorded in `truncated_indices` (and
        `truncated_count`), and a warning says how many were cut.
        """
        sentences = list(sentences)
        self.truncated_indices = []
        if not sentences:
            return []
        encoded, self.truncated_indices = self._encode(sentences)
        if self.truncated_indices:
            logger.warning("%d of %d sources were longer than %d subword pieces and were cut "
                           "to that length (max_source_length=%d, EOS included)",
                           len(self.truncated_indices), len(sentences),
                           self.max_source_length - 1, self.max_source_length)
        # Weight-only head tensors: never per batch or per step.
        outputs = [None] * len(sentences)
        # A source with no piece (empty, blank, or only characters the
        # tokenizer drops) translates to "", as in the exported signature.
        for index, row in enumerate(encoded):
            if len(row) == 1:
                outputs[index] = ""
        cache = self.head_cache()
        # Sorting by length keeps padding (and wasted decoder steps) small.
        order = [i for i in np.argsort([len(row) for row in encoded], kind="stable")
                 if outputs[i] is None]
        for start in range(0, len(order), self.batch_size):
            indices = order[start:start + self.batch_size]
            width = max(len(encoded[i]) for i in indices)
            batch = np.full((len(indices), width), PAD_ID, dtype=np.int32)
            for row, index in enumerate(indices):
                batch[row, : len(encoded[index])] = encoded[index]
            ids, _ = self._decode(tf.constant(batch), cache)
            texts = self._texts(batch, ids.numpy())
            for index, text in zip(indices, texts):
                outputs[index] = text
        return outputs


def translate(model, sentences, source_tokenizer, target_tokenizer, **kwargs):
    """One-call form of :class:`Translator`: raw strings in, translations out.

    Each call builds a new `Translator` (and traces its search again); keep a
    `Translator` to translate many times.
    """
    return Translator(model, source_tokenizer, target_tokenizer, **kwargs).translate(sentences)
