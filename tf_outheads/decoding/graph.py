"""Raw strings to translations in TensorFlow ops: the one translation path.

`TranslationGraph` holds what a translation needs (the model, its tokenizers,
the length limits, the default options) and does every step of it with
TensorFlow ops, so the same code runs eagerly, inside a `tf.function` and
inside an exported SavedModel:

    sources (batch,) tf.string
      └─ refuse a request of more than `max_request_sources` sources (when set)
      └─ encode: cut to `max_input_bytes` (when set), invalid UTF-8 → U+FFFD,
         SentencePiece tokenize, keep `max_source_length - 1` pieces, + EOS   (CPU)
      └─ refuse a request of more than `max_request_pieces` pieces (when set)
      └─ decode: output limit ratio × (pieces + EOS) + offset, 0 for a source
         without a piece; rows grouped by beam width: greedy_search (width 1)
         or beam_search (n = 1, or n = width for an n-best list), step
         function `model.make_step_fn(head cache)` (wrapped by
         `tf_outheads.decoding.constraints` when an EOS bias or repeat blocking
         is asked for)
      └─ SentencePiece detokenize, `<unk>` replacement by attention        (CPU)
    translations (batch, n) tf.string, scores (batch, n) float32

It has two hosts. `tf_outheads.decoding.Translator` (Python) checks its
arguments, encodes all its sources once, decodes them in length-sorted
batches with its `DecodeOptions` (one search, chosen when traced) and the head
cache of the current weights, and restores the input order.
`tf_outheads.export.TranslatorModule` (a SavedModel) calls `translate` with
per-request options (`tf_outheads.decoding.requests`) and the head cache frozen
as variables at export.
"""

import tensorflow as tf

from tf_outheads.compat import in_xla_context
from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tf_outheads.decoding.beam import beam_search
from tf_outheads.decoding.constraints import (constraints_requested, remove_eos_bias,
                                              with_constraints)
from tf_outheads.decoding.greedy import greedy_search, max_length_from_source
from tf_outheads.decoding.options import DecodeOptions, decode_options
from tf_outheads.decoding.prefix import with_target_prefix
from tf_outheads.decoding.requests import RequestOptions, sampling_refusal
from tf_outheads.decoding.sampling import Sampling, row_seeds
from tf_outheads.decoding.selection import (selected_step_fn, to_candidate_indices,
                                            to_vocabulary_ids)
from tf_outheads.decoding.unk import replace_unknown_words

# The inputs of a request (`DecodeOptions.request_inputs`), and the sampling options.
_CPU = "/cpu:0"


