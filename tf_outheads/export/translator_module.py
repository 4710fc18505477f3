"""A trained model as a SavedModel: raw strings in, n-best translations out.

Everything a translation needs runs inside the exported graph, so a server
(TF Serving, or `tf.saved_model.load` in a process that never imports
`tf_outheads`) needs only TensorFlow and the tensorflow-text ops. The graph is
`tf_outheads.decoding.graph.TranslationGraph`, the same code `Translator`
runs; this module adds what only a SavedModel needs (tokenizer copies pinned
to the CPU, the head cache as variables, the signatures, the config file):

    sources (batch,) tf.string
      └─ refused above `max_request_sources` sources                (InvalidArgumentError)
      └─ cut to `max_input_bytes`, invalid UTF-8 → U+FFFD        (CPU)
      └─ SentencePiece tokenize, keep `max_source_length - 1` pieces, + EOS (CPU)
      └─ refused above `max_request_pieces` pieces in all           (InvalidArgumentError)
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
  replace_unk, sampling_topk, sampling_topp, sampling_temperature, seed,
  with_alignments, eos_bias, block_repeats, target_prefix)`:
  options per request: one input for every `DecodeOptions` field that has a
  `RequestInput` (`tf_outheads.decoding.options`), in field order, so an option
  added there is an input here. Every option is a `(None,)` tensor
  holding one value for the whole request or one value per source (so the
  REST row format `{"instances": [{"sources": ..., "beam_size": ...}]}` and
  server-side batching work), and a negative value (`-1`) means "the
  export's default" (NaN for `eos_bias`). The SignatureDef records `[-1]`
  (`[NaN]`) as each option's default, so a gRPC `PredictRequest` may leave
  options out; TF Serving's REST API needs every input named (send `[-1]`).
  An option value the search cannot use (a NaN or infinite `length_penalty`,
  one above 10, `replace_unk` on an export that cannot align) fails the
  request with an `InvalidArgumentError` naming the option, before anything
  is decoded.
  Sampling (`tf_outheads.decoding.sampling`): a row with any of
  `sampling_topk` (>= 0; 0: the whole vocabulary), `sampling_topp` (in
  (0, 1]) or `sampling_temperature` (> 0) set draws its pieces at random,
  with width 1 (a `beam_size` > 1 sent with them is refused); `seed` >= 0 makes
  the request reproducible (the source at position i draws with
  `row_seeds(seed, i)`: the sample `Translator(seed=seed)` draws for it), a
  negative one draws a seed per request. `-1` leaves each unset; other values
  out of range are refused as above, and so is sampling with a head whose
  scores are not log-probabilities (`sampling_available` in the config).
  `eos_bias` (`tf_outheads.decoding.constraints`, float): added to EOS's
  score at every step, in the head's score unit (< 0: longer outputs); NaN
  means not set (a negative bias is a real value), an infinite one or one
  above 100 in size is refused; the scores returned stay the model's.
  `block_repeats` (int): no piece right after itself; -1 not set, 0 off,
  > 0 on.

- `score(sources, targets)`: forced decoding (`tf_outheads.decoding.Scorer`
  in the graph): the score the model gives `targets[i]` as the translation of
  `sources[i]`. Outputs `log_prob` `(batch,)` (the sum over the target's
  pieces and EOS), `tokens` `(batch,)` int32 (their number), `token_log_probs`
  `(batch, T)` float32 and `pieces` `(batch, T)` string per piece (`0` and
  `""` past a row's tokens), `truncated` `(batch,)` bool (a side cut to
  `max_source_length - 1` pieces). Log-probabilities for every categorical
  head and a continuous head's posterior (`scores_are_log_probabilities` in
  the config says which); `eos_bias` and `block_repeats` do not enter (they
  steer the search, not the model's scores). Refused: sources and targets of
  different lengths, and requests over the limits (pieces of both sides
  counted).

The head's weight-only tensors (`head.inference_cache()`: the joint head's
E' = g_out(E), the continuous head's normalised table) are computed **once,
at export time**, and saved as variables: a serving process answers many
small requests, and recomputing E' (|V|·d_j·d_e multiply-adds) for each would
cost more than decoding a short sentence; the exported model never trains,
so the cache cannot go stale. A call reads them once, before the search.

A request is decoded as one batch, so its memory grows with its size: the
graph refuses a request of more than `max_request_sources` sources (default
256), or whose sources hold more than `max_request_pieces` subword pieces in
all (default 16,384), with an `InvalidArgumentError` starting `Request too
large:` (the limit, the count, how to split), before anything is decoded.
Each source is already bounded (`max_input_bytes`, `max_source_length`, the
output limit), so these bound the whole request (its memory is measured in
`serving/README.md`). 256 sources: eight of the batches of 32 TF Serving
forms (`serving/batching_parameters.txt`), a page or two of a document; more
go in several requests (`serving/rest_client.py` splits them). 16,384
pieces: all 256 sources at 64 pieces each (more than twice an average
sentence) or 64 sources at the longest a source may be (255 pieces).
"""

