"""The main job: train a preset on a corpus, report dev/test BLEU, write translations.

Everything here is a few calls into `tf_outheads`; the CLI (`tf_outheads_zoo.cli`) is a thin
layer over `run_training`, `translate_file` and `evaluate_files`.
"""

import contextlib
import csv
import fcntl
import functools
import json
import os
import time
import zipfile

import keras
import tensorflow as tf

from tf_outheads import data as tfo_data
from tf_outheads.data.tokenizer import CONFIG_FILENAME as TOKENIZER_FILE
from tf_outheads.decoding.translator import Translator
from tf_outheads.losses.embedding_regression import CosineEmbeddingLoss, MSEEmbeddingLoss
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT, ReWELoss
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.metrics import evaluate_translations, format_report, parameter_report
from tf_outheads.training import backup as tfo_backup
from tf_outheads.training import strategy as tfo_strategy
from tf_outheads.training.callbacks import TimeLimit, stopped_by
from tf_outheads.training.translation import compile_for_translation, translation_callbacks
from tf_outheads.training.optimizers import LazyAdam
from tf_outheads.training.schedules import InverseSquareRootSchedule
from tf_outheads.training.trainer import fit as train_model
from tf_outheads_zoo.config import ConfigError, data_set, read_run_config, read_stored_preset
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.plots import write_line_plot
from tf_outheads_zoo.presets import DEFAULT_PRESET, apply_overrides, get_preset
from tf_outheads_zoo.shared_private import FIGURE_FILE, PAIRS_FILE, resolve_pairs, write_pair_figure
from tf_outheads_zoo.transformer import TransformerSeq2Seq

MODEL_TYPES = {"lstm": LSTMSeq2Seq, "transformer": TransformerSeq2Seq}
# `train.learning_rate_schedule["name"]` → schedule class.
LEARNING_RATE_SCHEDULES = {"inverse_sqrt": InverseSquareRootSchedule}
# `train.loss` by name: losses of heads that need their own.
LOSSES = {"vmf": VMFLoss, "cosine": CosineEmbeddingLoss, "mse": MSEEmbeddingLoss}
# `train.optimizer` by name.
OPTIMIZERS = {"adam": keras.optimizers.Adam, "lazy_adam": LazyAdam}
# Settings a resumed run may change: budgets, evaluation, backups, the strategy
# (every other `data`, `model` and `train` key shapes the model, its variables,
# its pieces or its data order, which the run's backups and tokenizer hold).
RESUMABLE_TRAIN_KEYS = frozenset({
    "max_steps", "max_minutes", "epochs", "steps_per_epoch", "patience",
    "backup_every_n_steps", "keep_backups", "nonfinite", "max_skipped_share", "max_loss",
    "average_last", "strategy",
    "num_gpus", "jit_compile", "steps_per_execution"})
PRESET_FILE = "preset.json"
# The fingerprints of the data files a run reads (`check_data_fingerprints`).
DATA_FILES = "data_files.json"
# Inside a run's `.keras` file: the fingerprints of its tokenizers (`save_model`).
MODEL_METADATA = "tf_outheads.json"
LOCK_FILE = ".lock"


class RunDirectoryError(ValueError):
    """A run directory that cannot take this command: another preset, or in use."""


def stored_preset(run_dir):
    """The `preset.json` of `run_dir` (`{"name": ..., "data": ..., ...}`), or `None`.

    Read through the schema (`tf_outheads_zoo.config.read_stored_preset`): a file written
    before a key existed gets the value the run trained with (`data.bucket_width`
    8), so the run resumes as it was trained.
    """
    path = os.path.join(run_dir, PRESET_FILE)
    if not os.path.exists(path):
        return None
    try:
        name, preset = read_stored_preset(path)
    except ConfigError:  # a key the schema does not know: the message names file and key
        raise
    except ValueError as error:
        raise RunDirectoryError(f"{path}: not a readable preset file ({error})") from None
    return {"name": name, **preset}


def holds_run(run_dir):
    """Whether `run_dir` holds a run: a tokenizer, a backup, training curves, a
    trained model or results. A directory with only `preset.json` (a first start
    that failed before its tokenizer was built) holds none."""
    if any(os.path.exists(os.path.join(run_dir, name)) for name in (
            TOKENIZER_FILE, "loss_curves.csv", "model.keras", "results.json")):
        return True
    backup_dir = os.path.join(run_dir, "backup")
    return os.path.isdir(backup_dir) and bool(tfo_backup.BackupManager(backup_dir).checkpoints())


