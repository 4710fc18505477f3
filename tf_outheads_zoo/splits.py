"""The corpus splits of a run (its `DataConfig`): read in memory, cleaned, or streamed.

`read_split` (one split, known boilerplate stripped: training, the BLEU callback,
`evaluate`, `compare` and the study all score against the same references),
`load_splits`, `cleaning_rules`, `TrainingData` (the training set in memory or
streamed from text files) and `tokenizer_seed`.
"""

import os

from tf_outheads import data as tfo_data
from tf_outheads_zoo.config import data_set
from tf_outheads_zoo.schema import ConfigError


def read_split(data_config, split, log=print):
    """One split ("train", "dev" or "test") in memory, with known target boilerplate stripped.

    The set is `data.<split>` (text files or a TSV split) or, when that is
    None, the split of `data.corpus` (`tf_outheads_zoo.config.data_set`).
    The same function serves training, the BLEU callback, `evaluate` and
    `compare`, so hypotheses are always scored against the references the
    model trained on. Text files are read whole: for a training set too large
    for memory, `TrainingData` streams it instead.
    """
    spec = data_set(data_config, split)
    if spec["kind"] == "tsv":
        corpus = tfo_data.read_tsv(spec["path"], source=spec["source"], target=spec["target"],
                                   references=tuple(spec["references"]), split=spec["split"])
    else:
        parts = []
        for index, (source, target) in enumerate(spec["pairs"]):
            names = _reference_names(target, spec["references"]) if index == 0 else {}
            parts.append(tfo_data.read_parallel_files(source, target, names))
        corpus = parts[0] if len(parts) == 1 else tfo_data.ParallelCorpus(
            sources=[t for part in parts for t in part.sources],
            targets=[t for part in parts for t in part.targets],
            ids=[i for part in parts for i in part.ids],
            origin=" + ".join(part.origin for part in parts),
            target_name=parts[0].target_name)
    suffixes = data_config.strip_target_suffixes or ()
    if suffixes:
        corpus, counts = tfo_data.strip_suffixes(corpus, suffixes, fields=("targets",))
        removed = sum(counts.values())
        if removed:
            log(f"[data] {split}: stripped appended boilerplate from {removed} of "
                f"{len(corpus)} {corpus.target_name} sentences "
                f"({', '.join(f'{n}× {s[:30]!r}' for s, n in counts.items() if n)})")
    return corpus


def _reference_names(target, references):
    """`{name: path}` of a text set's extra references: file names, distinct from the target's."""
    names = {}
    for path in references:
        name = os.path.basename(path)
        if name == os.path.basename(target) or name in names:
            name = f"{name}#{len(names) + 1}"
        names[name] = path
    return names


def cleaning_rules(data_config):
    """`tf_outheads.data.CleaningRules` of `data_config`: what `load_splits` and the stream drop."""
    suffixes = tuple(data_config.strip_target_suffixes or ())
    return tfo_data.CleaningRules(
        max_length=data_config.max_length, max_length_ratio=data_config.max_length_ratio,
        # Boilerplate left inside a verse (two train verses whose WEB text
        # is only repeated headings) marks a broken pair: drop it, counted.
        drop_containing=suffixes, strip_target_suffixes=suffixes)


def load_splits(data_config, log=print):
    """Read train/dev/test into memory; clean the training split only."""
    splits = {split: read_split(data_config, split, log=log) for split in ("dev", "test")}
    splits["train"] = load_train_split(data_config, log=log)
    log(f"[data] dev {len(splits['dev'])} pairs, test {len(splits['test'])}")
    return splits


def load_train_split(data_config, log=print):
    """The training split in memory, cleaned by its rules (`cleaning_rules`)."""
    train = read_split(data_config, "train", log=log)
    rules = cleaning_rules(data_config)
    cleaned, report = tfo_data.clean(
        train, max_length=rules.max_length, max_length_ratio=rules.max_length_ratio,
        drop_containing=rules.drop_containing)
    log(f"[data] {train.origin}: train {len(train)} pairs")
    log(f"[data] cleaning of train: {report}")
    return cleaned


