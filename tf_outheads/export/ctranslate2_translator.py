"""Translate raw strings with a CTranslate2 export (`to_ctranslate2`), as `Translator` does
with a Keras model: the same options object, the same return shapes.

The export's SentencePiece models split the sources (Python `sentencepiece`, the same
model the in-graph tokenizer applies) and join the outputs; CTranslate2 runs the
search. Its options come from the export's recorded decoding defaults, then the
caller's (`DecodeOptions` names). What maps onto CTranslate2 unchanged:

- `beam_size`, `num_hypotheses` (n-best, best first), `batch_size`;
- sampling: `sampling_topk` (0 or unset: the whole distribution), `sampling_topp`,
  `sampling_temperature`, `seed` (CTranslate2's own generator: the same seed, the
  same samples on this engine, not the Keras graph's samples; CTranslate2 seeds a
  translator when it loads it, so a seeded call loads the model once more);
- target prefixes (the output starts with the prefix's pieces; its score counts them,
  as the graph's does: CTranslate2's own counts the pieces after them, so the prefix's
  log-probability is added from `score_batch`);
- output limits: `max_source_length` (sources cut to `max_source_length - 1` pieces,
  then `</s>`), and per sentence `ceil(max_length_ratio × (pieces + 1)) +
  max_length_offset` output pieces. CTranslate2 takes one limit per call. A beam's
  choices depend on its limit, so beam search splits a batch (sources sorted by
  length) where the limit changes. One hypothesis's (greedy or sampled) do not: it
  decodes full batches at the batch's longest limit and cuts each output that reaches
  its own, scoring the cut output again (`score_batch`): the output a run at its own
  limit gives, and its score (float32: to 7e-5 on a trained Transformer's dev set;
  int8 rounds a forced pass and a stepwise one differently, by up to 0.1 there).
  Splitting took 1.7x the time on that dev set in batches of 64 (73 calls instead
  of 34: CTranslate2's step costs about as much for a few rows as for 64).

Every other option is refused at its non-default value, naming it (a GNMT
`length_penalty`: CTranslate2 divides by `length ** α`; `eos_bias`, `block_repeats`,
`replace_unk`, `with_alignments`, `quantize`: not available or not the same there),
so an option added to `DecodeOptions` later is refused until it is mapped here. A
head exported with `exact_scores: false` (vMF with cosine or log-likelihood scoring)
decodes greedily only.
"""

import dataclasses
import json
import logging
import os

from tf_outheads.data.special_tokens import BOS_PIECE, EOS_PIECE, PAD_PIECE
from tf_outheads.decoding.greedy import max_length_from_source
from tf_outheads.decoding.options import DecodeOptions, decode_options
from tf_outheads.decoding.prefix import check_prefix_lengths
from tf_outheads.export.ctranslate2 import METADATA_FILE, import_ctranslate2

logger = logging.getLogger(__name__)

# The `DecodeOptions` this engine maps (module docstring); any other is refused unless
# it keeps its default.
SUPPORTED_OPTIONS = frozenset({
    "beam_size", "num_hypotheses", "sampling_topk", "sampling_topp",
    "sampling_temperature", "seed", "max_length_ratio", "max_length_offset",
    "max_source_length", "batch_size"})
_WHY_NOT = {
    "length_penalty": "CTranslate2 normalizes by length ** α, not by GNMT's "
                      "((5 + |Y|) / 6) ** α",
    "eos_bias": "CTranslate2 has no EOS bias",
    "block_repeats": "CTranslate2 blocks repeated n-grams (no_repeat_ngram_size), not a "
                     "piece right after itself",
    "replace_unk": "CTranslate2 replaces <unk> by a source piece, not the source word",
    "with_alignments": "not mapped onto CTranslate2's attention yet",
    "quantize": "a CTranslate2 model is quantized when exported (--quantize) or loaded "
                "(compute_type)",
}
_SPECIAL_PIECES = frozenset({PAD_PIECE, BOS_PIECE, EOS_PIECE})


def read_export_metadata(model_dir):
    """The `tf_outheads_ctranslate2.json` of a `to_ctranslate2` directory.

    Raises:
        FileNotFoundError: naming the directory, if it is not such an export.
    """
    path = os.path.join(os.fspath(model_dir), METADATA_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{model_dir}: no {METADATA_FILE}, so not a CTranslate2 export of tf_outheads "
            "(write one with tf-outheads export --format ctranslate2)")
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def check_engine_options(options, exact_scores=True):
    """Refuse, naming it, every option this engine does not map at a non-default value.

    Raises:
        ValueError: naming the option, its value and why.
    """
    for field in dataclasses.fields(DecodeOptions):
        if field.name in SUPPORTED_OPTIONS:
            continue
        value = getattr(options, field.name)
        if value != field.default:
            why = _WHY_NOT.get(field.name, "not mapped onto CTranslate2")
            raise ValueError(f"The CTranslate2 engine does not take `{field.name}` ({why}). "
                             f"Received: {field.name}={value!r}")
    if not exact_scores and (options.beam_size > 1 or options.sampling is not None):
        raise ValueError(
            "This export ranks words like the head but its scores are not the head's "
            "(exact_scores: false, e.g. vMF with cosine scoring): it decodes greedily only. "
            f"Received: beam_size={options.beam_size}, sampling="
            f"{options.sampling is not None}")


