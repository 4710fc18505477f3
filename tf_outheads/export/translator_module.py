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
  options per request. Every option is a `(None,)` tensor
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
import json
import os

import tensorflow as tf

from tf_outheads.data.tokenizer import SubwordTokenizer
from tf_outheads.decoding.graph import OPTION_NAMES, TranslationGraph
from tf_outheads.decoding.options import MAX_LENGTH_PENALTY, check_num_hypotheses
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
            (`tf_outheads_zoo.LSTMSeq2Seq`); `source_alignments(source_ids, target_in)`
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
        max_request_sources: int. A request of more sources is refused
            (`InvalidArgumentError` naming the limit and the count) before it
            is tokenized. Defaults to 256.
        max_request_pieces: int. A request whose sources hold more subword
            pieces in all (each counted after its cut to `max_source_length
            - 1`) is refused before it is decoded. Defaults to 16384.
        eos_bias: float, finite, in `[-100, 100]`. Default bias added to EOS's
            score at every step (`tf_outheads.decoding.constraints`, in the
            head's score unit). Defaults to 0.0.
        block_repeats: bool. Default for blocking a piece right after itself.
            Defaults to `False`.
        quantize: `None` or `"int8"`: the module translates and scores with a
            quantized copy of `model` (`tf_outheads.models.quantized_copy`), whose
            int8 weights the SavedModel then holds. Defaults to `None`.
        name: str. Module name. Defaults to `"translator"`.

    Outputs: `translations` `(batch, n)` string, `scores` `(batch, n)`
    float32, `alignments` `(batch, n)` string (with `with_alignments` > 0: one
    `"i-j"` pair per target piece, i the most-attended source piece, as
    fast_align writes them; `""` otherwise), `beam_size` `(batch,)` int32 (the width each row was decoded
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
                 max_request_sources=MAX_REQUEST_SOURCES,
                 max_request_pieces=MAX_REQUEST_PIECES, eos_bias=0.0, block_repeats=False,
                 quantize=None, name="translator"):
        super().__init__(name=name)
        # int8: the quantized copy's weights (int8 Dense kernels, the head's int8 cache)
        # are what the signatures read, so they are what the SavedModel holds.
        model = inference_model(model, quantize)
        self.quantize = quantize
        beam_size = positive_int("beam_size", beam_size)
        num_hypotheses = check_num_hypotheses(num_hypotheses, beam_size)
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
            model, source_copy, target_copy, beam_size=beam_size,
            length_penalty=length_penalty, num_hypotheses=num_hypotheses,
            replace_unk=replace_unk, beam_sizes=[1, *widths],
            max_source_length=max_source_length, max_length_ratio=max_length_ratio,
            max_length_offset=max_length_offset, max_input_bytes=max_input_bytes,
            max_request_sources=max_request_sources, max_request_pieces=max_request_pieces,
            eos_bias=eos_bias, block_repeats=block_repeats)
        object.__setattr__(self, "_graph", graph)
        # Forced decoding of given translations (the `score` signature), read as the
        # search reads a source (the same cuts).
        object.__setattr__(self, "_scorer", Scorer(
            model, source_copy, target_copy, max_source_length=max_source_length,
            max_target_length=max_source_length, max_input_bytes=max_input_bytes))
        self.beam_size = beam_size
        self.length_penalty = graph.length_penalty
        self.num_hypotheses = num_hypotheses
        self.replace_unk = graph.replace_unk
        self.eos_bias = graph.eos_bias
        self.block_repeats = graph.block_repeats
        self.beam_sizes = graph.beam_sizes
        self.max_source_length = graph.max_source_length
        self.max_length_ratio = graph.max_length_ratio
        self.max_length_offset = graph.max_length_offset
        self.max_input_bytes = graph.max_input_bytes
        self.max_request_sources = graph.max_request_sources
        self.max_request_pieces = graph.max_request_pieces
        self.can_replace_unk = graph.can_replace_unk
        self.can_sample = graph.can_sample
        self.max_step_score = graph.max_step_score
        # Tracked: the SentencePiece resources the graph reads.
        self.source_tokenizer = source_copy
        self.target_tokenizer = target_copy
        # Weight-only head tensors, computed once now (see the module docstring).
        self.head_cache = {
            key: tf.Variable(value, trainable=False, name=f"head_cache_{key}")
            for key, value in model.head.inference_cache().items()
        }

        sources = tf.TensorSpec([None], tf.string, name=SOURCES)
        default_int = tf.constant([-1], tf.int32)
        default_float = tf.constant([-1.0], tf.float32)
        # NaN: "not set" for a float whose negative values are real (`eos_bias`).
        not_set = tf.constant([float("nan")], tf.float32)
        default_seed = tf.constant([-1], tf.int64)
        no_prefix = tf.constant([""], tf.string)

        def translate(sources, beam_size=default_int, length_penalty=default_float,
                      num_hypotheses=default_int, replace_unk=default_int,
                      sampling_topk=default_int, sampling_topp=default_float,
                      sampling_temperature=default_float, seed=default_seed,
                      with_alignments=default_int, eos_bias=not_set,
                      block_repeats=default_int, target_prefix=no_prefix):
            options = dict(zip(OPTION_NAMES, (
                beam_size, length_penalty, num_hypotheses, replace_unk, sampling_topk,
                sampling_topp, sampling_temperature, seed, with_alignments, eos_bias,
                block_repeats)))
            # The head's weight-only tensors, read once per call, never per step.
            cache = {key: tf.convert_to_tensor(value) for key, value in self.head_cache.items()}
            return self._graph.translate(sources, cache, options, target_prefix)

        def serve(sources):
            # The same concrete function as `translate`: traced and saved once.
            return self.translate(sources, default_int, default_float, default_int,
                                  default_int, default_int, default_float, default_float,
                                  default_seed, default_int, not_set, default_int, no_prefix)

        # No AutoGraph: the graph's code uses tf.while_loop / tf.cond itself, and
        # converting the searches and the model's step costs seconds per trace.
        self.translate = tf.function(translate, autograph=False, input_signature=[
            sources,
            tf.TensorSpec([None], tf.int32, name="beam_size"),
            tf.TensorSpec([None], tf.float32, name="length_penalty"),
            tf.TensorSpec([None], tf.int32, name="num_hypotheses"),
            tf.TensorSpec([None], tf.int32, name="replace_unk"),
            tf.TensorSpec([None], tf.int32, name="sampling_topk"),
            tf.TensorSpec([None], tf.float32, name="sampling_topp"),
            tf.TensorSpec([None], tf.float32, name="sampling_temperature"),
            tf.TensorSpec([None], tf.int64, name="seed"),
            tf.TensorSpec([None], tf.int32, name="with_alignments"),
            tf.TensorSpec([None], tf.float32, name="eos_bias"),
            tf.TensorSpec([None], tf.int32, name="block_repeats"),
            tf.TensorSpec([None], tf.string, name=TARGET_PREFIX),
        ])
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
        """The export's options, as written to `assets.extra/tf_outheads_export.json`."""
        return {
            "signatures": {
                "serving_default": {"inputs": [SOURCES], "outputs": list(OUTPUT_NAMES)},
                "translate": {"inputs": [SOURCES, *OPTION_NAMES, TARGET_PREFIX],
                              "outputs": list(OUTPUT_NAMES)},
                "score": {"inputs": [SOURCES, TARGETS], "outputs": list(SCORE_OUTPUT_NAMES)},
            },
            "scores_are_log_probabilities": self._scorer.log_probabilities,
            "defaults": {"beam_size": self.beam_size, "length_penalty": self.length_penalty,
                         "num_hypotheses": self.num_hypotheses,
                         "replace_unk": self.replace_unk, "eos_bias": self.eos_bias,
                         "block_repeats": self.block_repeats},
            "beam_sizes": list(self.beam_sizes),
            "replace_unk_available": self.can_replace_unk,
            "sampling_available": self.can_sample,
            "max_source_length": self.max_source_length,
            "max_length_ratio": self.max_length_ratio,
            "max_length_offset": self.max_length_offset,
            "max_input_bytes": self.max_input_bytes,
            "max_request_sources": self.max_request_sources,
            "max_request_pieces": self.max_request_pieces,
            "max_length_penalty": MAX_LENGTH_PENALTY,
            "head_cache": sorted(self.head_cache),
            "quantize": self.quantize,
        }


