"""`tf-outheads shortlist`: a run's vocabulary selection, stored in the run directory
and measured on dev.

- `--method lexical` (`tf_outheads.decoding.selection`): a shortlist built from the
  training pairs the tokenizers learnt from (`TrainingData.sample`: the cleaned training
  split, or a seeded sample of a streamed corpus), cut into the run's pieces and aligned
  with eflomal where it is installed (the `align` extra), else counted by sentence
  co-occurrence (which favours frequent pieces; the command says which).
- `--method neural` (`tf_outheads.decoding.NeuralSelection`): the threshold on a model's
  own selection head (a run trained with `model.selection`, e.g. the `-nvs` presets)
  whose recall of the dev reference pieces reaches the one asked for; the recall and
  size at each threshold are printed.
"""

import os

import numpy as np

from tf_outheads import data as tfo_data
from tf_outheads.decoding.neural_selection import SELECTION_FILE, NeuralSelection
from tf_outheads.decoding.selection import SHORTLIST_FILE, Shortlist, build_shortlist
from tf_outheads_zoo.runs import stored_run
from tf_outheads_zoo.splits import TrainingData, read_split, tokenizer_seed


def shortlist_path(run_dir):
    return os.path.join(run_dir, SHORTLIST_FILE)


def _aligner():
    try:
        import eflomal  # noqa: F401
    except ImportError:
        return "co-occurrence"
    return "eflomal"


def build_run_shortlist(run_dir, top_k=50, frequent=100, bucket=64, aligner=None, log=print):
    """Build, store (`RUN/shortlist.npz`) and return the run's shortlist.

    Args:
        aligner: `"eflomal"`, `"co-occurrence"` or `None` (eflomal where installed).

    Raises:
        ValueError: naming the argument, for `top_k`, `frequent`, `bucket` or
            `aligner` out of range.
        FileNotFoundError: no run settings or tokenizers in `run_dir`.
    """
    from tf_outheads.data.alignment_links import eflomal_links

    if aligner not in (None, "eflomal", "co-occurrence"):
        raise ValueError("`aligner` must be 'eflomal', 'co-occurrence' or None. Received: "
                         f"aligner={aligner!r}")
    aligner = aligner or _aligner()
    config = stored_run(run_dir, required=True)[1]
    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(run_dir)
    pairs = TrainingData(config.data, seed=tokenizer_seed(config), log=lambda *_: None).sample
    source_ids = source_tokenizer.tokenize(list(pairs.sources)).to_list()
    target_ids = target_tokenizer.tokenize(list(pairs.targets)).to_list()
    links = None
    if aligner == "eflomal":
        source_pieces = [[str(i) for i in row] for row in source_ids]
        target_pieces = [[str(i) for i in row] for row in target_ids]
        links = eflomal_links(source_pieces, target_pieces, log=log)
    shortlist = build_shortlist(
        source_ids, target_ids, source_tokenizer.vocab_size, target_tokenizer.vocab_size,
        links=links, top_k=top_k, frequent=frequent, bucket=bucket,
        source_fingerprint=source_tokenizer.fingerprint,
        target_fingerprint=target_tokenizer.fingerprint)
    path = shortlist.save(shortlist_path(run_dir))
    log(f"[shortlist] {len(source_ids):,} training pairs aligned by {aligner}: top {top_k} "
        f"target pieces per source piece + the {frequent} most frequent → {path}")
    return shortlist


def selection_path(run_dir):
    return os.path.join(run_dir, SELECTION_FILE)


def load_run_shortlist(run_dir, path=None):
    """The run's stored selection: `path` (a `.json` file is a `NeuralSelection`, anything
    else a `Shortlist`); without it `RUN/selection.json` where there is one, else
    `RUN/shortlist.npz`. A shortlist is checked against the run's tokenizers (a neural
    selection against the model, when a `Translator` takes it).

    Raises:
        FileNotFoundError: naming the file and the command that builds it.
        ValueError: it belongs to other tokenizers, or is not a selection.
    """
    if not path:
        path = (selection_path(run_dir) if os.path.exists(selection_path(run_dir))
                else shortlist_path(run_dir))
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no shortlist (build one: tf-outheads shortlist "
                                f"--run-dir {run_dir} [--method neural])")
    if path.endswith(".json"):
        return NeuralSelection.load(path)
    shortlist = Shortlist.load(path)
    shortlist.check_tokenizers(*tfo_data.load_tokenizers(run_dir), origin=path)
    return shortlist


def _batches(source_tokenizer, target_tokenizer, sources, targets, batch_size):
    """`(source ids (b, S) padded and ended by </s>, reference pieces with </s>)` per
    batch, batched as `Translator` batches (sources sorted by length)."""
    source_ids = source_tokenizer.tokenize(list(sources)).to_list()
    target_ids = target_tokenizer.tokenize(list(targets)).to_list()
    order = np.argsort([len(row) for row in source_ids], kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(source_ids[i]) for i in rows) + 1
        batch = np.zeros((len(rows), width), dtype="int32")
        for k, i in enumerate(rows):
            batch[k, :len(source_ids[i])] = source_ids[i]
            batch[k, len(source_ids[i])] = 3  # </s>
        yield batch, [target_ids[i] + [3] for i in rows]