def _sample(corpus, size, seed):
    """At most `size` pairs of `corpus`, in corpus order; all of them when fewer. The
    `tf_outheads.data.Reservoir` sample the streaming scan draws: the same pairs and seed
    give the same sample from a TSV as from text files."""
    if size is None or len(corpus) <= size:
        return corpus
    reservoir = tfo_data.Reservoir(size, seed)
    for index in range(len(corpus)):
        slot = reservoir.next_slot()
        if slot is not None:
            reservoir.put(slot, index)
    return corpus.select(reservoir.items())


class TrainingData:
    """The training set of a run (its `DataConfig`): in memory (a TSV split), or streamed
    from text files.

    `sample` is what SentencePiece (and word alignment, word vectors) learn
    from: the cleaned pairs, or a seeded sample of `data.tokenizer_sample` of
    them (`tf_outheads.data.Reservoir` in both forms). `dataset(...)` gives the
    training batches: `make_training_dataset` in memory, `make_text_dataset`
    streamed; the same pairs give the same batches (tests/zoo/test_text_corpus.py).
    """

    def __init__(self, data_config, seed, log=print):
        self.data_config = data_config
        spec = data_set(data_config, "train")
        self.streamed = spec["kind"] == "files"
        sample_size = data_config.tokenizer_sample
        if self.streamed:
            self.rules = cleaning_rules(data_config)
            scan = tfo_data.scan_parallel_files(
                spec["pairs"], self.rules, sample_size=sample_size or 2**62, seed=seed, log=log)
            self.pairs = scan.pairs
            self.size = scan.report.kept
            files = ", ".join(f"{s} -> {t} ({n:,} lines)"
                              for (s, t), n in zip(scan.pairs, scan.lines))
            log(f"[data] train (streamed from text files): {files}; checked in "
                f"{scan.seconds:.0f} s")
            if scan.stripped:
                log(f"[data] train: stripped appended boilerplate from {scan.stripped} "
                    f"target sentences")
            log(f"[data] cleaning of train: {scan.report}")
            self.sample = scan.sample
            self.corpus = None
        else:
            self.corpus = load_train_split(data_config, log=log)
            self.size = len(self.corpus)
            self.sample = _sample(self.corpus, sample_size, seed)
        if len(self.sample) < self.size:
            log(f"[data] tokenizer sample: {len(self.sample):,} of {self.size:,} pairs "
                f"(data.tokenizer_sample)")

    def dataset(self, source_tokenizer, target_tokenizer, seed, num_shards=1, shard_index=0):
        """Training batches; with `num_shards` > 1 (streamed only) this worker's shard, in
        batches of `data.batch_tokens / num_shards` padded tokens (its share of the
        global batch)."""
        data_config = self.data_config
        if num_shards > 1 and not self.streamed:
            raise ValueError("Only a streamed training set is read in shards.")
        batching = dict(batch_tokens=data_config.batch_tokens // num_shards,
                        max_length=data_config.max_sequence_length,
                        bucket_width=data_config.bucket_width,  # 8: runs stored before it
                        shuffle_buffer=data_config.shuffle_buffer,
                        shuffle=True, seed=seed, repeat=True,
                        subword_sampling=data_config.subword_sampling)
        if self.streamed:
            if batching["shuffle_buffer"] is None:
                raise ConfigError("data.shuffle_buffer None (the whole corpus) is for corpora "
                                  "held in memory; a streamed training set needs a number "
                                  "(e.g. 100000).")
            return tfo_data.make_text_dataset(self.pairs, source_tokenizer, target_tokenizer,
                                              self.rules, num_shards=num_shards,
                                              shard_index=shard_index, **batching)
        return tfo_data.dataset_from_corpus(self.corpus, source_tokenizer, target_tokenizer,
                                            shuffle_indices=data_config.shuffle_indices,
                                            **batching)


def tokenizer_seed(config):
    """SentencePiece's seed: `data.tokenizer_seed`, or `train.seed` when that is `None`.

    Runs that differ only in `train.seed` cut the corpus into the same pieces
    when they share `data.tokenizer_seed` (seed studies, `tf_outheads_zoo.study`).
    """
    seed = config.data.tokenizer_seed
    return config.train.seed if seed is None else seed
