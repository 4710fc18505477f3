"""`tf-outheads shortlist`: a run's lexical shortlist (`tf_outheads.decoding.selection`),
built from its training pairs, stored in the run directory, and measured on dev.

The pairs are the ones its tokenizers learnt from (`TrainingData.sample`: the cleaned
training split, or a seeded sample of a streamed corpus), cut into the run's pieces and
aligned with eflomal where it is installed (the `align` extra), else counted by
sentence co-occurrence (which favours frequent pieces; the command says which).
"""

import os

import numpy as np

from tf_outheads import data as tfo_data
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


def load_run_shortlist(run_dir, path=None):
    """The run's stored shortlist (`path`, default `RUN/shortlist.npz`), checked against
    its tokenizers.

    Raises:
        FileNotFoundError: naming the file and the command that builds it.
        ValueError: it belongs to other tokenizers.
    """
    path = path or shortlist_path(run_dir)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no shortlist (build one: tf-outheads shortlist "
                                f"--run-dir {run_dir})")
    shortlist = Shortlist.load(path)
    shortlist.check_tokenizers(*tfo_data.load_tokenizers(run_dir), origin=path)
    return shortlist


def shortlist_recall(shortlist, source_tokenizer, target_tokenizer, sources, targets,
                     batch_size=64):
    """On parallel text, batched as `Translator` batches (sources sorted by length):
    `{"recall": share of the reference pieces (and EOS) among their batch's candidates,
    "candidates": mean candidates per batch, "vocabulary": V, "batches": n}`."""
    source_ids = source_tokenizer.tokenize(list(sources)).to_list()
    target_ids = target_tokenizer.tokenize(list(targets)).to_list()
    order = np.argsort([len(row) for row in source_ids], kind="stable")
    found = total = 0
    sizes = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(source_ids[i]) for i in rows) + 1
        batch = np.zeros((len(rows), width), dtype="int32")
        for k, i in enumerate(rows):
            batch[k, :len(source_ids[i])] = source_ids[i]
            batch[k, len(source_ids[i])] = 3  # </s>
        candidates = set(shortlist.candidates(batch).numpy().tolist())
        sizes.append(len(candidates))
        for i in rows:
            reference = target_ids[i] + [3]
            found += sum(piece in candidates for piece in reference)
            total += len(reference)
    return {"recall": found / max(total, 1), "candidates": float(np.mean(sizes)),
            "vocabulary": shortlist.target_vocabulary_size, "batches": len(sizes)}


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


__all__ = ["build_run_shortlist", "load_run_shortlist", "report_dev_recall",
           "shortlist_path", "shortlist_recall"]