class CTranslate2Translator:
    """Translate raw strings with a `to_ctranslate2` directory (see the module docstring).

    Args:
        model_dir: str or path-like, the export.
        compute_type: CTranslate2's compute type (`"default"`: the type the weights
            were saved in; `"int8"`, `"float32"`, ...). Defaults to `"default"`.
        inter_threads, intra_threads: CTranslate2's threads (batches in parallel,
            threads per batch; 0: its default). Defaults to 1 and 0.
        options: `DecodeOptions` or `None` (the export's recorded defaults).
        **changes: options by name over those.

    Raises:
        FileNotFoundError: `model_dir` is not such an export.
        ValueError: an option this engine does not take (`check_engine_options`).
        ImportError: CTranslate2 is not installed.
    """

    def __init__(self, model_dir, compute_type="default", inter_threads=1, intra_threads=0,
                 options=None, **changes):
        import sentencepiece

        ctranslate2 = import_ctranslate2()
        self.model_dir = os.fspath(model_dir)
        self.metadata = read_export_metadata(self.model_dir)
        if options is None:
            names = {field.name for field in dataclasses.fields(DecodeOptions)}
            recorded = {k: v for k, v in self.metadata.get("decode", {}).items()
                        if k in names and k in SUPPORTED_OPTIONS}
            options = decode_options(None, **recorded)
        self.options = decode_options(options, **changes)
        self.exact_scores = bool(self.metadata.get("exact_scores", True))
        check_engine_options(self.options, self.exact_scores)
        self.tokenizers = {}
        for side in ("source", "target"):
            path = os.path.join(self.model_dir, self.metadata[f"{side}_tokenizer"]["file"])
            self.tokenizers[side] = sentencepiece.SentencePieceProcessor(model_file=path)
        self._ctranslate2 = ctranslate2
        self._engine = dict(device="cpu", compute_type=compute_type,
                            inter_threads=inter_threads, intra_threads=intra_threads)
        self.translator = ctranslate2.Translator(self.model_dir, **self._engine)
        self.truncated_indices = []

    def _pieces(self, side, text):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise ValueError(f"Each source and prefix must be str or UTF-8 bytes. Received: "
                             f"{type(text).__name__}")
        return self.tokenizers[side].encode(text, out_type=str)

    def _text(self, pieces):
        return self.tokenizers["target"].decode_pieces(
            [piece for piece in pieces if piece not in _SPECIAL_PIECES])

    def _search_options(self, options, limit):
        search = {"beam_size": options.beam_size, "num_hypotheses": options.num_hypotheses,
                  "length_penalty": 0.0, "max_decoding_length": limit,
                  # EOS may come first (an empty output), as in the graph's search.
                  "min_decoding_length": 0, "max_input_length": options.max_source_length,
                  "return_scores": True, "max_batch_size": options.batch_size}
        sampling = options.sampling
        if sampling is not None:
            search.update(sampling_topk=options.sampling_topk or 0,
                          sampling_topp=options.sampling_topp or 1.0,
                          sampling_temperature=options.sampling_temperature or 1.0)
        return search

    def _prefix_scores(self, sources, prefixes):
        """The log-probability of each forced prefix (0 without one): CTranslate2's
        hypothesis scores count the pieces after the prefix only, the graph's the
        prefix too (`Translator.translate`)."""
        if not any(prefixes):
            return [0.0] * len(sources)
        rows = [i for i, prefix in enumerate(prefixes) if prefix]
        scores = [0.0] * len(sources)
        for i, score in zip(rows, _forced_scores(self.translator, [sources[i] for i in rows],
                                                 [prefixes[i] for i in rows])):
            scores[i] = score
        return scores

    @staticmethod
    def _cut_at_limits(translator, sources, hypotheses, limits):
        """Cut, in place, each one-hypothesis output that reached its own limit (EOS
        counts as a step: an output of `limit` pieces decoded at that limit ends there
        without EOS), and score the cut output again: the output and score of a
        decoding at that limit (prefix pieces included, as in its score)."""
        cut = [i for i, rows in enumerate(hypotheses) if len(rows[0][0]) >= limits[i]]
        if not cut:
            return
        targets = [hypotheses[i][0][0][:limits[i]] for i in cut]
        for i, target, score in zip(cut, targets, _forced_scores(
                translator, [sources[i] for i in cut], targets)):
            hypotheses[i][0] = (target, score)

    def translate(self, sentences, with_scores=False, target_prefix=None, **changes):
        """Translate raw source strings; arguments and return shapes as
        `tf_outheads.decoding.Translator.translate` (without alignments).

        Raises:
            ValueError: an option this engine does not take, an item that is not a
                string, or a `target_prefix` list of another length than `sentences`.
        """
        options = decode_options(self.options, **changes) if changes else self.options
        check_engine_options(options, self.exact_scores)
        sentences = list(sentences)
        n_best = options.num_hypotheses
        if target_prefix is not None and len(target_prefix) != len(sentences):
            raise ValueError(f"`target_prefix` has {len(target_prefix)} items and "
                             f"`sentences` {len(sentences)}: one prefix per source")
        translator = self.translator
        if options.sampling is not None and options.seed is not None:
            # CTranslate2 seeds a translator's generators when it is built: a seeded
            # call loads the model once more.
            self._ctranslate2.set_random_seed(options.seed)
            translator = self._ctranslate2.Translator(self.model_dir, **self._engine)
        keep = options.max_source_length - 1
        sources = [self._pieces("source", text) for text in sentences]
        self.truncated_indices = [i for i, pieces in enumerate(sources) if len(pieces) > keep]
        sources = [pieces[:keep] for pieces in sources]
        if self.truncated_indices:
            logger.warning("%d of %d sources were longer than %d subword pieces and were cut "
                           "to that length (max_source_length=%d, EOS included)",
                           len(self.truncated_indices), len(sentences), keep,
                           options.max_source_length)
        prefixes = [self._pieces("target", p) if p else []
                    for p in (target_prefix or [None] * len(sentences))]
        # The graph's own limits (float32 ceil included), so both stop at the same length.
        limits = max_length_from_source(
            [len(p) + 1 for p in sources], ratio=options.max_length_ratio,
            offset=options.max_length_offset).numpy().tolist()
        if target_prefix is not None:  # as `Translator` refuses them
            check_prefix_lengths([len(p) for p in prefixes],
                                 [limit if source else 0 for source, limit in
                                  zip(sources, limits)], target_prefix)
        results = [[("", 0.0)] + [("", float("-inf"))] * (n_best - 1) for _ in sentences]
        order = sorted((i for i, p in enumerate(sources) if p), key=lambda i: len(sources[i]))
        # One hypothesis per source (greedy or sampled): full batches, outputs cut at
        # their own limits (module docstring); a beam: one limit per batch.
        one = options.beam_size == 1
        for group in _batches(order, None if one else limits, options.batch_size):
            search = self._search_options(options, max(limits[i] for i in group))
            group_sources = [sources[i] for i in group]
            group_prefixes = [prefixes[i] for i in group]
            outputs = translator.translate_batch(
                group_sources, target_prefix=group_prefixes if any(group_prefixes) else None,
                **search)
            prefix_scores = self._prefix_scores(group_sources, group_prefixes)
            hypotheses = [[(list(pieces), float(score) + prefix_score)
                           for pieces, score in zip(output.hypotheses, output.scores)]
                          for output, prefix_score in zip(outputs, prefix_scores)]
            if one:
                self._cut_at_limits(translator, group_sources, hypotheses,
                                    [limits[i] for i in group])
            for index, rows in zip(group, hypotheses):
                rows = [(self._text(pieces), score) for pieces, score in rows]
                rows += [("", float("-inf"))] * (n_best - len(rows))
                results[index] = rows
        if n_best == 1:
            return [row[0] if with_scores else row[0][0] for row in results]
        return [row if with_scores else [text for text, _ in row] for row in results]


def _forced_scores(translator, sources, targets):
    """Each target's log-probability under forced decoding (`score_batch`), without the
    EOS score_batch appends."""
    return [float(sum(result.log_probs[:-1]))
            for result in translator.score_batch(sources, targets)]


def _batches(order, limits, batch_size):
    """Batches of at most `batch_size` of `order` (sources sorted by length), each of one
    output limit unless `limits` is None: CTranslate2 takes one `max_decoding_length` per
    call, and a beam that reaches its limit is decided there (a longer limit, then a
    cut, gives other hypotheses and scores)."""
    batch = []
    for index in order:
        if batch and (len(batch) == batch_size
                      or limits is not None and limits[index] != limits[batch[0]]):
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


__all__ = ["SUPPORTED_OPTIONS", "CTranslate2Translator", "check_engine_options",
           "read_export_metadata"]
