"""Translate raw sentences with any model that follows the decoding contract.

A model exposes `initial_decoding_state(source_ids, max_length)` and
`make_step_fn(cache)` (docs/architecture.md). The translation itself is
`tf_outheads.decoding.graph.TranslationGraph`, the code the exported
SavedModel runs; `Translator` adds what Python is for: clear errors for bad
arguments, length-sorted batches (one compiled `tf.function` call each), the
input order restored, and a head cache kept in step with the weights.
"""

import logging

import numpy as np
import tensorflow as tf

from tf_outheads.decoding.graph import TranslationGraph
from tf_outheads.decoding.greedy import max_length_from_source
from tf_outheads.decoding.options import check_num_hypotheses, check_seed
from tf_outheads.decoding.sampling import row_seeds
from tf_outheads.models.seq2seq import inference_model
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
        num_hypotheses: int in `[1, beam_size]`, the default n-best size of
            `translate`. Defaults to 1.
        sampling_topk: int >= 0 or `None`. Sample each piece from the k most
            probable (0: from the whole vocabulary) instead of taking the best.
            Defaults to `None`.
        sampling_topp: float in (0, 1] or `None`. Sample from the nucleus: the
            smallest set of pieces holding probability p. Defaults to `None`.
        sampling_temperature: float > 0 or `None`. Sample from the
            distribution with its log-probabilities divided by T. Defaults to
            `None`. Any sampling option turns sampling on (the others neutral:
            k = 0, p = 1, T = 1); it needs `beam_size=1` and a head whose scores
            are log-probabilities (every categorical head; a continuous head
            with `scoring="posterior"`). See `tf_outheads.decoding.sampling`.
        seed: int in `[0, 2**63)` or `None`. Sampling seed of every call (the
            source at position i of a call draws with `row_seeds(seed, i)`, so
            a sample depends neither on the batch nor on the host: the CLI and
            the SavedModel draw the same). `None`: a fresh seed per call, kept
            in `last_seed`. Defaults to `None`.
        eos_bias: float, finite, in `[-100, 100]`. Added to EOS's score at
            every step (`tf_outheads.decoding.constraints`): < 0 gives longer
            outputs, > 0 shorter ones, in greedy, beam and sampled decoding. Its
            unit is the head's step score, so sensible values differ per head:
            nats for log-probabilities (categorical heads, a continuous head's
            default `scoring="posterior"`), a cosine in [-1, 1] for
            `scoring="cosine"`. The scores returned stay the model's (the bias
            is taken back out); an n-best list is in the biased order.
            Defaults to 0.0.
        block_repeats: bool. No output piece right after itself (a target
            prefix is still forced as given). Defaults to `False`.
        quantize: `None` or `"int8"`: decode with a quantized copy of the model
            (`tf_outheads.models.quantized_copy`: int8 Dense layers and output
            layer; `model` itself is left float). Through TensorFlow's CPU ops
            int8 is slower than float32 (benchmarks/docs/quantize.md).
            Defaults to `None`.

    Attributes:
        graph: `tf_outheads.decoding.graph.TranslationGraph`, the translation
            this object runs in batches.
        truncated_indices: list of int. Positions, in the last `translate`
            call's input, of the sources that were cut to
            `max_source_length - 1` pieces (empty before any call).
        truncated_count: int. `len(truncated_indices)`.
        last_seed: int or `None`. The sampling seed of the last `translate`
            call (`None` when it did not sample).

    Raises:
        ValueError: an option out of range (`batch_size`, `beam_size`,
            `length_penalty`, `max_length_ratio`, `max_length_offset`,
            `max_source_length`, a sampling option, `seed`, `eos_bias`,
            `block_repeats`, `quantize`), named with the value received;
            `replace_unk=True` with a model that cannot align; sampling with a
            beam, or with a head whose scores are not log-probabilities.

    Example:
    ```python
    translator = Translator(model, source_tokenizer, target_tokenizer)
    translator.translate(["En el principio creó Dios los cielos y la tierra."])
    translator.truncated_count  # 0: no source was longer than 255 pieces
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, batch_size=64,
                 max_length_ratio=1.5, max_length_offset=10, max_source_length=256,
                 beam_size=1, length_penalty=0.0, replace_unk=False, num_hypotheses=1,
                 sampling_topk=None, sampling_topp=None, sampling_temperature=None,
                 seed=None, eos_bias=0.0, block_repeats=False, quantize=None):
        self.batch_size = int_at_least("batch_size", batch_size, 1)
        self.beam_size = int_at_least("beam_size", beam_size, 1)
        self.num_hypotheses = check_num_hypotheses(num_hypotheses, self.beam_size)
        # Checks the other options (a `ValueError` naming the one out of range).
        self._graph_options = dict(
            beam_size=self.beam_size, length_penalty=length_penalty, replace_unk=replace_unk,
            max_source_length=max_source_length, max_length_ratio=max_length_ratio,
            max_length_offset=max_length_offset, sampling_topk=sampling_topk,
            sampling_topp=sampling_topp, sampling_temperature=sampling_temperature,
            eos_bias=eos_bias, block_repeats=block_repeats)
        self.seed = check_seed(seed)
        # int8: a quantized copy decodes (`Seq2SeqModel.quantize`); `model` is untouched.
        model = inference_model(model, quantize)
        self.quantize = quantize
        self.last_seed = None
        self.graph = TranslationGraph(model, source_tokenizer, target_tokenizer,
                                      num_hypotheses=self.num_hypotheses,
                                      **self._graph_options)
        self._graphs = {self.num_hypotheses: self.graph}
        self.length_penalty = self.graph.length_penalty
        self.replace_unk = self.graph.replace_unk
        self.max_length_ratio = self.graph.max_length_ratio
        self.max_length_offset = self.graph.max_length_offset
        self.max_source_length = self.graph.max_source_length
        self.sampling = self.graph.sampling
        self.eos_bias = self.graph.eos_bias
        self.block_repeats = self.graph.block_repeats
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self._decoders = {}  # n-best size → its search, traced at its first batch
        self._fingerprint = tf.function(self._weights_fingerprint)
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

    def _compile(self, cache, num_hypotheses, with_prefix, with_alignments):
        """A batch of source ids → its `num_hypotheses` best translations and scores
        `(b, n)`, in one `tf.function` (that search only), traced once for every batch
        shape: batches differ in size and width, and tracing costs seconds (without the
        signature: three traces, one per new shape until `reduce_retracing` relaxes both
        dimensions)."""
        signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                     tf.nest.map_structure(
                         lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), cache),
                     tf.TensorSpec([None], tf.uint32)]
        if with_prefix:
            signature += [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]
        # No AutoGraph: the search is written with tf.while_loop / tf.cond, and
        # converting it and the model's step costs ~2 s per trace (0.8 s instead of 2.9 s
        # for the first batch of lstm-cpu-tied).
        if num_hypotheses not in self._graphs:
            self._graphs[num_hypotheses] = TranslationGraph(
                self.model, self.source_tokenizer, self.target_tokenizer,
                num_hypotheses=num_hypotheses, **self._graph_options)
        graph = self._graphs[num_hypotheses]

        def decode(source_ids, num_pieces, cache, seeds, *prefix):
            return graph.decode(source_ids, num_pieces, cache, seeds=seeds,
                                prefix=prefix or None, alignments=with_alignments)

        return tf.function(decode, input_signature=signature, autograph=False)

    def _decode_batch(self, source_ids, num_pieces, cache, num_hypotheses, seeds, prefix=(),
                      alignments=False):
        key = (num_hypotheses if not prefix and not alignments
               else (num_hypotheses, bool(prefix), alignments))
        if key not in self._decoders:
            self._decoders[key] = self._compile(cache, num_hypotheses, bool(prefix),
                                                alignments)
        try:
            return self._decoders[key](source_ids, num_pieces, cache, seeds, *prefix)
        except tf.errors.NotFoundError:
            # `tf.random.set_seed` frees the SentencePiece resources a traced
            # graph captured (`SubwordTokenizer.ensure_resource`): rebuild them
            # and trace again, once.
            for tokenizer in (self.source_tokenizer, self.target_tokenizer):
                tokenizer.ensure_resource()
            self._decoders[key] = self._compile(cache, num_hypotheses, bool(prefix),
                                                alignments)
            return self._decoders[key](source_ids, num_pieces, cache, seeds, *prefix)

    def _prefixes(self, target_prefix, count, num_pieces):
        """`(ids (N, P), lengths (N,))` arrays of the call's prefixes, or `(None, None)`
        without any; a `ValueError` for a list of the wrong length or a prefix longer
        than its source's output limit."""
        if target_prefix is None:
            return None, None
        prefixes = list(target_prefix)
        if len(prefixes) != count:
            raise ValueError("`target_prefix` must hold one prefix per source (\"\" for "
                             f"none). Received: {len(prefixes)} prefixes for {count} sources")
        prefixes = ["" if prefix is None else prefix for prefix in prefixes]
        ids, lengths = (tensor.numpy() for tensor in self.graph.encode_prefix(
            string_tensor(prefixes, "target_prefix")))
        # The search's own limits (`TranslationGraph.search`).
        limits = np.where(num_pieces > 0, max_length_from_source(
            num_pieces + 1, ratio=self.max_length_ratio, offset=self.max_length_offset).numpy(),
            0)
        for index in np.flatnonzero(lengths > limits):
            raise ValueError(
                f"`target_prefix` {index} has {lengths[index]} target pieces, more than its "
                f"source's output limit of {limits[index]} (max_length_ratio × (source "
                "pieces + 1) + max_length_offset; 0 for a source without a piece). Received: "
                f"target_prefix[{index}]={prefixes[index]!r}")
        if not lengths.any():
            return None, None
        return ids, lengths

    @staticmethod
    def _as_bytes(sentences):
        """UTF-8 bytes of each source; a `ValueError` for an item that is not a string."""
        return string_tensor(sentences, "sentences")

    def translate(self, sentences, num_hypotheses=None, with_scores=False, seed=None,
                  target_prefix=None, with_alignments=False):
        """Translate raw source strings.

        Args:
            sentences: iterable of str (or UTF-8 bytes).
            num_hypotheses: int in `[1, beam_size]`, the n-best size (default: the
                translator's `num_hypotheses`). Each size is traced once.
            with_scores: bool, also return each hypothesis' score: the search's,
                as the length penalty defines it (α = 0: the sum of the pieces'
                and EOS's log-probabilities; α > 0: that sum divided by GNMT's
                ((5 + |Y|) / 6) ** α). A source with no piece scores 0. A sample's
                score is the model's log-probability of it, whatever the
                temperature and the cuts; and an `eos_bias` is not in any score
                (it only steers the search).
            seed: int in `[0, 2**63)`, this call's sampling seed (default: the
                translator's `seed`, else a fresh one). Ignored without sampling.
            target_prefix: `None`, or one str per source (`""` or `None`: no
                prefix): the text its translation starts with. The search
                continues after the prefix's target pieces (greedy, beam and
                sampling alike); the output holds the prefix, and its score the
                prefix pieces' log-probabilities too. A prefix needs as many
                pieces of the source's output limit (`max_length_ratio` ×
                (source pieces + 1) + `max_length_offset`).
            with_alignments: bool, also return each hypothesis' alignment: one
                `"i-j"` pair per target piece j (EOS not counted), i the source
                piece (0-based, EOS not counted) the decoder attended to most
                when it chose it (`TranslationGraph.texts`), as
                fast_align writes them. Pieces are the tokenizers' (`tokenize`).
                Needs a model with `source_alignments`.

        Returns:
            In input order, one item per source (`""` for a source with no
            subword piece): with one hypothesis and no scores, the translation
            (str); with scores, a `(translation, score)` tuple; with
            `num_hypotheses > 1`, a list of `num_hypotheses` such items, best
            first (for a source with no piece, `""` then `("", -inf)` padding).
            With alignments, each item is a tuple ending with its alignment:
            `(translation, alignment)` or `(translation, score, alignment)`.

        Raises:
            ValueError: an item that is neither str nor bytes, `num_hypotheses`
                out of range, a `target_prefix` list of another length than
                `sentences`, or a prefix longer than its source's output limit
                (naming its index).

        Sources longer than `max_source_length - 1` pieces are cut there:
        their positions are recorded in `truncated_indices` (and
        `truncated_count`), and a warning says how many were cut.
        """
        n_best = (self.num_hypotheses if num_hypotheses is None
                  else check_num_hypotheses(num_hypotheses, self.beam_size))
        if with_alignments and not self.graph.can_replace_unk:
            raise ValueError("`with_alignments=True` needs a model with "
                             "`source_alignments(source_ids, target_in)`. Received: a "
                             f"{type(self.model).__name__} without it")
        seed = check_seed(seed)
        sentences = list(sentences)
        self.truncated_indices = []
        self.last_seed = None
        if self.sampling is not None:
            seed = seed if seed is not None else self.seed
            if seed is None:
                seed = int(np.random.default_rng().integers(1 << 63))
            self.last_seed = seed
        if not sentences:
            return []
        # Each source's sampling seed, from its position in this call (unused without
        # sampling: zeros).
        seeds = (row_seeds(self.last_seed, tf.range(len(sentences))).numpy()
                 if self.last_seed is not None else np.zeros(len(sentences), np.uint32))
        # All sources at once, eagerly (a freed SentencePiece resource is rebuilt).
        source_ids, num_pieces, truncated = (
            tensor.numpy() for tensor in self.graph.encode(self._as_bytes(sentences)))
        self.truncated_indices = np.flatnonzero(truncated).tolist()
        prefix_ids, prefix_lengths = self._prefixes(target_prefix, len(sentences),
                                                    num_pieces)
        if self.truncated_indices:
            logger.warning("%d of %d sources were longer than %d subword pieces and were cut "
                           "to that length (max_source_length=%d, EOS included)",
                           len(self.truncated_indices), len(sentences),
                           self.max_source_length - 1, self.max_source_length)
        # A source with no piece (empty, blank, or only characters the
        # tokenizer drops) translates to "" and is not decoded, as in the
        # exported signature.
        texts = [[""] * n_best for _ in sentences]
        alignments = [[""] * n_best for _ in sentences]
        scores = [[0.0] + [float("-inf")] * (n_best - 1) for _ in sentences]
        # Sorting by length keeps padding (and wasted decoder steps) small.
        order = np.argsort(num_pieces, kind="stable")
        order = order[num_pieces[order] > 0]
        # Weight-only head tensors: never per batch or per step.
        cache = self.head_cache()
        for start in range(0, len(order), self.batch_size):
            indices = order[start:start + self.batch_size]
            width = num_pieces[indices].max() + 1
            prefix = ()
            if prefix_ids is not None and prefix_lengths[indices].max() > 0:
                prefix = (prefix_ids[indices, :prefix_lengths[indices].max()],
                          prefix_lengths[indices])
            batch_texts, batch_scores, batch_alignments = self._decode_batch(
                source_ids[indices, :width], num_pieces[indices], cache, n_best,
                seeds[indices], prefix, bool(with_alignments))
            for index, row, row_scores, row_alignments in zip(
                    indices, batch_texts.numpy(), batch_scores.numpy(),
                    batch_alignments.numpy()):
                texts[index] = [text.decode("utf-8") for text in row]
                scores[index] = [float(score) for score in row_scores]
                alignments[index] = [text.decode("utf-8") for text in row_alignments]
        columns = [texts] + ([scores] if with_scores else []) + (
            [alignments] if with_alignments else [])
        if len(columns) > 1:
            outputs = [list(zip(*rows)) for rows in zip(*columns)]
        else:
            outputs = texts
        return outputs if n_best > 1 else [row[0] for row in outputs]


def string_tensor(items, name):
    """A string tensor of the UTF-8 bytes of each item (str or bytes); a `ValueError`
    naming the argument `name` for an item that is not a string."""
    raw = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            # A lone surrogate (text read with errors="surrogateescape")
            # becomes invalid bytes, then U+FFFD in the graph.
            raw.append(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, (bytes, np.bytes_)):
            raw.append(bytes(item))
        else:
            raise ValueError(f"`{name}` must hold strings (str or bytes). "
                             f"Received: item {index} of type {type(item).__name__}")
    return tf.constant(raw, dtype=tf.string)


def translate(model, sentences, source_tokenizer, target_tokenizer, **kwargs):
    """One-call form of :class:`Translator`: raw strings in, translations out.

    Each call builds a new `Translator` (and traces its search again); keep a
    `Translator` to translate many times.
    """
    return Translator(model, source_tokenizer, target_tokenizer, **kwargs).translate(sentences)