def _recall(candidate_sets, references, vocabulary):
    """`{"recall", "candidates", "vocabulary", "batches"}` of candidate sets per batch."""
    found = sum(piece in candidates for candidates, batch in zip(candidate_sets, references)
                for reference in batch for piece in reference)
    total = sum(len(reference) for batch in references for reference in batch)
    return {"recall": found / max(total, 1),
            "candidates": float(np.mean([len(c) for c in candidate_sets])),
            "vocabulary": vocabulary, "batches": len(candidate_sets)}


def shortlist_recall(shortlist, source_tokenizer, target_tokenizer, sources, targets,
                     batch_size=64):
    """On parallel text, batched as `Translator` batches (sources sorted by length):
    `{"recall": share of the reference pieces (and EOS) among their batch's candidates,
    "candidates": mean candidates per batch, "vocabulary": V, "batches": n}`."""
    candidate_sets, references = [], []
    for batch, reference in _batches(source_tokenizer, target_tokenizer, sources, targets,
                                     batch_size):
        candidate_sets.append(set(shortlist.candidates(batch).numpy().tolist()))
        references.append(reference)
    return _recall(candidate_sets, references, shortlist.target_vocabulary_size)


# The thresholds `tf-outheads shortlist --method neural` measures, loosest last.
THRESHOLDS = (0.9, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)


def neural_selection_recall(model, source_tokenizer, target_tokenizer, sources, targets,
                            thresholds=THRESHOLDS, bucket=64, batch_size=64):
    """`{threshold: shortlist_recall-like dict}` of a model's selection head on parallel
    text (the encoder runs once per batch for every threshold)."""
    selections = {t: NeuralSelection(t, bucket) for t in thresholds}
    candidate_sets = {t: [] for t in thresholds}
    references = []
    for batch, reference in _batches(source_tokenizer, target_tokenizer, sources, targets,
                                     batch_size):
        probabilities = model.selection_probabilities(batch)
        for threshold, selection in selections.items():
            candidate_sets[threshold].append(set(selection.candidates(
                batch, probabilities=probabilities).numpy().tolist()))
        references.append(reference)
    return {t: _recall(candidate_sets[t], references, model.target_vocabulary_size)
            for t in thresholds}


def build_run_selection(run_dir, recall=0.99, bucket=64, log=print):
    """Measure the run's selection head on dev at `THRESHOLDS`, store (`RUN/selection.json`)
    and return the `NeuralSelection` of the largest threshold whose recall reaches
    `recall` (the loosest measured, saying so, when none does).

    Raises:
        ValueError: `recall` outside (0, 1], `bucket` < 1, or a model without a
            selection head (naming the run).
    """
    from tf_outheads_zoo.runs import load_run

    if not 0.0 < recall <= 1.0:
        raise ValueError(f"`recall` must be in (0, 1]. Received: recall={recall!r}")
    NeuralSelection(bucket=bucket)  # checks it
    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    try:
        NeuralSelection().check(model, source_tokenizer, target_tokenizer)
    except ValueError as error:
        raise ValueError(f"{run_dir}: {error}") from None
    dev = read_split(config.data, "dev", log=lambda *_: None)
    table = neural_selection_recall(model, source_tokenizer, target_tokenizer, dev.sources,
                                    dev.targets, bucket=bucket,
                                    batch_size=config.decode.batch_size)
    log(f"[shortlist] dev, neural selection (batches of {config.decode.batch_size}, "
        f"{model.target_vocabulary_size:,} pieces): threshold → recall of the reference "
        "pieces, candidates per batch")
    for threshold, result in table.items():
        log(f"[shortlist]   {threshold:<6g} {result['recall']:7.2%} "
            f"{result['candidates']:8.0f}")
    reaching = [t for t, result in table.items() if result["recall"] >= recall]
    threshold = reaching[0] if reaching else THRESHOLDS[-1]
    selection = NeuralSelection(threshold, bucket)
    path = selection.save(selection_path(run_dir))
    log(f"[shortlist] threshold {threshold:g}: {table[threshold]['recall']:.2%} recall, "
        f"{table[threshold]['candidates']:.0f} candidates"
        + ("" if reaching else f" (no threshold reaches {recall:.2%}: the loosest)")
        + f" → {path}")
    share = table[threshold]["candidates"] / model.target_vocabulary_size
    if share > 0.5:
        # The reference pieces a head never learned to predict (rare ones) come in only
        # with most of the vocabulary: at 32K pieces, 99 % recall kept 94 % of it.
        log(f"[shortlist] warning: this threshold keeps {share:.0%} of the pieces per "
            "batch, so decoding with it is hardly faster than without; a lower --recall "
            "keeps fewer (the table above; the alignment shortlist's recall is a guide)")
    return selection, table


def report_dev_recall(run_dir, shortlist, log=print):
    """Print and return `shortlist_recall` on the run's dev set."""
    config = stored_run(run_dir, required=True)[1]
    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(run_dir)
    dev = read_split(config.data, "dev", log=lambda *_: None)
    result = shortlist_recall(shortlist, source_tokenizer, target_tokenizer, dev.sources,
                              dev.targets, batch_size=config.decode.batch_size)
    log(f"[shortlist] dev: {result['recall']:.2%} of the reference pieces among their "
        f"batch's candidates; {result['candidates']:.0f} candidates of "
        f"{result['vocabulary']:,} pieces per batch of {config.decode.batch_size} "
        f"({result['batches']} batches)")
    return result


__all__ = ["THRESHOLDS", "build_run_selection", "build_run_shortlist", "load_run_shortlist",
           "neural_selection_recall", "report_dev_recall", "selection_path", "shortlist_path",
           "shortlist_recall"]
