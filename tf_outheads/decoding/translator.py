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
from tf_outheads.decoding.options import decode_options
from tf_outheads.decoding.prefix import check_prefix_lengths
from tf_outheads.decoding.sampling import row_seeds
from tf_outheads.models.seq2seq import inference_model

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
        options: `tf_outheads.decoding.options.DecodeOptions`, the decoding
            options (beam size, length penalty, n-best size, sampling, seed,
            `<unk>` replacement, alignments, EOS bias, repeat blocking, length
            limits, batch size, quantization; see there). `None`: the defaults.
        shortlist: `None`, a `tf_outheads.decoding.selection.Shortlist` of these
            tokenizers or a `tf_outheads.decoding.NeuralSelection`: decode each
            batch over its candidates only (vocabulary selection). Defaults to `None`.
        **changes: options by name (`DecodeOptions` fields) over `options`:
            `Translator(model, s, t, beam_size=5)` is `Translator(model, s, t,
            options=DecodeOptions(beam_size=5))`. Checked once, with `options`.

    Attributes:
        options: `DecodeOptions`, the default options of `translate`.
        graph: `tf_outheads.decoding.graph.TranslationGraph`, the translation
            this object runs in batches with `options`.
        truncated_indices: list of int. Positions, in the last `translate`
            call's input, of the sources that were cut to
            `max_source_length - 1` pieces (empty before any call).
        truncated_count: int. `len(truncated_indices)`.
        last_seed: int or `None`. The sampling seed of the last `translate`
            call (`None` when it did not sample).

    Raises:
        ValueError: an option out of range, named with the value received
            (`DecodeOptions`); `replace_unk=True` or `with_alignments=True` with a
            model that cannot align; sampling with a head whose scores are not
            log-probabilities.
        TypeError: a change that names no option.

    Example:
    ```python
    translator = Translator(model, source_tokenizer, target_tokenizer, beam_size=5)
    translator.translate(["En el principio creó Dios los cielos y la tierra."])
    translator.truncated_count  # 0: no source was longer than 255 pieces
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, options=None, shortlist=None,
                 **changes):
        self.options = decode_options(options, **changes)
        if shortlist is not None:  # before anything is built
            shortlist.check(model, source_tokenizer, target_tokenizer)
        self.shortlist = shortlist
        # int8: a quantized copy decodes (`Seq2SeqModel.quantize`); `model` is untouched.
        self.model = inference_model(model, self.options.quantize)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self._graphs = {}  # `DecodeOptions.trace_key()` → its TranslationGraph
        self.graph = self._graph(self.options)
        self.last_seed = None
        self._decoders = {}  # (trace key, with a prefix) → its search, traced at its first batch
        self._fingerprint = tf.function(self._weights_fingerprint)
        self._cache = None
        self._cache_fingerprint = None
        self.truncated_indices = []

    def _graph(self, options):
        """The `TranslationGraph` of `options` (one per `trace_key`)."""
        key = options.trace_key()
        if key not in self._graphs:
            self._graphs[key] = TranslationGraph(self.model, self.source_tokenizer,
                                                 self.target_tokenizer, options,
                                                 shortlist=self.shortlist)
        return self._graphs[key]

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

    def _compile(self, graph, cache, with_prefix):
        """A batch of source ids → its translations, scores and alignments `(b, n)` with
        `graph`'s options, in one `tf.function` (that search only), traced once for every
        batch shape: batches differ in size and width, and tracing costs seconds (without
        the signature: three traces, one per new shape until `reduce_retracing` relaxes
        both dimensions)."""
        signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32),
                     tf.nest.map_structure(
                         lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), cache),
                     tf.TensorSpec([None], tf.uint32)]
        if with_prefix:
            signature += [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)]

        def decode(source_ids, num_pieces, cache, seeds, *prefix):
            return graph.decode(source_ids, num_pieces, cache, seeds=seeds,
                                prefix=prefix or None)

        # No AutoGraph: the search is written with tf.while_loop / tf.cond, and
        # converting it and the model's step costs ~2 s per trace (0.8 s instead of 2.9 s
        # for the first batch of lstm-cpu-tied).
        return tf.function(decode, input_signature=signature, autograph=False)

    def _decode_batch(self, graph, source_ids, num_pieces, cache, seeds, prefix=()):
        key = (graph.options.trace_key(), bool(prefix))
        if key not in self._decoders:
            self._decoders[key] = self._compile(graph, cache, bool(prefix))
        try:
            return self._decoders[key](source_ids, num_pieces, cache, seeds, *prefix)
        except tf.errors.NotFoundError:
            # `tf.random.set_seed` frees the SentencePiece resources a traced
            # graph captured (`SubwordTokenizer.ensure_resource`): rebuild them
            # and trace again, once.
            for tokenizer in (self.source_tokenizer, self.target_tokenizer):
                tokenizer.ensure_resource()
            self._decoders[key] = self._compile(graph, cache, bool(prefix))
            return self._decoders[key](source_ids, num_pieces, cache, seeds, *prefix)

    @staticmethod
    def _prefixes(graph, target_prefix, count, num_pieces):
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
        ids, lengths = (tensor.numpy() for tensor in graph.encode_prefix(
            string_tensor(prefixes, "target_prefix")))
        # The search's own limits (`TranslationGraph.search`).
        limits = graph.output_limits(num_pieces).numpy()
        check_prefix_lengths(lengths.tolist(), limits.tolist(), prefixes)
        if not lengths.any():
            return None, None
        return ids, lengths

    @staticmethod
    def _as_bytes(sentences):
        """UTF-8 bytes of each source; a `ValueError` for an item that is not a string."""
        return string_tensor(sentences, "sentences")

    def translate(self, sentences, with_scores=False, target_prefix=None, options=None,
                  **changes):
        """Translate raw source strings.

        Args:
            sentences: iterable of str (or UTF-8 bytes).
            with_scores: bool, also return each hypothesis' score: the search's,
                as the length penalty defines it (α = 0: the sum of the pieces'
                and EOS's log-probabilities; α > 0: that sum divided by GNMT's
                ((5 + |Y|) / 6) ** α). A source with no piece scores 0. A sample's
                score is the model's log-probability of it, whatever the
                temperature and the cuts; and an `eos_bias` is not in any score
                (it only steers the search).
            target_prefix: `None`, or one str per source (`""` or `None`: no
                prefix): the text its translation starts with. The search
                continues after the prefix's target pieces (greedy, beam and
                sampling alike); the output holds the prefix, and its score the
                prefix pieces' log-probabilities too. A prefix needs as many
                pieces of the source's output limit (`max_length_ratio` ×
                (source pieces + 1) + `max_length_offset`).
            options: `DecodeOptions` of this call (default: the translator's).
            **changes: options by name over those (`dataclasses.replace`), e.g.
                `num_hypotheses=3` (the n-best size), `seed=7` (this call's
                sampling seed; default: the options' `seed`, else a fresh one;
                ignored without sampling) or `with_alignments=True` (also return
                each hypothesis' alignment: one `"i-j"` pair per target piece j
                (EOS not counted), i the source piece (0-based, EOS not counted)
                the decoder attended to most when it chose it
                (`TranslationGraph.texts`), as fast_align writes them; pieces are
                the tokenizers'). Options that change the search trace it once
                per distinct value; `batch_size` and `seed` never do. `quantize`
                is the translator's own.

        Returns:
            In input order, one item per source (`""` for a source with no
            subword piece): with one hypothesis and no scores, the translation
            (str); with scores, a `(translation, score)` tuple; with
            `num_hypotheses > 1`, a list of `num_hypotheses` such items, best
            first (for a source with no piece, `""` then `("", -inf)` padding).
            With alignments, each item is a tuple ending with its alignment:
            `(translation, alignment)` or `(translation, score, alignment)`.

        Raises:
            ValueError: an item that is neither str nor bytes, an option out of
                range (`DecodeOptions`: e.g. `num_hypotheses` above the beam), a
                `quantize` other than the translator's, a `target_prefix` list of
                another length than `sentences`, or a prefix longer than its
                source's output limit (naming its index).

        Sources longer than `max_source_length - 1` pieces are cut there:
        their positions are recorded in `truncated_indices` (and
        `truncated_count`), and a warning says how many were cut.
        """
        options = (self.options if options is None and not changes
                   else decode_options(options or self.options, **changes))
        if options.quantize != self.options.quantize:
            raise ValueError("`quantize` is chosen when the Translator is built (its model "
                             f"is quantized then: quantize={self.options.quantize!r}). "
                             f"Received: quantize={options.quantize!r}")
        graph = self._graph(options)
        n_best = options.num_hypotheses
        sentences = list(sentences)
        self.truncated_indices = []
        self.last_seed = None
        if options.sampling is not None:
            seed = options.seed
            self.last_seed = (seed if seed is not None
                              else int(np.random.default_rng().integers(1 << 63)))
        if not sentences:
            return []
        # Each source's sampling seed, from its position in this call (unused without
        # sampling: zeros).
        seeds = (row_seeds(self.last_seed, tf.range(len(sentences))).numpy()
                 if self.last_seed is not None else np.zeros(len(sentences), np.uint32))
        # All sources at once, eagerly (a freed SentencePiece resource is rebuilt).
        source_ids, num_pieces, truncated = (
            tensor.numpy() for tensor in graph.encode(self._as_bytes(sentences)))
        self.truncated_indices = np.flatnonzero(truncated).tolist()
        prefix_ids, prefix_lengths = self._prefixes(graph, target_prefix, len(sentences),
                                                    num_pieces)
        if self.truncated_indices:
            logger.warning("%d of %d sources were longer than %d subword pieces and were cut "
                           "to that length (max_source_length=%d, EOS included)",
                           len(self.truncated_indices), len(sentences),
                           options.max_source_length - 1, options.max_source_length)
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
        for start in range(0, len(order), options.batch_size):
            indices = order[start:start + options.batch_size]
            width = num_pieces[indices].max() + 1
            prefix = ()
            if prefix_ids is not None and prefix_lengths[indices].max() > 0:
                prefix = (prefix_ids[indices, :prefix_lengths[indices].max()],
                          prefix_lengths[indices])
            batch_texts, batch_scores, batch_alignments = self._decode_batch(
                graph, source_ids[indices, :width], num_pieces[indices], cache,
                seeds[indices], prefix)
            for index, row, row_scores, row_alignments in zip(
                    indices, batch_texts.numpy(), batch_scores.numpy(),
                    batch_alignments.numpy()):
                texts[index] = [text.decode("utf-8") for text in row]
                scores[index] = [float(score) for score in row_scores]
                alignments[index] = [text.decode("utf-8") for text in row_alignments]
        columns = [texts] + ([scores] if with_scores else []) + (
            [alignments] if options.with_alignments else [])
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
    """One-call form of :class:`Translator`: raw strings in, translations out
    (`kwargs`: `options` and options by name, as `Translator`).

    Each call builds a new `Translator` (and traces its search again); keep a
    `Translator` to translate many times.
    """
    return Translator(model, source_tokenizer, target_tokenizer, **kwargs).translate(sentences)