def export_translator(model, source_tokenizer, target_tokenizer, path, beam_size=1,
                      length_penalty=0.0, num_hypotheses=1, replace_unk=False,
                      beam_sizes=DEFAULT_BEAM_SIZES, max_source_length=MAX_SOURCE_LENGTH,
                      max_length_ratio=1.5, max_length_offset=10,
                      max_input_bytes=MAX_INPUT_BYTES, max_request_sources=MAX_REQUEST_SOURCES,
                      max_request_pieces=MAX_REQUEST_PIECES, eos_bias=0.0, block_repeats=False,
                      quantize=None):
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
        beam_size, length_penalty, num_hypotheses, replace_unk, beam_sizes,
        max_source_length, max_length_ratio, max_length_offset,
        max_input_bytes, max_request_sources, max_request_pieces, eos_bias,
        block_repeats: see `TranslatorModule`; the defaults of the `translate`
            signature's options and of `serving_default`.
        quantize: `None` or `"int8"`: export a quantized copy of the model (int8
            Dense kernels and output layer in the SavedModel; `model` is left
            float). Every signature stays. Defaults to `None`.

    Returns:
        str, `path`.

    Raises:
        ValueError: an option out of range, named with the value received
            (as `TranslatorModule`), before anything is written.
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
        model, source_tokenizer, target_tokenizer, beam_size=beam_size,
        length_penalty=length_penalty, num_hypotheses=num_hypotheses, replace_unk=replace_unk,
        beam_sizes=beam_sizes, max_source_length=max_source_length,
        max_length_ratio=max_length_ratio, max_length_offset=max_length_offset,
        max_input_bytes=max_input_bytes, max_request_sources=max_request_sources,
        max_request_pieces=max_request_pieces, eos_bias=eos_bias, block_repeats=block_repeats,
        quantize=quantize)

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
    """`export_translator` keywords from a preset's `decode` section (others ignored)."""
    names = ("beam_size", "length_penalty", "replace_unk", "max_length_ratio",
             "max_length_offset", "max_source_length", "eos_bias", "block_repeats")
    return {name: decode_config[name] for name in names if name in decode_config}


__all__ = ["TranslatorModule", "export_options", "export_translator"]
