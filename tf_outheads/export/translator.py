"""A trained model as a SavedModel: raw strings in, n-best translations out.

Everything a translation needs runs inside the exported graph, so a server
(TF Serving, or `tf.saved_model.load` in a process that never imports
`tf_outheads`) needs only TensorFlow and the tensorflow-text ops:

    sources (batch,) tf.string
      └─ cut to `max_input_bytes`, invalid UTF-8 → U+FFFD        (CPU)
      └─ SentencePiece tokenize, keep `max_source_length - 1` pieces, + EOS (CPU)
      └─ rows grouped by beam width; per group greedy_search (width 1) or
         beam_search (n = 1, or n = width when a row asks for an n-best list),
         step function model.make_step_fn(head cache)
      └─ SentencePiece detokenize, optional <unk> replacement by attention (CPU)
    translations (batch, n) tf.string, scores (batch, n) float32,
    beam_size (batch,) int32, truncated (batch,) bool, empty_source (batch,) bool

Signatures (both callable through TF Serving's REST and gRPC APIs):

- `serving_default(sources)`: the export's decoding options. One input of
  shape `(None,)`, so REST `{"instances": ["...", ...]}` and server-side
  batching work as they are.
- `translate(sources, beam_size, length_penalty, num_hypotheses,
  replace_unk)`: options per request. Every option is a `(None,)` tensor
  holding one value for the whole request or one value per source (so the
  REST row format `{"instances": [{"sources": ..., "beam_size": ...}]}` and
  server-side batching work), and a negative value (`-1`) means "the
  export's default". The SignatureDef records `[-1]` as each option's
  default, so a gRPC `PredictRequest` may leave options out; TF Serving's
  REST API needs every input named (send `[-1]`). An option value the search
  cannot use (a NaN or infinite `length_penalty`, one above 10, `replace_unk`
  on an export that cannot align) fails the request with an
  `InvalidArgumentError` naming the option, before anything is decoded.

The head's weight-only tensors (`head.inference_cache()`: the joint head's
E' = g_out(E), the continuous head's normalised table) are computed **once,
at export time**, and saved as variables: a serving process answers many
small requests, and recomputing E' (|V|·d_j·d_e multiply-adds) for each would
cost more than decoding a short sentence; the exported model never trains,
so the cache cannot go stale. A call reads them once, before the search.
"""

import json
import os

import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tf_outheads.data.tokenizer import SubwordTokenizer
from tf_outheads.decoding.beam import beam_search
from tf_outheads.decoding.greedy import greedy_search, max_length_from_source
from tf_outheads.decoding.options import (MAX_LENGTH_PENALTY, check_length_limits,
                                          check_length_penalty)
from tf_outheads.decoding.unk import replace_unknown_words
from tf_outheads.validation import positive_int

DEFAULT_BEAM_SIZES = (1, 2, 4, 5, 8)
MAX_SOURCE_LENGTH = 256
MAX_INPUT_BYTES = 1 << 16
OPTION_NAMES = ("beam_size", "length_penalty", "num_hypotheses", "replace_unk")
SIGNATURE_KEYS = ("serving_default", "translate")
CONFIG_PATH = os.path.join("assets.extra", "tf_outheads_export.json")
# What `saved_model_cli` and servers see: input and output names.
SOURCES = "sources"
OUTPUT_NAMES = ("translations", "scores", "beam_size", "truncated", "empty_source")
_CPU = "/cpu:0"


def _tokenizer_copy(tokenizer, name):
    """A fresh `SubwordTokenizer` on the same model whose resource is made on the CPU.

    SentencePiece has CPU kernels only. Its resource is recorded in the
    SavedModel with the device it asks for (`SavedResource.device`, and the
    resource op of the graph TF Serving loads); pinned to the CPU, a GPU
    model server does not try to colocate it with GPU ops
    (tensorflow/serving#2016).
    """
    copy = SubwordTokenizer.from_bytes(tokenizer.model_proto, name=name)
    resource = getattr(getattr(copy, "_tokenizer", None), "_model_resource", None)
    if resource is not None and hasattr(resource, "_resource_device"):
        resource._resource_device = "/device:CPU:0"  # pylint: disable=protected-access
    return copy