def resolve_preset(preset_name, run_dir, overrides=None, run_file=None, log=print):
    """`(name, preset)` for `tf-outheads train` on `run_dir`, refusing a mismatch.

    With `run_file` (a user's YAML/JSON run file, `tf_outheads_zoo.config.load_run_config`;
    not together with `preset_name`), the settings are the file's, then `overrides`;
    the name is the file's `preset:` (`None` when it starts from the defaults).

    Without `preset_name`, a run directory that has a `preset.json` supplies
    its own preset (so `train --run-dir R` resumes R as it was trained), else
    the default preset. With one, the stored preset must agree with it, and
    with `overrides`, on every setting but `RESUMABLE_TRAIN_KEYS` and the
    `decode` section, when the directory holds a run (`holds_run`); a
    `preset.json` alone (a first start that failed) is replaced by the new
    settings, with one logged line. Nothing is written.

    Raises:
        RunDirectoryError: naming the run directory, both presets and the
            settings that differ.
    """
    stored = stored_preset(run_dir)
    if run_file is not None:
        if preset_name is not None:
            raise ConfigError(f"{run_file}: a run file and a preset ({preset_name}) both "
                              "given; name the preset inside the run file (preset: NAME). "
                              f"Received: preset={preset_name!r}, run_file={run_file!r}")
        name, config = read_run_config(run_file, overrides)
        preset = config.to_dict()
    elif preset_name is None and stored is not None:
        name = stored.get("name") or DEFAULT_PRESET
        sections = {key: value for key, value in stored.items() if key != "name"}
        preset = apply_overrides(sections, overrides, f"{name} (from {run_dir})")
    else:
        name = preset_name or DEFAULT_PRESET
        preset = get_preset(name, overrides)
    if stored is not None:
        wanted = json.loads(json.dumps(preset, default=str))
        differ = sorted(
            f"{section}.{key}"
            for section in ("data", "model", "train")
            for key in set(wanted.get(section, {})) | set(stored.get(section, {}))
            if not (section == "train" and key in RESUMABLE_TRAIN_KEYS)
            and wanted.get(section, {}).get(key) != stored.get(section, {}).get(key))
        if differ and not holds_run(run_dir):
            log(f"[train] {run_dir}: its {PRESET_FILE} is from a start that built no tokenizer "
                f"and no backup; this command's settings replace it ({', '.join(differ[:8])}"
                f"{', ...' if len(differ) > 8 else ''})")
        elif differ:
            raise RunDirectoryError(
                f"{run_dir} holds a run of preset {stored.get('name')!r}; this command asks "
                f"for {name!r} with other settings ({', '.join(differ[:8])}"
                f"{', ...' if len(differ) > 8 else ''}), which its tokenizer and backups "
                f"do not fit. Resume it with `tf-outheads train --run-dir {run_dir}` (its own "
                "preset; budgets, evaluation and backup settings may change), or give a new "
                "--run-dir. Nothing was changed.")
    return name, preset


def data_files(data_config):
    """`[(key, path), ...]`: every data file a run of `data_config` reads, each once, with
    the setting that names it (`data.corpus`, `data.train.source`, `data.dev.references[0]`,
    `data.target_vectors.path`...): the train/dev/test text files or TSV, the embedded
    corpus included."""
    files = []
    for split in ("train", "dev", "test"):
        spec = data_set(data_config, split)
        key = f"data.{split}"
        if spec["kind"] == "tsv":
            files.append((f"{key}.tsv" if data_config.get(split) else "data.corpus",
                          spec["path"]))
            continue
        several = len(spec["pairs"]) > 1
        for index, pair in enumerate(spec["pairs"]):
            for side, path in zip(("source", "target"), pair):
                files.append((f"{key}{f'[{index}]' if several else ''}.{side}", path))
        files += [(f"{key}.references[{index}]", path)
                  for index, path in enumerate(spec["references"])]
    vectors = (data_config.get("target_vectors") or {}).get("path")
    if vectors:
        files.append(("data.target_vectors.path", vectors))
    seen = set()
    return [(key, path) for key, path in files if not (path in seen or seen.add(path))]


def check_data_files(data_config, run_dir):
    """Refuses a run whose data files (`data_files`) are missing or unreadable, before
    anything is written to `run_dir`.

    Raises:
        ConfigError: naming the setting and the path.
    """
    for key, path in data_files(data_config):
        try:
            with open(path, "rb") as stream:
                stream.read(1)
        except OSError as error:
            reason = ("no such file" if isinstance(error, FileNotFoundError)
                      else error.strerror or type(error).__name__)
            setting = ".".join(key.split("[")[0].split(".")[:2])  # data.train, data.corpus
            raise ConfigError(f"{key}: {path}: {reason}. Correct {setting} (in the run file, "
                              f"or with --set {setting}=...) or put the file there; nothing "
                              f"was written to {run_dir}.") from None


def check_data_fingerprints(run_dir, data_config, log=print):
    """The fingerprints (`tf_outheads.data.file_fingerprint`) of the data files of
    `data_config`, checked against those `run_dir` recorded (`DATA_FILES`) when it holds a
    run (`holds_run`); returns `{"files": {path: {"key", "size", "mtime", ...}}}`, what
    `run_training` records there.

    A resume restores read positions in these files; if one changed in between, sources
    would be paired with other lines' targets. A file whose size or hashed bytes
    differ is refused; a new modification time alone is logged and accepted. A run
    recorded before data files were fingerprinted resumes unchecked (logged), and
    its files are recorded from then on.

    Raises:
        RunDirectoryError: naming the file, its setting and what changed.
    """
    path = os.path.join(run_dir, DATA_FILES)
    recorded = {}
    if holds_run(run_dir):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                recorded = json.load(f).get("files", {})
        else:
            log(f"[data] {run_dir} holds a run from before data files were fingerprinted: "
                f"resumed unchecked; their fingerprints are recorded now in {path}")
    files = {}
    for key, file in data_files(data_config):
        before = recorded.get(file)
        if before is None:
            files[file] = {"key": key, **tfo_data.file_fingerprint(file)}
            continue
        changes, now = tfo_data.fingerprint_changes(before, file)
        if changes:
            raise RunDirectoryError(
                f"{file} ({key}) changed since {run_dir} started training on it: "
                f"{', '.join(changes)}. A resume restores read positions in the data, which "
                "would pair sources with other lines' targets. Put the file back as it was to "
                "resume, or train on the changed data in a new run directory (another "
                f"--run-dir). Nothing was changed in {run_dir}.")
        if now["mtime"] != before.get("mtime"):
            log(f"[data] {file}: modification time changed, same size and SHA-256: resuming")
        files[file] = {"key": key, **now}
    return {"files": files}