class TranslationGraph(RequestOptions):
    """A model, its tokenizers and the search: raw strings in, translations out, in graph ops.

    Builds nothing when constructed (the tokenizers are first used by
    `encode` and `texts`); every method is TensorFlow ops only, callable
    eagerly or when tracing.

    Args:
        model: a model with `initial_decoding_state(source_ids, max_length)`,
            `make_step_fn(cache)` and a `head`; `source_alignments(source_ids,
            target_in)` for `<unk>` replacement and alignments.
        source_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        target_tokenizer: `tf_outheads.data.SubwordTokenizer`.
        options: `tf_outheads.decoding.options.DecodeOptions` (already checked), the
            translation's options: the defaults of a request. `None`: the
            defaults. With `eos_bias` and `block_repeats` at their defaults the
            model's step function is not wrapped at all.
        beam_sizes: iterable of int. The widths a request may ask for
            (`translate` with options), besides `options.beam_size`. Defaults to `()`.
        max_input_bytes: int or `None`. Raw inputs are cut to this many bytes
            before tokenization; `None` keeps them whole. Defaults to `None`.
        max_request_sources: int or `None`. `translate` refuses a request of
            more sources (`InvalidArgumentError`), before tokenizing it;
            `None`: no limit. Defaults to `None`.
        max_request_pieces: int or `None`. `translate` refuses a request whose
            sources hold more subword pieces in all (each counted after its
            cut to `max_source_length - 1`), before decoding it; `None`: no
            limit. Defaults to `None`.
        shortlist: `None`, a `tf_outheads.decoding.selection.Shortlist` of these
            tokenizers or a `tf_outheads.decoding.NeuralSelection` (the model's
            selection head): every search decodes over its per-batch candidates
            only (vocabulary selection). Defaults to `None`: the whole vocabulary.

    Raises:
        TypeError: `options` is not a `DecodeOptions`.
        ValueError: `replace_unk` or `with_alignments` with a model that cannot
            align; sampling with a head whose scores are not log-probabilities.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, options=None, beam_sizes=(),
                 max_input_bytes=None, max_request_sources=None, max_request_pieces=None,
                 shortlist=None):
        self.options = options = decode_options(options)  # not checked again
        self.sampling = options.sampling
        # Sampling needs a distribution over the vocabulary.
        self.can_sample = bool(getattr(model.head, "scores_are_log_probabilities", True))
        if self.sampling is not None and not self.can_sample:
            raise ValueError(sampling_refusal(model.head))
        self.can_replace_unk = callable(getattr(model, "source_alignments", None))
        for name in ("replace_unk", "with_alignments"):  # both read the attention
            if getattr(options, name) and not self.can_replace_unk:
                raise ValueError(
                    f"`{name}=True` needs a model with `source_alignments(source_ids, "
                    f"target_in)`. Received: a {type(model).__name__} without it")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        if shortlist is not None:
            shortlist.check(model, source_tokenizer, target_tokenizer)
        self.shortlist = shortlist
        self.beam_sizes = tuple(sorted({int(width) for width in beam_sizes}
                                       | {options.beam_size}))
        self.max_input_bytes = None if max_input_bytes is None else int(max_input_bytes)
        self.max_request_sources = (None if max_request_sources is None
                                    else int(max_request_sources))
        self.max_request_pieces = None if max_request_pieces is None else int(max_request_pieces)
        # The bound on one step's score that lets the beam search stop early:
        # 0 for log-probabilities; heads with other scores (cosine) say theirs.
        self.max_step_score = getattr(model.head, "max_step_score", 0.0)

    # -- the whole request -------------------------------------------------------
    def translate(self, sources, cache, options=None, target_prefix=None):
        """Raw strings → the five outputs of the exported signatures.

        Args:
            sources: string tensor `(B,)`.
            cache: dict of tensors, the head's `inference_cache()`.
            options: `None` (the defaults for every row), or a dict of the
                request's options (`DecodeOptions.request_inputs()`), each a
                `(None,)` tensor of one value or one per source, an unset value
                (-1; NaN for `eos_bias`) meaning the default
                (`tf_outheads.decoding.requests`).
            target_prefix: `None`, or a string tensor `(1,)` or `(B,)`: the
                text each translation starts with (`""`: none), continued by
                the search (`encode_prefix`).

        A row that samples has the seed `row_seeds(seed, i)`, i its position in
        the request (a negative `seed`: one drawn at random for the request).

        Returns:
            dict: `translations` `(B, n)` string, `scores` `(B, n)` float32,
            `alignments` `(B, n)` string (`texts`, where asked for),
            `beam_size` `(B,)` int32, `truncated` `(B,)` bool, `empty_source`
            `(B,)` bool.
        """
        checks = self.check_request_sources(tf.size(sources))
        if options is not None:
            checks += self.check_options(tf.size(sources), options)
        if target_prefix is not None:
            size = tf.size(target_prefix)
            checks.append(tf.debugging.Assert(
                tf.logical_or(tf.equal(size, 1), tf.equal(size, tf.size(sources))),
                ["`target_prefix` must hold one text, or one per source. Received: "
                 "target_prefix of length", size, "for a batch of", tf.size(sources)],
                name="check_target_prefix_length"))
        if checks:
            # A request too large, or refused options, fail the request before anything
            # is tokenized, broadcast or decoded: everything below reads `sources` after
            # the checks.
            with tf.control_dependencies(checks):
                sources = tf.identity(sources)
        batch_size = tf.shape(sources)[0]
        seeds = None
        if options is not None:
            options = self.resolve_options(options, batch_size)
            checks = self.check_sampling_widths(options)
            if checks:
                with tf.control_dependencies(checks):
                    sources = tf.identity(sources)
            seeds = row_seeds(options["seed"], tf.range(batch_size))
        source_ids, num_pieces, truncated = self.encode(sources)
        checks = self.check_request_pieces(num_pieces)
        if checks:
            # Too many pieces fail the request before the search allocates anything.
            with tf.control_dependencies(checks):
                source_ids = tf.identity(source_ids)
        prefix = None
        if target_prefix is not None:
            prefix = self.encode_prefix(tf.broadcast_to(target_prefix, [batch_size]))
        translations, scores, alignments = self.decode(source_ids, num_pieces, cache, options,
                                                       seeds, prefix)
        return {
            "translations": translations,  # (B, n)
            "scores": scores,  # (B, n)
            "alignments": alignments,  # (B, n): "i-j" pairs where asked for, else ""
            # (B,) the width each row was decoded with
            "beam_size": (tf.fill([batch_size], self.options.beam_size) if options is None
                          else options["beam_size"]),
            "truncated": truncated,  # (B,) pieces dropped past max_source_length
            "empty_source": tf.equal(num_pieces, 0),  # (B,) no piece: nothing decoded
        }

    # -- the size of a request -----------------------------------------------
    def check_request_sources(self, num_sources):
        """`[]`, or an assert refusing more than `max_request_sources` sources.

        Its `InvalidArgumentError` starts with `Request too large:` and names
        the limit, the count received and how to split the request.
        """
        if self.max_request_sources is None:
            return []
        limit = self.max_request_sources
        return [tf.debugging.Assert(num_sources <= limit, [tf.strings.format(
            "Request too large: it holds {} sources; this export translates at most {} per "
            "request (max_request_sources). Split it into requests of at most {} sources.",
            (num_sources, limit, limit))], name="check_request_sources")]

    def check_request_pieces(self, num_pieces, texts="its sources", each="each source",
                             verb="translates"):
        """`[]`, or an assert refusing more than `max_request_pieces` pieces in all.

        `num_pieces`: `(B,)`, each row's pieces after its cut to `max_source_length -
        1`. The message is as `check_request_sources`; `texts`, `each` and `verb` name
        what was counted (the `score` signature counts both sides of each pair).
        """
        if self.max_request_pieces is None:
            return []
        limit = self.max_request_pieces
        total = tf.reduce_sum(num_pieces)
        return [tf.debugging.Assert(total <= limit, [tf.strings.format(
            f"Request too large: {texts} hold {{}} subword pieces ({each} counted up "
            f"to {{}}); this export {verb} at most {{}} per request (max_request_pieces). "
            "Split it into smaller requests.",
            (total, self.options.max_source_length - 1, limit))], name="check_request_pieces")]

    # -- the steps ------------------------------------------------------------
    def encode(self, sources):
        """Raw strings `(B,)` → source ids `(B, S)` with EOS, piece counts `(B,)`, and
        whether pieces were dropped past `max_source_length - 1` `(B,)`."""
        pieces, truncated = tokenize_text(self.source_tokenizer, sources,
                                          self.options.max_source_length - 1,
                                          self.max_input_bytes)
        with tf.device(_CPU):
            eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(sources)[0], 1], EOS_ID))
            source_ids = tf.concat([pieces, eos], axis=1).to_tensor(PAD_ID)
            num_pieces = tf.cast(pieces.row_lengths(), tf.int32)
        return source_ids, num_pieces, truncated

    def encode_prefix(self, texts):
        """Target prefixes `(B,)` string → `(ids (B, P), lengths (B,))`: their target
        pieces (no BOS, no EOS), read as a source is (`tokenize_text`), PAD after."""
        pieces, _ = tokenize_text(self.target_tokenizer, texts, 1 << 30, self.max_input_bytes)
        with tf.device(_CPU):
            return pieces.to_tensor(PAD_ID), tf.cast(pieces.row_lengths(), tf.int32)

    def decode(self, source_ids, num_pieces, cache, options=None, seeds=None, prefix=None):
        """Source ids `(B, S)` → translations `(B, n)` string, scores `(B, n)` and
        alignments `(B, n)` string (`texts`; `""` where not asked for).

        Args:
            source_ids, num_pieces: as `encode` returns them (rows of it).
            cache: dict of tensors, the head's `inference_cache()`.
            options: `None`: every row with the graph's `DecodeOptions`, and only
                their search in the graph. Or per-row options as `resolve_options`
                returns them: rows grouped by width, one search per width of
                `beam_sizes`, columns padded to the widest n-best list (`""`,
                score `-inf`).
            seeds: uint32 `(B,)`, each row's sampling seed (`row_seeds`); needed
                when a row samples.
            prefix: `None` or `(ids (B, P), lengths (B,))` (`encode_prefix`).
        """
        if options is None:
            sampling = None
            if self.sampling is not None:
                if seeds is None:
                    raise ValueError("This graph samples by default: `decode` needs the "
                                     "rows' `seeds`. Received: seeds=None")
                sampling = Sampling(seeds=seeds, **self.sampling)
            values = self.options.as_dict()
            return self._translate_rows(self.options.beam_size, source_ids, num_pieces, cache,
                                        values, values["num_hypotheses"], sampling, prefix)
        n_best = options["num_hypotheses"]
        n_out = tf.reduce_max(tf.concat([n_best, [1]], axis=0))
        indices, texts, scores, aligned = [], [], [], []
        for width in self.beam_sizes:
            rows = tf.cast(tf.where(tf.equal(options["beam_size"], width))[:, 0], tf.int32)

            def group(width=width, rows=rows):
                values = {name: tf.gather(value, rows) for name, value in options.items()}
                sampling = None
                if width == 1:
                    sampling = Sampling(
                        seeds=tf.gather(seeds, rows), topk=values["sampling_topk"],
                        topp=values["sampling_topp"],
                        temperature=values["sampling_temperature"], enabled=values["sampling"])
                group_prefix = (None if prefix is None else
                                tuple(tf.gather(part, rows) for part in prefix))
                return self._translate_rows(
                    width, tf.gather(source_ids, rows), tf.gather(num_pieces, rows), cache,
                    values, n_out, sampling, group_prefix)

            group_texts, group_scores, group_alignments = tf.cond(
                tf.size(rows) > 0, group,
                lambda: (tf.fill([0, n_out], ""), tf.zeros([0, n_out], tf.float32),
                         tf.fill([0, n_out], "")))
            indices.append(rows)
            texts.append(group_texts)
            scores.append(group_scores)
            aligned.append(group_alignments)
        return (tf.dynamic_stitch(indices, texts), tf.dynamic_stitch(indices, scores),
                tf.dynamic_stitch(indices, aligned))

    def _translate_rows(self, width, source_ids, num_pieces, cache, values, n_out,
                        sampling=None, prefix=None):
        """Rows decoded with one width → texts, scores and alignments `(b, n_out)`.

        `values`: `{name: value}` of the options, each a Python value (the same for
        every row: the search is chosen when traced) or a `(b,)` tensor.
        """
        # Drop padding columns no row needs.
        source_ids = source_ids[:, :tf.reduce_max(num_pieces) + 1]
        ids, scores = self.search(width, source_ids, num_pieces, cache, values, sampling,
                                  prefix)
        texts, aligned = self.texts(ids, source_ids, values["replace_unk"],
                                    values["with_alignments"])
        # Columns: the row's own n-best size, padded to the widest asked for.
        texts, scores, aligned = texts[:, :n_out], scores[:, :n_out], aligned[:, :n_out]
        num_hypotheses = values["num_hypotheses"]
        if isinstance(num_hypotheses, int):
            return texts, scores, aligned
        missing = n_out - tf.shape(texts)[1]
        group_size = tf.shape(texts)[0]
        texts = tf.concat([texts, tf.fill([group_size, missing], "")], axis=1)
        aligned = tf.concat([aligned, tf.fill([group_size, missing], "")], axis=1)
        scores = tf.concat([scores, tf.fill([group_size, missing], float("-inf"))], axis=1)
        wanted = tf.range(n_out)[tf.newaxis, :] < num_hypotheses[:, tf.newaxis]
        return (tf.where(wanted, texts, ""), tf.where(wanted, scores, float("-inf")),
                tf.where(wanted, aligned, ""))

    def values(self, options=None):
        """`{name: value}` of the options a search runs with: the graph's
        (`options=None`), a `DecodeOptions`', or a mapping's over the graph's (a
        mapping may hold `(b,)` tensors: one value per row)."""
        if isinstance(options, DecodeOptions):
            return options.as_dict()
        return {**self.options.as_dict(), **(options or {})}

    def output_limits(self, num_pieces, options=None):
        """int32 `(b,)`: each row's output limit, ratio × (pieces + EOS) + offset, 0 for
        a row without a piece. `options`: as `values`."""
        values = self.values(options)
        max_length = max_length_from_source(num_pieces + 1, ratio=values["max_length_ratio"],
                                            offset=values["max_length_offset"])
        return tf.where(num_pieces > 0, max_length, 0)

    def search(self, width, source_ids, num_pieces, cache, options=None, sampling=None,
               prefix=None):
        """Hypotheses of rows decoded with one beam width: ids `(b, n, T)`, scores `(b, n)`.

        Greedy (the sum of log-scores) for width 1, else the beam search (the
        GNMT-normalised score). Each row may output up to `output_limits` tokens; a
        row without a piece decodes nothing (`""`, score 0). `options` (as `values`:
        `None` for the graph's): `length_penalty` and `num_hypotheses` one Python
        value, or `(b,)` tensors; n = 1 searches for the best hypothesis only, a
        larger n for the pool's whole top `width` (the stopping rule waits for it).
        `eos_bias` and `block_repeats` (`tf_outheads.decoding.constraints`): one
        Python value or `(b,)` tensors; the scores returned are the model's (the bias
        removed), the n-best order the biased search's. With both off as Python
        values the step function is not wrapped.
        `sampling` (width 1): a `Sampling` of these rows, or `None`; when its
        `enabled` is a tensor, rows none of which samples run the plain greedy
        search. `prefix`: `None`, or `(ids (b, P), lengths (b,))`, target pieces
        each row's output starts with (`tf_outheads.decoding.prefix`; a row
        with length 0 decodes as without one). A prefix longer than its row's
        output limit fails with an `InvalidArgumentError` naming `target_prefix`.
        """
        values = self.values(options)
        length_penalty, num_hypotheses = values["length_penalty"], values["num_hypotheses"]
        eos_bias, block_repeats = values["eos_bias"], values["block_repeats"]
        model = self.model
        max_length = self.output_limits(num_pieces, values)
        # Under XLA the search's loop bound (the largest per-row limit) sizes per-step
        # caches (static shapes); otherwise a model may let them grow step by step.
        cache_length = tf.reduce_max(max_length) if in_xla_context() else None
        model_step_fn, candidates, probabilities = model.make_step_fn(cache), None, None
        if self.shortlist is not None and self.shortlist.reads_model:
            # Neural selection: the state and the encoder outputs of one encoder pass.
            model_state, (memory, mask) = model.initial_decoding_state(
                source_ids, max_length=cache_length, return_memory=True)
            probabilities = model.selection.probabilities(memory, mask)
            # A row without a piece decodes nothing and adds no candidate (the
            # Translator leaves such rows out of its batches; a request keeps them).
            probabilities = tf.where((num_pieces > 0)[:, tf.newaxis], probabilities,
                                     tf.zeros_like(probabilities))
        else:
            model_state = model.initial_decoding_state(source_ids, max_length=cache_length)
        if self.shortlist is not None:
            # Vocabulary selection: the search runs over candidate indices, which the
            # prefix is given in and the ids are mapped back from (`selection`).
            candidates = self.shortlist.candidates(
                source_ids, None if prefix is None else prefix[0], probabilities=probabilities)
            model_step_fn = selected_step_fn(model, cache, candidates)
            if prefix is not None:
                prefix = (to_candidate_indices(candidates, prefix[0]), prefix[1])
        batch_size = tf.shape(source_ids)[0]
        if isinstance(length_penalty, tf.Tensor):
            # Per row: (b, 1) broadcasts against beam_search's (b, 2k) candidate
            # scores and (b, max_steps) stopping bound.
            length_penalty = length_penalty[:, tf.newaxis]
        # Off as Python values (the Translator's defaults): the model's step function
        # as it is, at no cost.
        constrained = (isinstance(eos_bias, tf.Tensor) or isinstance(block_repeats, tf.Tensor)
                       or eos_bias != 0.0 or block_repeats)
        # A positive bias lifts EOS above `max_step_score`: the stopping bound adds it.
        max_eos_bias = (tf.reshape(tf.maximum(tf.cast(eos_bias, tf.float32), 0.0), [-1, 1])
                        if isinstance(eos_bias, tf.Tensor) else max(eos_bias, 0.0))

        def searched(sampling, constrained=constrained):
            step_fn, state = model_step_fn, model_state
            if constrained:
                # Inside the prefix's forcing, which then forces the prefix as given.
                step_fn, state = with_constraints(
                    step_fn, state, batch_size, eos_bias, block_repeats,
                    prefix_lengths=None if prefix is None else prefix[1])
            if prefix is not None:
                step_fn, state = with_target_prefix(step_fn, state, *prefix)
            if width == 1:
                # Finished sentences leave the computed batch (not under XLA).
                result = greedy_search(step_fn, state, batch_size, max_length, compact=None,
                                       sampling=sampling)
                if constrained:
                    result = remove_eos_bias(result, eos_bias)
                return result.ids[:, tf.newaxis], result.scores[:, tf.newaxis]

            def beam(n):
                result = beam_search(step_fn, state, batch_size, width, max_length,
                                     length_penalty=length_penalty, num_hypotheses=n,
                                     max_step_score=self.max_step_score,
                                     max_eos_bias=max_eos_bias)
                if constrained:
                    result = remove_eos_bias(result, eos_bias, length_penalty)
                return result.ids, result.scores

            if isinstance(num_hypotheses, int):
                return beam(width if num_hypotheses > 1 else 1)
            return tf.cond(tf.reduce_any(num_hypotheses > 1), lambda: beam(width),
                           lambda: beam(1))

        if prefix is not None:
            # One search for rows with and without a prefix (the export's graph stays
            # half the size); outside prefixes the forcing costs one reduction a step.
            lengths = prefix[1]
            too_long = tf.debugging.Assert(tf.reduce_all(lengths <= max_length), [
                "`target_prefix` must fit in the output limit of its source "
                "(max_length_ratio × (source pieces + 1) + max_length_offset; 0 for a source "
                "without a piece). Received: prefix pieces", lengths, "for limits",
                max_length], summarize=16, name="check_target_prefix")
            with tf.control_dependencies([too_long]):
                prefix = (prefix[0], tf.identity(lengths))
        if sampling is None or sampling.enabled is None:
            return self._to_vocabulary(candidates, searched(sampling))
        # Per-row options (the export): the greedy loop that samples and constrains runs
        # only if some row asks for either; otherwise the model's own step function, in
        # a loop of its own. A constraint wrapper that checks at every step costs ~6 % of
        # a plain greedy pass (a `tf.cond` in a loop step: ~85 us here, benchmarks/docs/decode.md).
        featured = tf.reduce_any(sampling.enabled)
        if constrained:
            featured = tf.logical_or(featured, constraints_requested(eos_bias, block_repeats))
        return self._to_vocabulary(candidates, tf.cond(
            featured, lambda: searched(sampling), lambda: searched(None, constrained=False)))

    @staticmethod
    def _to_vocabulary(candidates, result):
        """A search's `(ids, scores)`, its ids mapped from candidate indices back to piece
        ids when it ran over a vocabulary selection (`candidates` not `None`)."""
        ids, scores = result
        if candidates is None:
            return ids, scores
        return to_vocabulary_ids(candidates, ids), scores

    def texts(self, ids, source_ids, replace, align=False):
        """Hypotheses `(b, n, T)` → their strings `(b, n)` and alignments `(b, n)`.

        `replace` and `align`: Python bools, or `(b,)` bool per row. `<unk>` is
        replaced where `replace` (`tf_outheads.decoding.replace_unknown_words`); an
        alignment is `""` where `align` is off, else one `"i-j"` pair per target piece j
        (EOS not counted), i the source piece its decoder state attended to most (the
        source's EOS and padding excluded), 0-based piece indices in fast_align's order
        (source-target). Both read the model's `source_alignments` on one teacher-forced
        pass over the hypotheses (LSTM: its attention; Transformer: the last
        cross-attention layer averaged over heads), which only batches with an `<unk>`
        to replace or an alignment asked for pay for.
        """
        shape = tf.shape(ids)
        # Explicit sizes: `-1` cannot be inferred when T is 0 (nothing decoded).
        flat_ids = tf.reshape(ids, [shape[0] * shape[1], shape[2]])  # (b·n, T)
        with tf.device(_CPU):
            plain = self.target_tokenizer.detokenize(flat_ids)
        empty = tf.fill(tf.shape(plain), "")
        if not self.can_replace_unk or (replace is False and align is False):
            return tf.reshape(plain, shape[:2]), tf.reshape(empty, shape[:2])

        def per_hypothesis(value):
            return tf.repeat(tf.broadcast_to(value, shape[:1]), shape[1])  # (b·n,)

        flat_replace = per_hypothesis(replace) & tf.reduce_any(tf.equal(flat_ids, UNK_ID),
                                                              axis=1)
        flat_align = per_hypothesis(align)

        def attended():
            sources = tf.repeat(source_ids, shape[1], axis=0)
            target_in = tf.concat(
                [tf.fill([tf.shape(flat_ids)[0], 1], BOS_ID), flat_ids[:, :-1]], axis=1)
            weights = self.model.source_alignments(sources, target_in)  # (b·n, T, S)
            texts = tf.cond(
                tf.reduce_any(flat_replace),
                lambda: tf.where(flat_replace, replace_unknown_words(
                    flat_ids, sources, weights, self.source_tokenizer,
                    self.target_tokenizer), plain),
                lambda: plain)
            return texts, tf.where(flat_align, _alignment_pairs(flat_ids, sources, weights),
                                   "")

        needed = tf.logical_and(tf.reduce_any(flat_replace | flat_align), shape[2] > 0)
        texts, alignments = tf.cond(needed, attended, lambda: (plain, empty))
        return tf.reshape(texts, shape[:2]), tf.reshape(alignments, shape[:2])


def _alignment_pairs(target_ids, source_ids, weights):
    """`"i-j ..."` `(N,)` string: for each target piece j of `target_ids` `(N, T)` (PAD and
    EOS not counted), the piece i of `source_ids` `(N, S)` (PAD and EOS excluded) with the
    largest attention weight `weights[:, j]` `(N, T, S)`."""
    lengths = tf.reduce_sum(tf.cast(tf.logical_and(tf.not_equal(target_ids, PAD_ID),
                                                   tf.not_equal(target_ids, EOS_ID)),
                                    tf.int32), axis=1)
    real = tf.logical_and(tf.not_equal(source_ids, PAD_ID), tf.not_equal(source_ids, EOS_ID))
    weights = tf.where(real[:, tf.newaxis, :], tf.cast(weights, tf.float32), -1.0)
    source_positions = tf.argmax(weights, axis=-1, output_type=tf.int32)  # (N, T)
    target_positions = tf.broadcast_to(tf.range(tf.shape(target_ids)[1])[tf.newaxis, :],
                                       tf.shape(source_positions))
    with tf.device(_CPU):
        pairs = tf.strings.join([tf.strings.as_string(source_positions), "-",
                                 tf.strings.as_string(target_positions)])
        return tf.strings.reduce_join(tf.RaggedTensor.from_tensor(pairs, lengths=lengths),
                                      axis=1, separator=" ")


def tokenize_text(tokenizer, texts, limit, max_input_bytes=None):
    """Raw strings `(B,)` → their first `limit` pieces, ragged int32 `(B, None)`, and
    whether pieces were dropped `(B,)`; on the CPU (SentencePiece's only kernels). Inputs
    are first cut to `max_input_bytes` (if given) and invalid UTF-8 becomes U+FFFD, so
    every host of a model (the search, forced decoding, the export) reads a string alike.
    """
    with tf.device(_CPU):
        if max_input_bytes is not None:
            texts = tf.strings.substr(texts, 0, max_input_bytes)
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                             replacement_char=0xFFFD,
                                             replace_control_characters=False)
        pieces = tokenizer.tokenize(texts)  # ragged (B, None)
        truncated = pieces.row_lengths() > limit
        return tf.cast(pieces[:, :limit], tf.int32), truncated


__all__ = ["TranslationGraph", "tokenize_text"]