class TranslatorModule(tf.Module):
    """A model, its tokenizers and the search as one `tf.Module` with two signatures.

    Save it with `tf.saved_model.save(module, path, signatures=module.signatures())`
    (`export_translator` does that), or call `module.translate(...)` in process.

    Args:
        model: a model with `initial_decoding_state(source_ids, max_length)`,
            `make_step_fn(cache)` and a `head` with `inference_cache()`
            (`zoo.LSTMSeq2Seq`); `source_alignments(source_ids, target_in)`
            for `<unk>` replacement.
        source_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        target_tokenizer: `tf_outheads.data.SubwordTokenizer` (may be the
            same object: a joint model is saved once).
        beam_size: int. Default beam width; 1 decodes greedily. Defaults to 1.
        length_penalty: float, finite, in `[0, 10]`. Default GNMT α of the
            beam search. Defaults to 0.0.
        num_hypotheses: int. Default n-best size (at most the beam width).
            Defaults to 1.
        replace_unk: bool. Default for copying the most-attended source word
            over `<unk>` (`tf_outheads.decoding.replace_unknown_words`).
            Defaults to `False`.
        beam_sizes: tuple of int. The beam widths the graph holds a search
            for (1 is always added, and `beam_size`). A request for another
            width gets the largest of these not above it (the `beam_size`
            output says which). Each width adds one or two searches to the
            graph. Defaults to `(1, 2, 4, 5, 8)`.
        max_source_length: int. Sources keep their first
            `max_source_length - 1` subword pieces, then EOS (as `Translator`);
            the `truncated` output says whether pieces were dropped.
            Defaults to 256.
        max_length_ratio: float > 0. Output limit = ratio × source length +
            offset (source length with EOS, as `Translator`). Defaults to 1.5.
        max_length_offset: int >= 0. Defaults to 10.
        max_input_bytes: int. Raw inputs are cut to this many bytes before
            tokenization (bounds the work one request can ask for; a
            character cut in two becomes U+FFFD). With the defaults the first
            255 pieces of any text shorter than 64 KiB are unaffected.
            Defaults to 65536.
        name: str. Module name. Defaults to `"translator"`.

    Outputs: `translations` `(batch, n)` string, `scores` `(batch, n)`
    float32, `beam_size` `(batch,)` int32 (the width each row was decoded
    with), `truncated` `(batch,)` bool (pieces dropped past
    `max_source_length - 1`) and `empty_source` `(batch,)` bool (the source
    has no subword piece, so nothing was decoded for it).

    Bad input gives defined outputs, never an error: an empty batch gives
    `(0, n)` outputs; a source with no subword piece (empty, whitespace,
    zero-width or control characters only, invalid bytes only; any number of
    them, in any beam-width group) gives the empty translation with score 0
    and `empty_source` set; invalid UTF-8 bytes are replaced by U+FFFD before
    tokenization (which SentencePiece drops); sources longer than
    `max_source_length - 1` pieces are truncated. Columns of an n-best list
    beyond what a row asked for, or beyond the hypotheses the search found,
    are `""` with score `-inf`.

    Options of a request: a negative value means the export's default (and
    so does 0 for `beam_size` and `num_hypotheses`); a `beam_size` the graph
    has no search for gets the largest exported width not above it; a
    `num_hypotheses` above the width is cut to the width; a `replace_unk`
    above 0 means on. Refused, with an `InvalidArgumentError` whose message
    names the option and the values received: an option tensor of the wrong
    length (neither 1 nor the batch size), a NaN or infinite
    `length_penalty` or one above 10, and `replace_unk` > 0 when the model
    cannot align (`replace_unk_available` false in the export's config).

    Raises:
        ValueError: a default option out of range (named, with the value
            received), e.g. a NaN `length_penalty`.

    Example:

    ```python
    module = TranslatorModule(model, source_tokenizer, target_tokenizer, beam_size=4)
    outputs = module.translate(tf.constant(["En el principio creó Dios los cielos."]))
    outputs["translations"][0, 0].numpy().decode()
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, beam_size=1,
                 length_penalty=0.0, num_hypotheses=1, replace_unk=False,
                 beam_sizes=DEFAULT_BEAM_SIZES, max_source_length=MAX_SOURCE_LENGTH,
                 max_length_ratio=1.5, max_length_offset=10, max_input_bytes=MAX_INPUT_BYTES,
                 name="translator"):
        super().__init__(name=name)
        beam_size = positive_int("beam_size", beam_size)
        num_hypotheses = positive_int("num_hypotheses", num_hypotheses)
        if num_hypotheses > beam_size:
            raise ValueError("`num_hypotheses` must be at most `beam_size` "
                             f"({beam_size}). Received: num_hypotheses={num_hypotheses}")
        length_penalty = check_length_penalty(length_penalty)
        widths = [positive_int("beam_sizes", width) for width in beam_sizes]
        max_length_ratio, max_length_offset, max_source_length = check_length_limits(
            max_length_ratio, max_length_offset, max_source_length)
        positive_int("max_input_bytes", max_input_bytes)
        can_align = callable(getattr(model, "source_alignments", None))
        if replace_unk and not can_align:
            raise ValueError(
                "`replace_unk=True` needs a model with `source_alignments(source_ids, "
                f"target_in)`. Received: a {type(model).__name__} without it")
        self.beam_size = beam_size
        self.length_penalty = float(length_penalty)
        self.num_hypotheses = num_hypotheses
        self.replace_unk = bool(replace_unk)
        self.beam_sizes = tuple(sorted(set(widths) | {1, beam_size}))
        self.max_source_length = max_source_length
        self.max_length_ratio = float(max_length_ratio)
        self.max_length_offset = int(max_length_offset)
        self.max_input_bytes = int(max_input_bytes)
        self.can_replace_unk = can_align
        # The model is not tracked as a whole: the SavedModel holds only the
        # variables the signatures read (`track_used_variables`), so a
        # training-only part (a ReWE head) never enters it.
        object.__setattr__(self, "_model", model)
        self.max_step_score = getattr(model.head, "max_step_score", 0.0)

        joint = source_tokenizer is target_tokenizer
        self.source_tokenizer = _tokenizer_copy(
            source_tokenizer, "joint_tokenizer" if joint else "source_tokenizer")
        self.target_tokenizer = (self.source_tokenizer if joint else
                                 _tokenizer_copy(target_tokenizer, "target_tokenizer"))
        # Weight-only head tensors, computed once now (see the module docstring).
        self.head_cache = {
            key: tf.Variable(value, trainable=False, name=f"head_cache_{key}")
            for key, value in model.head.inference_cache().items()
        }

        sources = tf.TensorSpec([None], tf.string, name=SOURCES)
        default_int = tf.constant([-1], tf.int32)
        default_float = tf.constant([-1.0], tf.float32)

        def translate(sources, beam_size=default_int, length_penalty=default_float,
                      num_hypotheses=default_int, replace_unk=default_int):
            return self._translate(sources, beam_size, length_penalty, num_hypotheses,
                                   replace_unk)

        def serve(sources):
            # The same concrete function as `translate`: traced and saved once.
            return self.translate(sources, default_int, default_float, default_int,
                                  default_int)

        self.translate = tf.function(translate, input_signature=[
            sources,
            tf.TensorSpec([None], tf.int32, name="beam_size"),
            tf.TensorSpec([None], tf.float32, name="length_penalty"),
            tf.TensorSpec([None], tf.int32, name="num_hypotheses"),
            tf.TensorSpec([None], tf.int32, name="replace_unk"),
        ])
        self.serve = tf.function(serve, input_signature=[sources])

    def signatures(self):
        """`{"serving_default": ..., "translate": ...}` for `tf.saved_model.save`."""
        return {"serving_default": self.serve, "translate": self.translate}

    def track_used_variables(self):
        """Trace both signatures and track exactly the variables they read."""
        used = {}
        for function in (self.translate, self.serve):
            for variable in function.get_concrete_function().variables:
                used.setdefault(id(variable), variable)
        self.used_variables = list(used.values())
        return self.used_variables

    def config(self):
        """The export's options, as written to `assets.extra/tf_outheads_export.json`."""
        return {
            "signatures": {
                "serving_default": {"inputs": [SOURCES], "outputs": list(OUTPUT_NAMES)},
                "translate": {"inputs": [SOURCES, *OPTION_NAMES], "outputs": list(OUTPUT_NAMES)},
            },
            "defaults": {"beam_size": self.beam_size, "length_penalty": self.length_penalty,
                         "num_hypotheses": self.num_hypotheses,
                         "replace_unk": self.replace_unk},
            "beam_sizes": list(self.beam_sizes),
            "replace_unk_available": self.can_replace_unk,
            "max_source_length": self.max_source_length,
            "max_length_ratio": self.max_length_ratio,
            "max_length_offset": self.max_length_offset,
            "max_input_bytes": self.max_input_bytes,
            "max_length_penalty": MAX_LENGTH_PENALTY,
            "head_cache": sorted(self.head_cache),
        }

    # -- graph ----------------------------------------------------------------
    @staticmethod
    def _check_options(batch_size, options, replace_unk_available):
        """Asserts refusing the option values a request cannot use (see the class docstring).

        Each raises `InvalidArgumentError` with a message naming the option
        and showing the values received.
        """
        checks = []
        for name, value in options.items():
            size = tf.size(value)
            checks.append(tf.debugging.Assert(
                tf.logical_or(tf.equal(size, 1), tf.equal(size, batch_size)),
                [f"`{name}` must hold one value, or one per source. Received: {name} of "
                 "length", size, "for a batch of", batch_size], name=f"check_{name}_length"))
        length_penalty = options["length_penalty"]
        checks.append(tf.debugging.Assert(
            tf.reduce_all(tf.logical_and(tf.math.is_finite(length_penalty),
                                         length_penalty <= MAX_LENGTH_PENALTY)),
            [f"`length_penalty` must be finite and in [0, {MAX_LENGTH_PENALTY:g}], or "
             "negative (-1) for the export default. Received: length_penalty=",
             length_penalty], summarize=16, name="check_length_penalty"))
        if not replace_unk_available:
            replace_unk = options["replace_unk"]
            checks.append(tf.debugging.Assert(
                tf.reduce_all(replace_unk <= 0),
                ["`replace_unk` is not available in this export (its model has no "
                 "source_alignments): send 0 or -1. Received: replace_unk=", replace_unk],
                summarize=16, name="check_replace_unk"))
        return checks

    def _option(self, value, default, batch_size, is_default):
        """One value per row: broadcast a single value, negative → the default."""
        value = tf.broadcast_to(value, [batch_size])
        return tf.where(is_default(value), tf.cast(default, value.dtype), value)

    def _encode(self, sources):
        """Raw strings → source ids `(B, S)` with EOS, piece counts, truncation flags."""
        with tf.device(_CPU):
            text = tf.strings.substr(sources, 0, self.max_input_bytes)
            text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                                replacement_char=0xFFFD,
                                                replace_control_characters=False)
            pieces = self.source_tokenizer.tokenize(text)  # ragged (B, None)
            limit = self.max_source_length - 1
            truncated = pieces.row_lengths() > limit
            pieces = pieces[:, :limit]
            eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(sources)[0], 1], EOS_ID))
            source_ids = tf.concat([tf.cast(pieces, tf.int32), eos], axis=1).to_tensor(PAD_ID)
            num_pieces = tf.cast(pieces.row_lengths(), tf.int32)
        return source_ids, num_pieces, truncated

    def _search(self, width, source_ids, max_length, length_penalty, n_best, cache):
        """Hypotheses of rows decoded with one beam width: ids `(b, n, T)`, scores `(b, n)`."""
        model = self._model
        step_fn = model.make_step_fn(cache)
        # The searches' loop bound (the largest per-row limit) sizes per-step caches.
        state = model.initial_decoding_state(source_ids, max_length=tf.reduce_max(max_length))
        batch_size = tf.shape(source_ids)[0]
        if width == 1:
            # Greedy, exactly as `Translator(beam_size=1)`.
            result = greedy_search(step_fn, state, batch_size, max_length)
            return result.ids[:, tf.newaxis], result.scores[:, tf.newaxis]

        def search(num_hypotheses):
            # Length penalty per row: (b, 1) broadcasts against beam_search's
            # (b, 2k) candidate scores and (b, max_steps) stopping bound.
            result = beam_search(step_fn, state, batch_size, width, max_length,
                                 length_penalty=length_penalty[:, tf.newaxis],
                                 num_hypotheses=num_hypotheses,
                                 max_step_score=self.max_step_score)
            return result.ids, result.scores

        # n = 1 is `Translator(beam_size=width)`'s search; an n-best list needs
        # the pool's whole top `width` (the stopping rule waits for it).
        return tf.cond(tf.reduce_any(n_best > 1), lambda: search(width), lambda: search(1))

    def _texts(self, ids, source_ids, replace):
        """Hypotheses `(b, n, T)` → strings `(b, n)`, <unk> replaced where `replace` (b,)."""
        shape = tf.shape(ids)
        # Explicit sizes: `-1` cannot be inferred when T is 0 (nothing decoded).
        flat_ids = tf.reshape(ids, [shape[0] * shape[1], shape[2]])  # (b·n, T)
        with tf.device(_CPU):
            plain = self.target_tokenizer.detokenize(flat_ids)
        if self.can_replace_unk:
            flat_replace = tf.repeat(replace, shape[1])
            wanted = flat_replace & tf.reduce_any(tf.equal(flat_ids, UNK_ID), axis=1)

            def replaced():
                sources = tf.repeat(source_ids, shape[1], axis=0)
                target_in = tf.concat(
                    [tf.fill([tf.shape(flat_ids)[0], 1], BOS_ID), flat_ids[:, :-1]], axis=1)
                alignments = self._model.source_alignments(sources, target_in)
                texts = replace_unknown_words(flat_ids, sources, alignments,
                                              self.source_tokenizer, self.target_tokenizer)
                return tf.where(flat_replace, texts, plain)

            # Only batches with an <unk> to replace pay for the alignment pass.
            plain = tf.cond(tf.reduce_any(wanted), replaced, lambda: plain)
        return tf.reshape(plain, shape[:2])

    def _group(self, width, rows, source_ids, num_pieces, length_penalty, n_best, replace,
               n_out, cache):
        """Translate the rows decoded with one width; outputs padded to `n_out` columns."""
        source_ids = tf.gather(source_ids, rows)
        num_pieces = tf.gather(num_pieces, rows)
        # Drop padding columns no row of this group needs.
        source_ids = source_ids[:, :tf.reduce_max(num_pieces) + 1]
        # Output limit from the source length with EOS (as `Translator`); a
        # source without pieces decodes nothing: "" with score 0.
        max_length = max_length_from_source(num_pieces + 1, ratio=self.max_length_ratio,
                                            offset=self.max_length_offset)
        max_length = tf.where(num_pieces > 0, max_length, 0)
        n_best = tf.gather(n_best, rows)
        ids, scores = self._search(width, source_ids, max_length,
                                   tf.gather(length_penalty, rows), n_best, cache)
        texts = self._texts(ids, source_ids, tf.gather(replace, rows))
        # Columns: the row's own n-best size, padded to the request's widest.
        texts, scores = texts[:, :n_out], scores[:, :n_out]
        missing = n_out - tf.shape(texts)[1]
        group_size = tf.shape(texts)[0]
        texts = tf.concat([texts, tf.fill([group_size, missing], "")], axis=1)
        scores = tf.concat([scores, tf.fill([group_size, missing], float("-inf"))], axis=1)
        wanted = tf.range(n_out)[tf.newaxis, :] < n_best[:, tf.newaxis]
        return tf.where(wanted, texts, ""), tf.where(wanted, scores, float("-inf"))

    def _translate(self, sources, beam_size, length_penalty, num_hypotheses, replace_unk):
        options = {"beam_size": beam_size, "length_penalty": length_penalty,
                   "num_hypotheses": num_hypotheses, "replace_unk": replace_unk}
        checks = self._check_options(tf.size(sources), options, self.can_replace_unk)
        # Refused options fail the request before anything is tokenized or decoded.
        with tf.control_dependencies(checks):
            sources = tf.identity(sources)
        batch_size = tf.shape(sources)[0]
        # Per-row options; negative (or, for sizes, 0) → the export's default.
        beam_size = self._option(beam_size, self.beam_size, batch_size, lambda v: v < 1)
        length_penalty = self._option(length_penalty, self.length_penalty, batch_size,
                                      lambda v: v < 0)
        num_hypotheses = self._option(num_hypotheses, self.num_hypotheses, batch_size,
                                      lambda v: v < 1)
        replace = self._option(replace_unk, int(self.replace_unk), batch_size,
                               lambda v: v < 0) > 0
        # Each row gets the largest width the graph holds that is not above its request.
        widths = tf.constant(self.beam_sizes, tf.int32)
        position = tf.reduce_sum(
            tf.cast(widths[tf.newaxis, :] <= beam_size[:, tf.newaxis], tf.int32), axis=1) - 1
        beam_size = tf.gather(widths, position)
        n_best = tf.clip_by_value(num_hypotheses, 1, beam_size)
        n_out = tf.reduce_max(tf.concat([n_best, [1]], axis=0))

        source_ids, num_pieces, truncated = self._encode(sources)
        # The head's weight-only tensors, read once per call, never per step.
        cache = {key: tf.convert_to_tensor(value) for key, value in self.head_cache.items()}
        indices, texts, scores = [], [], []
        for width in self.beam_sizes:
            rows = tf.cast(tf.where(tf.equal(beam_size, width))[:, 0], tf.int32)
            group_texts, group_scores = tf.cond(
                tf.size(rows) > 0,
                lambda width=width, rows=rows: self._group(
                    width, rows, source_ids, num_pieces, length_penalty, n_best, replace,
                    n_out, cache),
                lambda: (tf.fill([0, n_out], ""), tf.zeros([0, n_out], tf.float32)))
            indices.append(rows)
            texts.append(group_texts)
            scores.append(group_scores)
        return {
            "translations": tf.dynamic_stitch(indices, texts),  # (B, n)
            "scores": tf.dynamic_stitch(indices, scores),  # (B, n)
            "beam_size": beam_size,  # (B,) the width each row was decoded with
            "truncated": truncated,  # (B,) pieces dropped past max_source_length
            "empty_source": tf.equal(num_pieces, 0),  # (B,) no piece: nothing decoded
        }