@contextlib.contextmanager
def run_directory_lock(run_dir):
    """Holds an exclusive lock on `run_dir` (`.lock`, `flock`: released when the process
    ends, even by a kill) for as long as the block runs.

    Raises:
        RunDirectoryError: another process holds it; the message names its PID.
    """
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, LOCK_FILE)
    stream = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            stream.seek(0)
            owner = stream.read().strip() or "unknown"
            raise RunDirectoryError(
                f"{run_dir} is in use by another tf-outheads process (pid {owner}; lock "
                f"{path}). Wait for it to end, or give another --run-dir.") from None
        stream.seek(0)
        stream.truncate()
        stream.write(str(os.getpid()))
        stream.flush()
        yield path
    finally:
        stream.close()


def finished_run(run_dir, backup_dir, train_config):
    """The stored results when `run_dir` already trained to its budget, else `None`.

    Finished: `results.json` exists, no backup is newer than its step, and
    `train.max_steps` (if set) is at most that step, or, with only a time
    budget, the newest backup has spent it.
    """
    path = os.path.join(run_dir, "results.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    steps = int(results.get("steps", 0))
    backups = (tfo_backup.BackupManager(backup_dir).checkpoints()
               if os.path.isdir(backup_dir) else [])
    if backups and backups[-1][0] > steps:
        return None
    if train_config.get("max_steps") is not None:
        return results if steps >= train_config["max_steps"] else None
    if train_config.get("max_minutes") and backups:
        state = tfo_backup.verify_backup(backups[-1][1]).get("state") or {}
        seconds = (state.get("callbacks") or {}).get("TimeLimit", {}).get("seconds", 0.0)
        return results if seconds >= 60.0 * train_config["max_minutes"] else None
    return None


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
    suffixes = data_config.get("strip_target_suffixes") or ()
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
    """`tf_outheads.data.CleaningRules` of the preset: what `load_splits` and the stream drop."""
    suffixes = tuple(data_config.get("strip_target_suffixes") or ())
    return tfo_data.CleaningRules(
        max_length=data_config["max_length"], max_length_ratio=data_config["max_length_ratio"],
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
    """The training split in memory, cleaned by the preset's rules (`cleaning_rules`)."""
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
    """The training set of a preset: in memory (a TSV split), or streamed from text files.

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
        sample_size = data_config.get("tokenizer_sample")
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
        batching = dict(batch_tokens=data_config["batch_tokens"] // num_shards,
                        max_length=data_config["max_sequence_length"],
                        bucket_width=data_config["bucket_width"],  # 8: runs stored before it
                        shuffle_buffer=data_config.get("shuffle_buffer"),
                        shuffle=True, seed=seed, repeat=True)
        if self.streamed:
            if batching["shuffle_buffer"] is None:
                raise ConfigError("data.shuffle_buffer None (the whole corpus) is for corpora "
                                  "held in memory; a streamed training set needs a number "
                                  "(e.g. 100000).")
            return tfo_data.make_text_dataset(self.pairs, source_tokenizer, target_tokenizer,
                                              self.rules, num_shards=num_shards,
                                              shard_index=shard_index, **batching)
        return tfo_data.dataset_from_corpus(self.corpus, source_tokenizer, target_tokenizer,
                                            shuffle_indices=data_config["shuffle_indices"],
                                            **batching)


def tokenizer_seed(preset):
    """SentencePiece's seed: `data.tokenizer_seed`, or `train.seed` when that is `None`.

    Runs that differ only in `train.seed` cut the corpus into the same pieces
    when they share `data.tokenizer_seed` (seed studies, `tf_outheads_zoo.study`).
    """
    seed = preset["data"].get("tokenizer_seed")
    return preset["train"]["seed"] if seed is None else seed


def model_arguments(preset):
    """`(model class, keyword arguments)` of a preset's `model` section: its
    `model_type` picks the class, the other keys are the class's arguments."""
    arguments = dict(preset["model"])
    return MODEL_TYPES[arguments.pop("model_type")], arguments


def build_model(preset, source_vocabulary_size, target_vocabulary_size):
    model_cls, arguments = model_arguments(preset)
    return model_cls(source_vocabulary_size, target_vocabulary_size, **arguments)


def learning_rate(preset):
    """The preset's learning rate: `train.learning_rate`, or its schedule.

    `train.learning_rate_schedule` (optional): `None`, or
    `{"name": "inverse_sqrt", "warmup_steps": 4000, "scale": 1.0}`
    (`tf_outheads.training.InverseSquareRootSchedule`; its `model_dim`
    defaults to the model's `model_dim`, else `hidden_dim`). A schedule
    replaces `train.learning_rate`.
    """
    train_config = preset["train"]
    schedule = train_config.get("learning_rate_schedule")
    if not schedule:
        if train_config.get("learning_rate") is None:
            raise ValueError("train.learning_rate must be a float when there is no "
                             "train.learning_rate_schedule. Received: learning_rate=None")
        return train_config["learning_rate"]
    if not isinstance(schedule, dict) or schedule.get("name") not in LEARNING_RATE_SCHEDULES:
        raise ValueError("train.learning_rate_schedule must be None or {'name': one of "
                         f"{sorted(LEARNING_RATE_SCHEDULES)}, ...options}}. "
                         f"Received: {schedule!r}")
    options = {key: value for key, value in schedule.items() if key != "name"}
    model_config = preset["model"]
    options.setdefault("model_dim", model_config.get("model_dim") or model_config.get("hidden_dim"))
    return LEARNING_RATE_SCHEDULES[schedule["name"]](**options)


def build_optimizer(preset):
    """The preset's Adam (or `LazyAdam`, `train.optimizer: "lazy_adam"`).

    `train` keys: `learning_rate` or `learning_rate_schedule` (see
    `learning_rate`), `adam_beta_2` (`None`: Keras' 0.999; the Transformer's
    0.98), `adam_epsilon` (`None`: Keras' 1e-7; OpenNMT-py and PyTorch 1e-8,
    Vaswani et al. 1e-9), `clipnorm` (each gradient clipped to this norm on
    its own, Keras' `clipnorm`) and `global_clipnorm` (all gradients scaled
    together so that their joint norm is at most this: OpenNMT-py's
    `max_grad_norm`, fairseq's `--clip-norm`). At most one of the two
    clipping keys may be set.
    """
    train_config = preset["train"]
    beta_2, epsilon = train_config.get("adam_beta_2"), train_config.get("adam_epsilon")
    clipnorm, global_clipnorm = train_config.get("clipnorm"), train_config.get("global_clipnorm")
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError("Set at most one of train.clipnorm (per variable) and "
                         "train.global_clipnorm (joint norm of all gradients). "
                         f"Received: clipnorm={clipnorm!r}, global_clipnorm={global_clipnorm!r}")
    name = train_config.get("optimizer") or "adam"
    if name not in OPTIMIZERS:
        raise ValueError(f"train.optimizer must be one of {sorted(OPTIMIZERS)}. "
                         f"Received: optimizer={name!r}")
    return OPTIMIZERS[name](
        learning_rate=learning_rate(preset),
        beta_2=0.999 if beta_2 is None else beta_2,
        epsilon=1e-7 if epsilon is None else epsilon,
        clipnorm=clipnorm,
        global_clipnorm=global_clipnorm,
    )


def training_loss(train_config):
    """`compile_for_translation` keywords for the preset's losses.

    The output layer's loss (`_output_loss`) and, with `train.rewe`
    (`{"weight": λ, "distance": "cosine" | "mse"}`, Eq. 7 of ReWE), the ReWE
    loss of a model built with `model.rewe`.
    """
    keywords = _output_loss(train_config)
    rewe = train_config.get("rewe")
    if rewe:
        if not isinstance(rewe, dict) or set(rewe) - {"weight", "distance"}:
            raise ValueError("train.rewe must be {'weight': λ, 'distance': 'cosine' or 'mse'} "
                             f"or None. Received: {rewe!r}")
        keywords.update(auxiliary_losses={"rewe": ReWELoss(rewe.get("distance", "cosine"))},
                        auxiliary_weights={"rewe": rewe.get("weight", PAPER_REWE_WEIGHT)})
    return keywords


def _output_loss(train_config):
    """`compile_for_translation` keywords for the preset's loss: full or sampled softmax."""
    named = train_config.get("loss")
    if named:
        if not isinstance(named, dict) or named.get("class_name") not in LOSSES:
            raise ValueError(f"train.loss must be {{'class_name': one of {sorted(LOSSES)}, "
                             f"'config': {{...}}}} or None. Received: {named!r}")
        return {"loss": LOSSES[named["class_name"]](**named.get("config", {}))}
    sampled = train_config.get("sampled_softmax")
    if not sampled:
        return {"label_smoothing": train_config["label_smoothing"]}
    if not isinstance(sampled, dict):
        raise ValueError("train.sampled_softmax must be a dict of SampledSoftmaxLoss options "
                         f"(e.g. {{'fraction': 0.05}}) or None. Received: {sampled!r}")
    return {"loss": SampledSoftmaxLoss(label_smoothing=train_config["label_smoothing"],
                                       seed=train_config["seed"], **sampled)}


def prepare_target_vectors(data_config, train, target_tokenizer, run_dir, seed, log=print):
    """The target table of a continuous head: load `path`, or train FastText once.

    Trained vectors are cached in `run_dir/target_vectors.vec` and reused.
    """
    options = data_config.get("target_vectors") or {}
    path = options.get("path")
    if not path:
        path = os.path.join(run_dir, "target_vectors.vec")
        if not os.path.exists(path):
            start = time.time()
            tfo_data.train_word_vectors(train.targets, target_tokenizer, path,
                                        dim=options.get("dim", 300),
                                        epochs=options.get("epochs", 5), seed=seed)
            log(f"[vectors] trained FastText on {len(train)} target sentences "
                f"in {time.time() - start:.0f} s → {path}")
    words, vectors = tfo_data.load_word_vectors(path)
    table = tfo_data.target_embedding_table(target_tokenizer, words, vectors, seed=seed)
    log(f"[vectors] {path}: {table.counts}")
    return table


def run_training(preset_name=None, run_dir=os.path.join("runs", DEFAULT_PRESET), overrides=None,
                 log=print, run_file=None):
    """Train, evaluate on dev and test, write translations; returns the results dict.

    `run_file`: a user's run file (YAML/JSON: `preset:` + the keys it changes,
    `tf_outheads_zoo.config.load_run_config`) instead of `preset_name`.

    `preset_name` `None`: the run directory's own preset (`preset.json`), else
    `DEFAULT_PRESET`. Missing data files are refused before anything is written
    (`check_data_files`); so are a run directory trained with other settings
    (`resolve_preset`; a `preset.json` alone, from a start that failed, is
    replaced), a resume whose data files changed (`check_data_fingerprints`),
    and a directory another process is training in (`run_directory_lock`). A
    run already trained to its budget is not trained again: its stored results
    are returned (`finished_run`).

    Files written to `run_dir`: `preset.json`, `data_files.json` (size,
    modification time and SHA-256 of each data file), the SentencePiece model(s) and
    `tokenizer.json`, `checkpoints/best.weights.h5`, `model.keras` (the best
    dev-BLEU weights, or the average of the last `train.average_last`
    backups), `backup/` (atomic backups: weights, optimizer, data position),
    `logs/` (TensorBoard), `history.csv`, `bleu.jsonl`,
    `dev.hyp`, `test.hyp`, `results.json`, `loss_curves.csv` and
    `loss_curves.svg` (the loss of every step; with a ReWE head NLL and ReWE
    separately); with shared-private embeddings built from `pairs: "auto"`,
    `word_pairs.tsv` and `paired_embeddings_pca.svg` (Liu et al. 2019, Fig. 6). Re-running with the same
    `run_dir` reuses the tokenizer and resumes an interrupted training from
    `backup/` at the step it reached (same next batch, same optimizer state).

    `train.strategy` / `train.num_gpus` choose the `tf.distribute` strategy
    (`tf_outheads.training.make_strategy`), `train.precision` the dtype
    policy. In a multi-worker job (`TF_CONFIG`) every worker runs this with
    the same `run_dir` on a shared filesystem: the chief (worker 0) writes
    `run_dir` and evaluates; the others keep their files in
    `run_dir/workers/<index>/` and return after training.
    """
    start = time.time()
    preset_name, preset = resolve_preset(preset_name, run_dir, overrides, run_file, log=log)
    check_data_files(preset["data"], run_dir)
    train_config = preset["train"]
    strategy = tfo_strategy.make_strategy(train_config["strategy"],
                                          num_gpus=train_config["num_gpus"])
    chief = tfo_strategy.is_chief(strategy)
    backup_dir = os.path.join(run_dir, "backup")
    resource_dir = run_dir  # tokenizer, word pairs, vectors: the chief's, shared
    if not chief:
        run_dir = os.path.join(run_dir, "workers", str(strategy.cluster_resolver.task_id))
    with run_directory_lock(run_dir):
        if not chief:  # a worker's own directory must fit too
            preset_name, preset = resolve_preset(preset_name, run_dir, overrides, run_file,
                                                 log=log)
        finished = finished_run(run_dir, backup_dir, train_config) if chief else None
        if finished is not None:
            log(f"[train] {run_dir} is already trained to step {finished.get('steps')} "
                f"(train.max_steps {train_config.get('max_steps')}, train.max_minutes "
                f"{train_config.get('max_minutes')}): nothing to do. Its results: "
                f"{os.path.join(run_dir, 'results.json')}; raise --max-steps or "
                "--max-minutes to train on.")
            return finished
        # Refused here, before anything is written: data files changed since the run began.
        fingerprints = check_data_fingerprints(run_dir, preset["data"], log=log) if chief else None
        tfo_backup.write_atomically(
            os.path.join(run_dir, PRESET_FILE),
            lambda path: _write_json(path, {"name": preset_name, **preset}))
        if chief:
            tfo_backup.write_atomically(os.path.join(run_dir, DATA_FILES),
                                        lambda path: _write_json(path, fingerprints))
        previous_policy = keras.config.dtype_policy().name
        tfo_strategy.set_precision(train_config["precision"])
        try:
            return _run_training(preset_name, preset, run_dir, resource_dir, backup_dir,
                                 strategy, chief, start, log)
        finally:
            keras.config.set_dtype_policy(previous_policy)


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)


def _run_training(preset_name, preset, run_dir, resource_dir, backup_dir, strategy, chief,
                  start, log):
    keras.utils.set_random_seed(preset["train"]["seed"])
    data_config, train_config, decode_config = preset["data"], preset["train"], preset["decode"]
    training_data = TrainingData(data_config, seed=tokenizer_seed(preset), log=log)
    splits = {split: read_split(data_config, split, log=log) for split in ("dev", "test")}
    log(f"[data] dev {len(splits['dev'])} pairs ({splits['dev'].origin}), test "
        f"{len(splits['test'])} ({splits['test'].origin})")
    # What SentencePiece, word alignment and word vectors learn from: the
    # cleaned training pairs, or a seeded sample of them (data.tokenizer_sample).
    train = training_data.sample
    # Files all workers share are built by the chief, then loaded by the others.
    chief_first = functools.partial(tfo_strategy.chief_first, strategy)
    tokenizer_start = time.time()
    source_tokenizer, target_tokenizer = chief_first(lambda: tfo_data.build_tokenizers(
        train.sources, train.targets, resource_dir,
        vocab_size=data_config["vocab_size"],
        joint=data_config["joint_vocabulary"],
        model_type=data_config["tokenizer_type"],
        seed=tokenizer_seed(preset),
    ))
    log(f"[data] tokenizer: {data_config['tokenizer_type']} "
        f"{'joint' if data_config['joint_vocabulary'] else 'separate'}, "
        f"vocab source {source_tokenizer.vocab_size} / target {target_tokenizer.vocab_size} "
        f"({time.time() - tokenizer_start:.0f} s)")
    # Several workers on a streamed corpus: each reads its own shard of the lines
    # and builds its share of the global batch (data.batch_tokens / workers).
    workers, worker = tfo_strategy.num_workers(strategy), tfo_strategy.worker_index(strategy)
    per_worker_data = training_data.streamed and workers > 1
    train_dataset = training_data.dataset(
        source_tokenizer, target_tokenizer, seed=train_config["seed"],
        **(dict(num_shards=workers, shard_index=worker) if per_worker_data else {}))
    if per_worker_data:
        log(f"[data] worker {worker} of {workers}: reads the "
            f"lines whose position modulo {workers} is its index; batches of at most "
            f"{data_config['batch_tokens'] // workers} padded tokens (data.batch_tokens / "
            "workers)")
    del training_data
    dev_dataset = tfo_data.dataset_from_corpus(
        splits["dev"], source_tokenizer, target_tokenizer,
        batch_tokens=data_config["batch_tokens"], shuffle=False,
    )
    # A known length lets Keras evaluate the finite dev set without warning
    # that the input "ran out of data".
    dev_batches = int(dev_dataset.reduce(0, lambda count, _: count + 1))
    dev_dataset = dev_dataset.apply(tf.data.experimental.assert_cardinality(dev_batches))

    # Shared-private embeddings with `pairs: "auto"`: word pairs from eflomal
    # alignments of the training split, written to (and reused from) the run dir.
    preset = {**preset, "model": chief_first(lambda: resolve_pairs(
        preset["model"], train, source_tokenizer, target_tokenizer, resource_dir, log=log))}
    with strategy.scope():  # variables mirrored on every replica
        model = build_model(preset, source_tokenizer.vocab_size, target_tokenizer.vocab_size)
        if hasattr(model.head, "set_target_vectors"):
            table = chief_first(lambda: prepare_target_vectors(
                data_config, train, target_tokenizer, resource_dir, train_config["seed"],
                log=log))
            model.head.set_target_vectors(table.vectors)
        rewe = getattr(model, "rewe", None)
        if rewe is not None and rewe.targets == "pretrained":
            # ReWE regressing pretrained vectors: the same FastText table, frozen.
            table = chief_first(lambda: prepare_target_vectors(
                data_config, train, target_tokenizer, resource_dir, train_config["seed"],
                log=log))
            rewe.set_target_vectors(table.vectors)
        loss_keywords = training_loss(train_config)
        optimizer = build_optimizer(preset)
        compile_for_translation(
            model,
            learning_rate=train_config["learning_rate"],
            clipnorm=train_config["clipnorm"],
            optimizer=optimizer,
            **loss_keywords,
        )
    log(f"[model] {type(model).__name__} {preset['model']}")
    devices = [d.name.replace("/device:", "") for d in tf.config.list_logical_devices()
               if d.device_type in ("CPU", "GPU")]
    log(f"[devices] training on {', '.join(devices)} ({os.cpu_count()} CPU cores)")
    log(f"[train] strategy {type(strategy).__name__} ({strategy.num_replicas_in_sync} "
        f"replica(s)), precision {train_config['precision']}, accumulation "
        f"{train_config['accumulation_steps']}, XLA {train_config['jit_compile']}, "
        f"{train_config['steps_per_execution']} step(s) per execution, backups every "
        f"{train_config['backup_every_n_steps']} steps in {backup_dir}")
    log(f"[optimizer] {type(optimizer).__name__} beta_2={optimizer.beta_2} "
        f"epsilon={optimizer.epsilon} clipnorm={optimizer.clipnorm} "
        f"global_clipnorm={optimizer.global_clipnorm}, learning rate "
        f"{train_config.get('learning_rate_schedule') or train_config['learning_rate']}")
    log(str(parameter_report(model)))

    callbacks, bleu = translation_callbacks(
        run_dir,
        dev_sources=splits["dev"].sources,
        dev_references=splits["dev"].targets,
        source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
        patience=train_config["patience"],
        max_minutes=train_config["max_minutes"],
        max_steps=train_config["max_steps"],
        decode_options=decode_config,
        chief=chief,
    )
    # The training losses step by step: with ReWE, NLL and ReWE separately (the
    # paper's Figure 3); plain runs write the same file, for comparing the two.
    rewe_weight = loss_keywords.get("auxiliary_weights", {}).get("rewe")
    callbacks.append(LossCurves(
        os.path.join(run_dir, "loss_curves.csv"),
        None if rewe is None else (PAPER_REWE_WEIGHT if rewe_weight is None else rewe_weight),
        log=log))
    note = smaller_epochs_budget(train_config)
    if note:
        log(f"[train] {note}")
    train_model(
        model,
        train_dataset,
        epochs=train_config["epochs"],
        steps_per_epoch=train_config["steps_per_epoch"],
        validation_data=dev_dataset,
        callbacks=callbacks,
        accumulation_steps=train_config["accumulation_steps"],
        backup_dir=backup_dir,
        backup_every_n_steps=train_config["backup_every_n_steps"],
        keep_backups=train_config["keep_backups"],
        nonfinite=train_config["nonfinite"],
        max_skipped_share=train_config["max_skipped_share"],
        max_loss=train_config["max_loss"],
        verbose=2 if os.environ.get("TF_OUTHEADS_QUIET") else "auto",
        per_worker_data=per_worker_data,
        jit_compile=train_config["jit_compile"],
        steps_per_execution=train_config["steps_per_execution"],
    )
    # Training wall clock of every process that trained this run (a backup keeps it).
    train_seconds = next(c for c in callbacks if isinstance(c, TimeLimit)).elapsed()
    steps = int(model.optimizer.iterations.numpy())
    stopped = stopped_by(callbacks)
    log(f"[train] stopped at step {steps} by {budget_text(stopped, train_config)}")
    if not chief:
        log(f"[done] worker {run_dir}: {steps} steps; the chief evaluates and writes the model")
        return {"preset": preset_name, "run_dir": run_dir, "steps": steps, "chief": False,
                "stopped_by": stopped}

    average_last = train_config["average_last"]
    best = os.path.join(run_dir, "checkpoints", "best.weights.h5")
    if average_last:
        paths = tfo_backup.BackupManager(backup_dir).last(average_last)
        tfo_backup.average_checkpoints(model, paths)
        log(f"[average] final weights: the mean of the last {len(paths)} backups "
            f"({', '.join(os.path.basename(p) for p in paths)})")
    elif os.path.exists(best):
        model.load_weights(best)
    model_path = os.path.join(run_dir, "model.keras")
    tfo_backup.write_atomically(model_path, functools.partial(
        save_model, model, source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer))
    pairs_path = os.path.join(run_dir, PAIRS_FILE)
    if os.path.exists(pairs_path):  # Liu et al. (2019) Figure 6 for this run
        figure = write_pair_figure(model, pairs_path, os.path.join(run_dir, FIGURE_FILE))
        if figure:
            log(f"[pairs] PCA of paired embeddings → {figure}")

    translator = Translator(model, source_tokenizer, target_tokenizer, **decode_config)
    results = {"preset": preset_name, "run_dir": run_dir,
               "steps": steps,
               "stopped_by": stopped,
               "replicas": strategy.num_replicas_in_sync,
               "averaged_backups": average_last,
               "train_seconds": round(train_seconds, 1),
               "parameters": parameter_report(model).groups,
               "dev_bleu_history": bleu.history if bleu else []}
    for split in ("dev", "test"):
        hypotheses = translator.translate(splits[split].sources)
        with open(os.path.join(run_dir, f"{split}.hyp"), "w", encoding="utf-8") as f:
            f.write("\n".join(hypotheses) + "\n")
        scores = evaluate_translations(hypotheses, splits[split].reference_streams(),
                                       primary=splits[split].target_name)
        log(f"[{split}] {len(hypotheses)} sentences → {os.path.join(run_dir, split + '.hyp')}")
        log(format_report(scores))
        results[split] = {name: {"score": s.score, "signature": s.signature}
                          for name, s in scores.items()}
    results["total_seconds"] = round(time.time() - start, 1)
    with open(os.path.join(run_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    dev_bleu, test_bleu = (results[split][f"bleu[{splits[split].target_name}]"]["score"]
                           for split in ("dev", "test"))
    log(f"[done] dev BLEU {dev_bleu:.2f}, test BLEU {test_bleu:.2f} "
        f"({results['steps']} steps, {results['total_seconds'] / 60:.1f} min)")
    return results


def smaller_epochs_budget(train_config):
    """A note when `train.epochs × train.steps_per_epoch` steps end the run before
    `train.max_steps` does (the progress line counts to max_steps); else `None`."""
    epoch_steps = train_config["epochs"] * train_config["steps_per_epoch"]
    if train_config["max_steps"] is None or train_config["max_steps"] <= epoch_steps:
        return None
    return (f"train.max_steps {train_config['max_steps']} is more than train.epochs × "
            f"train.steps_per_epoch = {train_config['epochs']} × "
            f"{train_config['steps_per_epoch']} = {epoch_steps} steps: the epochs budget "
            f"stops this run at step {epoch_steps} (raise train.epochs to train on)")


def budget_text(stopped, train_config):
    """`stopped` (`tf_outheads.training.callbacks.stopped_by`: `"max_steps"`, `"epochs"`,
    `"max_minutes"` or `"early_stopping"`) in words, with the settings behind it."""
    if stopped == "max_steps":
        return f"its step budget (train.max_steps {train_config['max_steps']})"
    if stopped == "max_minutes":
        return f"its time budget (train.max_minutes {train_config['max_minutes']:g})"
    if stopped == "early_stopping":
        return (f"early stopping (train.patience {train_config['patience']} evaluations "
                "without a better dev score)")
    return (f"its epochs budget (train.epochs × train.steps_per_epoch = "
            f"{train_config['epochs']} × {train_config['steps_per_epoch']} steps)")


class LossCurves(keras.callbacks.Callback):
    """Per-step training losses → CSV, and a plot at the end of training.

    Without ReWE (`rewe_weight=None`) one column, `loss` (the output layer's loss
    as compiled: the NLL, label smoothing included). With ReWE the curves of its
    Figure 3 (Jauregi Unanue et al. 2019): training loss (Eq. 7), NLL
    (`logits_loss`), ReWE loss (`rewe_loss`) and λ·ReWE. Keras logs running
    means over the epoch; the loss of each step is the increment of its loss
    tracker's sums (a Keras `Mean`: `total`, `count`). Rows are appended to
    `path` (`step,epoch,loss[,logits_loss,rewe_loss,weighted_rewe_loss],tokens,time`:
    the step's target tokens and the wall clock at its end), so a resumed run
    continues the file. At the end, the plot (`.svg` next to `path`,
    `tf_outheads_zoo.plots.write_line_plot`). `tf_outheads_zoo.compare.nll_curve` reads either form back.
    """

    def __init__(self, path, rewe_weight=None, log=print):
        super().__init__()
        self.path = path
        self.rewe_weight = None if rewe_weight is None else float(rewe_weight)
        self.names = ("loss",) if rewe_weight is None else ("loss", "logits_loss", "rewe_loss")
        self.columns = ("step", "epoch") + self.names + (
            () if rewe_weight is None else ("weighted_rewe_loss",)) + ("tokens", "time")
        self.log = log
        self._sums = {}
        self._epoch = 0

    def on_train_begin(self, logs=None):
        """A resumed run drops the rows of steps after its backup (it trains them again)."""
        if not os.path.exists(self.path):
            return
        step = int(self.model.optimizer.iterations.numpy())
        with open(self.path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        kept = rows[:1] + [row for row in rows[1:] if row and int(row[0]) <= step]
        if len(kept) != len(rows):
            def write(path):
                with open(path, "w", encoding="utf-8", newline="") as f:
                    csv.writer(f).writerows(kept)
            tfo_backup.write_atomically(self.path, write)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._sums = {}  # Keras resets its trackers at every epoch

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        trackers = {metric.name: metric for metric in self.model.metrics}
        row = {"step": int(self.model.optimizer.iterations.numpy()), "epoch": self._epoch + 1,
               # Target tokens of the step and the wall clock at its end: tokens/s
               # between two steps of one epoch (benchmarks/peer_opennmt.py).
               "tokens": logs.get("tokens", ""), "time": round(time.time(), 4)}
        for name in self.names:
            if name == "loss" and "step_loss" in logs:  # tf_outheads.training.fit
                row[name] = float(logs["step_loss"])
                continue
            sums = {v.name: float(v.numpy()) for v in getattr(trackers.get(name), "variables", ())}
            if {"total", "count"} <= set(sums):
                total, count = self._sums.get(name, (0.0, 0.0))
                self._sums[name] = (sums["total"], sums["count"])
                if sums["count"] > count:
                    row[name] = (sums["total"] - total) / (sums["count"] - count)
                    continue
            row[name] = float(logs.get(name, float("nan")))  # the running mean
        if self.rewe_weight is not None:
            row["weighted_rewe_loss"] = self.rewe_weight * row["rewe_loss"]
        columns = self.columns
        new_file = not os.path.exists(self.path)
        if not new_file:  # a resumed run keeps the columns its file has
            with open(self.path, encoding="utf-8", newline="") as f:
                columns = next(csv.reader(f), None) or columns
        with open(self.path, "a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            if new_file:
                writer.writeheader()
            writer.writerow(row)

    def on_train_end(self, logs=None):
        if not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            return
        steps = [int(row["step"]) for row in rows]
        if self.rewe_weight is None:
            labels = (("loss", "training loss (NLL)"),)
            title = "Training loss per step"
        else:
            labels = (("loss", "training loss (NLL + λ·ReWE, Eq. 7)"),
                      ("logits_loss", "NLL"),
                      ("rewe_loss", "ReWE"),
                      ("weighted_rewe_loss", f"λ·ReWE (λ = {self.rewe_weight:g})"))
            title = "Training losses per step (ReWE, Figure 3)"
        series = {label: (steps, [float(row[column]) for row in rows]) for column, label in labels}
        image = os.path.splitext(self.path)[0] + ".svg"
        write_line_plot(image, series, title=title, xlabel="training step", ylabel="loss")
        self.log(f"[curves] {image}")


def save_model(model, path, source_tokenizer, target_tokenizer):
    """`model.save(path)`, with the fingerprints of the tokenizers it was trained with
    stored inside the `.keras` file (`MODEL_METADATA`), which `load_run` checks."""
    model.save(path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(MODEL_METADATA, json.dumps({
            "source_tokenizer": source_tokenizer.fingerprint,
            "target_tokenizer": target_tokenizer.fingerprint}))


def check_model_tokenizers(model_path, run_dir, source_tokenizer, target_tokenizer):
    """Refuses tokenizers other than those `model_path` was saved with (`save_model`).

    A model saved without fingerprints (before they were recorded) is not checked.

    Raises:
        ValueError: naming the model file, the tokenizer directory and both
            fingerprints.
    """
    with zipfile.ZipFile(model_path) as archive:
        if MODEL_METADATA not in archive.namelist():
            return
        recorded = json.loads(archive.read(MODEL_METADATA))
    for side, tokenizer in (("source", source_tokenizer), ("target", target_tokenizer)):
        expected = recorded.get(f"{side}_tokenizer")
        if expected and expected != tokenizer.fingerprint:
            raise ValueError(
                f"{model_path} was trained with a {side} tokenizer of fingerprint {expected}, "
                f"but {os.path.join(run_dir, 'tokenizer.json')} and its SentencePiece model "
                f"have {tokenizer.fingerprint}: the tokenizer files come from another run. "
                "Put back the run's own tokenizer files; the model cannot read other ids.")


def load_run(run_dir):
    """The trained model and tokenizers of a run directory (checked to belong together),
    and its preset (`stored_preset`: in today's form, whichever version wrote it)."""
    model_path = os.path.join(run_dir, "model.keras")
    if not os.path.exists(model_path):
        raise FileNotFoundError(f"{model_path}: no trained model in this run directory "
                                "(train first: tf-outheads train --run-dir ...)")
    try:
        model = keras.saving.load_model(model_path, safe_mode=True)
    # TypeError: a config naming a class or function Keras will not load in safe mode
    # (a crafted file naming `os.system`).
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"{model_path}: not a readable .keras model, damaged or from "
                         f"another program ({type(error).__name__}: {first_line}); "
                         "train again, or restore it from the run's best weights with "
                         "`tf-outheads train --run-dir` after deleting it") from None
    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(run_dir)
    check_model_tokenizers(model_path, run_dir, source_tokenizer, target_tokenizer)
    preset = stored_preset(run_dir)
    if preset is None:
        raise FileNotFoundError(f"{os.path.join(run_dir, PRESET_FILE)}: the run's preset is "
                                "missing (tf-outheads train writes it)")
    return model, source_tokenizer, target_tokenizer, preset