import functools
import inspect
import json
import os

import tensorflow as tf

from tf_outheads.data.subword_tokenizer import SubwordTokenizer
from tf_outheads.decoding.graph import TranslationGraph
from tf_outheads.decoding.options import MAX_LENGTH_PENALTY, DecodeOptions, decode_options
from tf_outheads.decoding.scoring import Scorer
from tf_outheads.export.atomic import check_export_directory, replace_directory
from tf_outheads.models.seq2seq import inference_model
from tf_outheads.validation import positive_int

DEFAULT_BEAM_SIZES = (1, 2, 4, 5, 8)
MAX_SOURCE_LENGTH = 256
MAX_INPUT_BYTES = 1 << 16
MAX_REQUEST_SOURCES = 256
MAX_REQUEST_PIECES = 16_384
SIGNATURE_KEYS = ("serving_default", "translate", "score")
CONFIG_PATH = os.path.join("assets.extra", "tf_outheads_export.json")
# What `saved_model_cli` and servers see: input and output names.
SOURCES = "sources"
OUTPUT_NAMES = ("translations", "scores", "alignments", "beam_size", "truncated",
                "empty_source")
TARGETS = "targets"
TARGET_PREFIX = "target_prefix"
SCORE_OUTPUT_NAMES = ("log_prob", "tokens", "token_log_probs", "pieces", "truncated")


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
    """A model, its tokenizers and the search as one `tf.Module` with its signatures
    (`signatures()`: `serving_default`, `translate`, `score`).

    Save it with `tf.saved_model.save(module, path, signatures=module.signatures())`
    (`export_translator` does that), or call `module.translate(...)` in process.

    Args:
        model: a model with `initial_decoding_state(source_ids, max_length)`,
            `make_step_fn(cache)` and a `head` with `inference_cache()`
            (a `tf_outheads.models.Seq2SeqModel`); `source_alignments(source_ids, target_in)`
            for `<unk>` replacement.
        source_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        target_tokenizer: `tf_outheads.data.SubwordTokenizer` (may be the
            same object: a joint model is saved once).
        options: `tf_outheads.decoding.options.DecodeOptions`, the defaults of a
            request (`serving_default`'s options): beam size, length penalty,
            n-best size, `<unk>` replacement, sampling, seed, alignments, EOS bias,
            repeat blocking, the length limits (`max_source_length`: sources keep
            their first `max_source_length - 1` subword pieces, then EOS, as
            `Translator`; the `truncated` output says whether pieces were
            dropped) and `quantize` (the module translates and scores with a
            quantized copy of `model`, `tf_outheads.models.quantized_copy`, whose
            int8 weights the SavedModel then holds). `batch_size` is not used: a
            request is decoded as one batch. `None`: the defaults.
        beam_sizes: tuple of int. The beam widths the graph holds a search
            for (1 is always added, and `beam_size`). A request for another
            width gets the largest of these not above it (the `beam_size`
            output says which). Each width adds one or two searches to the
            graph. Defaults to `(1, 2, 4, 5, 8)`.
        max_input_bytes: int. Raw inputs are cut to this many bytes before
            tokenization (bounds the work one request can ask for; a
            character cut in two becomes U+FFFD). With the defaults the first
            255 pieces of any text shorter than 64 KiB are unaffected.
            Defaults to 65536.
        max_request_sources: int. A request of more sources is refused
            (`InvalidArgumentError` naming the limit and the count) before it
            is tokenized. Defaults to 256.
        max_request_pieces: int. A request whose sources hold more subword
            pieces in all (each counted after its cut to `max_source_length
            - 1`) is refused before it is decoded. Defaults to 16384.
        name: str. Module name. Defaults to `"translator"`.
        shortlist: `None`, a `tf_outheads.decoding.selection.Shortlist` (its tables
            constants of the graph) or a `tf_outheads.decoding.NeuralSelection`: every
            request decodes over its batch's candidates (vocabulary selection).
            Defaults to `None`.
        **changes: options by name (`DecodeOptions` fields) over `options`,
            checked once with them.

    Outputs: `translations` `(batch, n)` string, `scores` `(batch, n)`
    float32, `alignments` `(batch, n)` string (with `with_alignments` > 0: one
    `"i-j"` pair per target piece, i the most-attended source piece, as
    fast_align writes them; `""` otherwise), `beam_size` `(batch,)` int32 (the
    width each row was decoded with), `truncated` `(batch,)` bool (pieces dropped past
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
    cannot align (`replace_unk_available` false in the export's config);
    sampling options out of range (`sampling_topk` < -1, `sampling_topp`
    outside (0, 1], `sampling_temperature` ≤ 0 or not finite, each but -1),
    sampling with an explicit `beam_size` > 1, or with a head that cannot
    sample (`sampling_available`); an infinite `eos_bias` or one above 100 in
    size (NaN means "not set"). A request too large (`max_request_sources`,
    `max_request_pieces`) is refused the same way, its message starting
    `Request too large:`.

    Raises:
        ValueError: a default option out of range (named, with the value
            received), e.g. a NaN `length_penalty`.
        TypeError: a change that names no option.

    Example:

    ```python
    module = TranslatorModule(model, source_tokenizer, target_tokenizer,
                              options=DecodeOptions(beam_size=4))
    outputs = module.translate(tf.constant(["En el principio creó Dios los cielos."]))
    outputs["translations"][0, 0].numpy().decode()
    ```
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, options=None,
                 beam_sizes=DEFAULT_BEAM_SIZES, max_input_bytes=MAX_INPUT_BYTES,
                 max_request_sources=MAX_REQUEST_SOURCES,
                 max_request_pieces=MAX_REQUEST_PIECES, name="translator", shortlist=None,
                 **changes):
        super().__init__(name=name)
        options = decode_options(options, **changes)
        # int8: the quantized copy's weights (int8 Dense kernels, the head's int8 cache)
        # are what the signatures read, so they are what the SavedModel holds.
        model = inference_model(model, options.quantize)
        widths = [positive_int("beam_sizes", width) for width in beam_sizes]
        positive_int("max_input_bytes", max_input_bytes)
        positive_int("max_request_sources", max_request_sources)
        positive_int("max_request_pieces", max_request_pieces)
        joint = source_tokenizer is target_tokenizer
        source_copy = _tokenizer_copy(
            source_tokenizer, "joint_tokenizer" if joint else "source_tokenizer")
        target_copy = source_copy if joint else _tokenizer_copy(target_tokenizer,
                                                                "target_tokenizer")
        # The translation itself; the rest of this class is what a SavedModel needs.
        # Not tracked (a plain object): the SavedModel holds only the variables
        # the signatures read (`track_used_variables`), so a training-only part
        # of the model (a ReWE head) never enters it.
        graph = TranslationGraph(
            model, source_copy, target_copy, options, beam_sizes=[1, *widths],
            max_input_bytes=max_input_bytes, max_request_sources=max_request_sources,
            max_request_pieces=max_request_pieces, shortlist=shortlist)
        object.__setattr__(self, "_graph", graph)
        # Forced decoding of given translations (the `score` signature), read as the
        # search reads a source (the same cuts).
        object.__setattr__(self, "_scorer", Scorer(
            model, source_copy, target_copy, max_source_length=options.max_source_length,
            max_target_length=options.max_source_length, max_input_bytes=max_input_bytes))
        object.__setattr__(self, "options", options)
        self.beam_sizes = graph.beam_sizes
        self.max_input_bytes = graph.max_input_bytes
        self.max_request_sources = graph.max_request_sources
        self.max_request_pieces = graph.max_request_pieces
        self.can_replace_unk = graph.can_replace_unk
        self.can_sample = graph.can_sample
        # Tracked: the SentencePiece resources the graph reads.
        self.source_tokenizer = source_copy
        self.target_tokenizer = target_copy
        # Weight-only head tensors, computed once now (see the module docstring).
        self.head_cache = {
            key: tf.Variable(value, trainable=False, name=f"head_cache_{key}")
            for key, value in model.head.inference_cache().items()
        }

        sources = tf.TensorSpec([None], tf.string, name=SOURCES)
        self.translate = tf.function(self._translate_function(), autograph=False,
                                     input_signature=self.translate_inputs())

        def serve(sources):
            # The same concrete function as `translate`, its options not set: traced
            # and saved once.
            return self.translate(sources)

        # No AutoGraph: the graph's code uses tf.while_loop / tf.cond itself, and
        # converting the searches and the model's step costs seconds per trace.
        self.serve = tf.function(serve, input_signature=[sources], autograph=False)

        def score(sources, targets):
            graph = self._graph
            checks = graph.check_request_sources(tf.size(sources)) + [tf.debugging.Assert(
                tf.equal(tf.size(sources), tf.size(targets)),
                [tf.strings.format("`targets` must hold one translation per source. "
                                   "Received: {} sources and {} targets",
                                   (tf.size(sources), tf.size(targets)))],
                name="check_targets_length")]
            with tf.control_dependencies(checks):
                sources = tf.identity(sources)
            cache = {key: tf.convert_to_tensor(value) for key, value in self.head_cache.items()}
            # A request too large (pieces of both sides) fails before the pass.
            return self._scorer.score_graph(sources, targets, cache, checks=functools.partial(
                graph.check_request_pieces, texts="its pairs", each="each side",
                verb="scores"))

        self.score = tf.function(score, autograph=False, input_signature=[
            sources, tf.TensorSpec([None], tf.string, name=TARGETS)])

    def translate_inputs(self):
        """The `translate` signature's inputs: `sources`, one `(None,)` input per
        option of `DecodeOptions.request_inputs()` (in field order) and
        `target_prefix`."""
        return [tf.TensorSpec([None], tf.string, name=SOURCES),
                *(tf.TensorSpec([None], request.dtype, name=name)
                  for name, request in self.options.request_inputs()),
                tf.TensorSpec([None], tf.string, name=TARGET_PREFIX)]

    def _translate_function(self):
        """The Python function of the `translate` signature: its parameters are the
        inputs (`translate_inputs`), each option's default `[not_set]` (which the
        SignatureDef records), `target_prefix`'s `[""]`."""
        parameter = functools.partial(inspect.Parameter,
                                      kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        signature = inspect.Signature([
            parameter(SOURCES),
            *(parameter(name, default=tf.constant([request.not_set], request.dtype))
              for name, request in self.options.request_inputs()),
            parameter(TARGET_PREFIX, default=tf.constant([""], tf.string))])

        def translate(*args, **kwargs):
            inputs = signature.bind(*args, **kwargs)
            inputs.apply_defaults()
            options = dict(inputs.arguments)
            sources, target_prefix = options.pop(SOURCES), options.pop(TARGET_PREFIX)
            # The head's weight-only tensors, read once per call, never per step.
            cache = {key: tf.convert_to_tensor(value) for key, value in self.head_cache.items()}
            return self._graph.translate(sources, cache, options, target_prefix)

        translate.__signature__ = signature
        return translate

    def signatures(self):
        """`{"serving_default": ..., "translate": ..., "score": ...}` for
        `tf.saved_model.save`."""
        return {"serving_default": self.serve, "translate": self.translate,
                "score": self.score}

    def _trackable_children(self, save_type="checkpoint", **kwargs):
        # Saving lists this module's children inside its save context, after it has
        # traced the signatures there: the variables are found then, from those traces.
        # (Traced before `tf.saved_model.save`, every function was traced a second time
        # during it: the save context's variable policy is part of the function cache's
        # key. That doubled the time of an export.)
        if save_type == "savedmodel":
            self.track_used_variables()
        return super()._trackable_children(save_type, **kwargs)

    def track_used_variables(self):
        """Trace the signatures and track exactly the variables they read (saving calls
        it)."""
        used = {}
        for function in (self.translate, self.serve, self.score):
            for variable in function.get_concrete_function().variables:
                used.setdefault(id(variable), variable)
        self.used_variables = list(used.values())
        return self.used_variables

    def config(self):
        """The export's options, as written to `assets.extra/tf_outheads_export.json`:
        `defaults` holds those a request may set, the others (fixed at export) are
        top-level keys."""
        names = [name for name, _ in self.options.request_inputs()]
        fixed = [name for name in self.options.exported_names() if name not in names]
        return {
            "signatures": {
                "serving_default": {"inputs": [SOURCES], "outputs": list(OUTPUT_NAMES)},
                "translate": {"inputs": [SOURCES, *names, TARGET_PREFIX],
                              "outputs": list(OUTPUT_NAMES)},
                "score": {"inputs": [SOURCES, TARGETS], "outputs": list(SCORE_OUTPUT_NAMES)},
            },
            "scores_are_log_probabilities": self._scorer.log_probabilities,
            "defaults": {name: getattr(self.options, name) for name in names},
            "beam_sizes": list(self.beam_sizes),
            "replace_unk_available": self.can_replace_unk,
            "sampling_available": self.can_sample,
            **{name: getattr(self.options, name) for name in fixed},
            "max_input_bytes": self.max_input_bytes,
            "max_request_sources": self.max_request_sources,
            "max_request_pieces": self.max_request_pieces,
            "max_length_penalty": MAX_LENGTH_PENALTY,
            "head_cache": sorted(self.head_cache),
            # Vocabulary selection (`tf_outheads.decoding.selection`): its sizes, or None.
            "shortlist": (None if self._graph.shortlist is None
                          else self._graph.shortlist.describe()),
        }


def export_translator(model, source_tokenizer, target_tokenizer, path, options=None,
                      beam_sizes=DEFAULT_BEAM_SIZES, max_input_bytes=MAX_INPUT_BYTES,
                      max_request_sources=MAX_REQUEST_SOURCES,
                      max_request_pieces=MAX_REQUEST_PIECES, shortlist=None, **changes):
    """Write a SavedModel that translates raw strings (see `TranslatorModule`).

    Signatures `serving_default(sources)` and `translate(sources, beam_size,
    length_penalty, num_hypotheses, replace_unk, sampling_topk, sampling_topp,
    sampling_temperature, seed, with_alignments, eos_bias, block_repeats,
    target_prefix)`; outputs `translations`
    `(batch, n)` string, `scores` `(batch, n)` float32 (greedy: the sum of
    log-scores; beam: the GNMT-normalised score), `beam_size` `(batch,)`
    int32, `truncated` `(batch,)` bool and `empty_source` `(batch,)` bool
    (the source has no subword piece: `""` with score 0). The export's
    options are also written to `path/assets.extra/tf_outheads_export.json`.

    The SavedModel loads with `tf.saved_model.load` after `import
    tensorflow_text` (its SentencePiece ops), without `tf_outheads`, and
    serves under TF Serving (`serving/README.md`). The model's `.keras` file
    is not touched.

    `path` is never partly written (`tf_outheads.export.atomic`): the export
    is written whole into a hidden sibling (`.1.tmp-<pid>-<hex>`), then renamed
    into place; an older export at `path` is replaced as a whole (files it
    holds go with it) and stays complete until then, whatever stops the
    process. A killed export's hidden sibling is removed by the next export to
    the same `path`.

    Args:
        model, source_tokenizer, target_tokenizer: as `Translator`.
        path: str or path-like. Directory to write (for TF Serving, a
            numbered version directory: `models/translator/1`): absent, empty,
            or an older export, which is replaced.
        options: `tf_outheads.decoding.options.DecodeOptions`: the defaults of the
            `translate` signature's options and of `serving_default`, the length
            limits and `quantize` (`"int8"`: export a quantized copy of the model,
            int8 Dense kernels and output layer in the SavedModel; `model` is left
            float). `None`: the defaults.
        beam_sizes, max_input_bytes, max_request_sources, max_request_pieces,
            shortlist: see `TranslatorModule`.
        **changes: options by name over `options` (`export_translator(...,
            beam_size=5)`), checked once with them.

    Returns:
        str, `path`.

    Raises:
        ValueError: an option out of range, named with the value received
            (as `TranslatorModule`), before anything is written.
        TypeError: a change that names no option.
        FileExistsError: `path` is not a directory, or a non-empty directory
            that is not an export (no `saved_model.pb`), or an export holding
            files an export does not write: it would not be overwritten
            (refused before anything is written).

    Example:

    ```python
    from tf_outheads.export import export_translator
    export_translator(model, source_tokenizer, target_tokenizer, "exports/translator/1",
                      beam_size=5, length_penalty=0.6)
    ```
    """
    path = os.fspath(path)
    check_export_directory(path)  # before the module's seconds of work
    module = TranslatorModule(
        model, source_tokenizer, target_tokenizer, options, beam_sizes=beam_sizes,
        max_input_bytes=max_input_bytes, max_request_sources=max_request_sources,
        max_request_pieces=max_request_pieces, shortlist=shortlist, **changes)

    def write(directory):
        tf.saved_model.save(module, directory, signatures=module.signatures())
        write_config(directory, module.config())

    return replace_directory(path, write)


def write_config(directory, config):
    """`config` as `directory/assets.extra/tf_outheads_export.json`."""
    config_path = os.path.join(directory, CONFIG_PATH)
    os.makedirs(os.path.dirname(config_path), exist_ok=True)
    with open(config_path, "w", encoding="utf-8") as stream:
        json.dump(config, stream, indent=2)


def export_options(decode_config):
    """`export_translator` keywords from a preset's `decode` section: its decoding
    options that an export uses (`DecodeOptions.exported_names()`; others ignored)."""
    return {name: decode_config[name] for name in DecodeOptions.exported_names()
            if name in decode_config}


__all__ = ["TranslatorModule", "export_options", "export_translator"]