def export_translator(model, source_tokenizer, target_tokenizer, path, beam_size=1,
                      length_penalty=0.0, num_hypotheses=1, replace_unk=False,
                      beam_sizes=DEFAULT_BEAM_SIZES, max_source_length=MAX_SOURCE_LENGTH,
                      max_length_ratio=1.5, max_length_offset=10,
                      max_input_bytes=MAX_INPUT_BYTES):
    """Write a SavedModel that translates raw strings (see `TranslatorModule`).

    Signatures `serving_default(sources)` and `translate(sources, beam_size,
    length_penalty, num_hypotheses, replace_unk)`; outputs `translations`
    `(batch, n)` string, `scores` `(batch, n)` float32 (greedy: the sum of
    log-scores; beam: the GNMT-normalised score), `beam_size` `(batch,)`
    int32, `truncated` `(batch,)` bool and `empty_source` `(batch,)` bool
    (the source has no subword piece: `""` with score 0). The export's
    options are also written to `path/assets.extra/tf_outheads_export.json`.

    The SavedModel loads with `tf.saved_model.load` after `import
    tensorflow_text` (its SentencePiece ops), without `tf_outheads`, and
    serves under TF Serving (`serving/README.md`). The model's `.keras` file
    is not touched.

    Args:
        model, source_tokenizer, target_tokenizer: as `Translator`.
        path: str or path-like. Directory to write (for TF Serving, a
            numbered version directory: `models/translator/1`).
        beam_size, length_penalty, num_hypotheses, replace_unk, beam_sizes,
        max_source_length, max_length_ratio, max_length_offset,
        max_input_bytes: see `TranslatorModule`.

    Returns:
        str, `path`.

    Raises:
        ValueError: an option out of range, named with the value received
            (as `TranslatorModule`), before anything is written.

    Example:

    ```python
    from tf_outheads.export import export_translator
    export_translator(model, source_tokenizer, target_tokenizer, "exports/translator/1",
                      beam_size=5, length_penalty=0.6)
    ```
    """
    module = TranslatorModule(
        model, source_tokenizer, target_tokenizer, beam_size=beam_size,
        length_penalty=length_penalty, num_hypotheses=num_hypotheses, replace_unk=replace_unk,
        beam_sizes=beam_sizes, max_source_length=max_source_length,
        max_length_ratio=max_length_ratio, max_length_offset=max_length_offset,
        max_input_bytes=max_input_bytes)
    module.track_used_variables()
    path = os.fspath(path)
    tf.saved_model.save(module, path, signatures=module.signatures())
    config_path = os.path.join(path, CONFIG_PATH)
    os.makedirs(os.path.dirname(config_path), exist_ok=True)
    with open(config_path, "w", encoding="utf-8") as stream:
        json.dump(module.config(), stream, indent=2)
    return path


def export_options(decode_config):
    """`export_translator` keywords from a preset's `decode` section (others ignored)."""
    names = ("beam_size", "length_penalty", "replace_unk", "max_length_ratio",
             "max_length_offset", "max_source_length")
    return {name: decode_config[name] for name in names if name in decode_config}


__all__ = ["TranslatorModule", "export_options", "export_translator"]
