"""`train.init_from`: a new run that starts from another run's trained model.

OpenNMT-tf (`--checkpoint_path`), OpenNMT-py/eole and fairseq (`--restore-file
--reset-optimizer`) let a trained model go on training on new data; this is the zoo's
way. The child run directory holds its own copies of what it inherits, so it resumes
(and can be read) even if the parent's directory moves:

- `init_model.keras`: the parent's final model (`model.keras`), whose weights the child
  starts from;
- the parent's tokenizer files (`tokenizer.json` and its SentencePiece models): the
  child cuts its new data into the parent's pieces;
- `word_pairs.tsv` (shared-private embeddings built from `pairs: auto`) and
  `target_vectors.vec` (a continuous or ReWE head's trained table), when the parent has
  them: the child's model has the parent's structure, whatever its new data would give;
- `init_from.json`: where it came from (the parent's directory, preset, steps and the
  SHA-256 of its model) and the dev loss the child starts from.

The optimizer starts afresh (Adam's moments at zero, the schedule at step 0), unless
`train.init_optimizer`: then the moments and the step count come from the parent's
newest backup, and the schedule, `train.max_steps` and the loss curves count on from
the parent's step, as a continued OpenNMT-tf checkpoint does.

The parent's architecture is the child's: every `model` key, and the data keys that
decide the pieces (`VOCABULARY_KEYS`), must agree; a difference is refused with the
keys named, before anything is written.

`train.update_vocab` gives the child the pieces of its new data instead
(`tf_outheads.data.updated_model_proto`): `merge` appends the new data's SentencePiece
pieces to the parent's (`data.vocab_size` is the new model's size before the merge),
`replace` takes the new model's alone. The parent's tokenizer files, pairs and vectors
then go to `RUN_DIR/parent/`, the new data's models are built in `RUN_DIR/new/`, and
every piece-indexed table moves by piece (`tf_outheads.models.transfer_weights`): kept
pieces keep their rows; new ones get the preset's initializer and an output bias that
gives them no probability at the start. Shared-private pairs are the parent's pairs
whose two pieces are kept (new pieces start unpaired); a continuous or ReWE head's
new pieces get vectors trained on the new data and rotated into the parent's space
(`tf_outheads.data.align_word_vectors`).
"""

import dataclasses
import json
import os
import shutil

from tf_outheads import data as tfo_data
from tf_outheads.data.tokenizer import CONFIG_FILENAME as TOKENIZER_FILE
from tf_outheads.models.weight_transfer import transfer_weights
from tf_outheads.training import backup as tfo_backup
from tf_outheads_zoo.runs import (RunDirectoryError, load_model_file, load_run, stored_run,
                                  write_json)
from tf_outheads_zoo.stored import RUN_FILE
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.run_pairs import PAIRS_FILE

INIT_FILE = "init_from.json"
INIT_MODEL = "init_model.keras"
TARGET_VECTORS_FILE = "target_vectors.vec"
PARENT_DIR, NEW_DIR = "parent", "new"  # a vocabulary update's inputs, in the run directory
# The data keys that decide a run's pieces: the parent's tokenizer is the child's
# (`vocab_size` may change with train.update_vocab).
VOCABULARY_KEYS = ("vocab_size", "joint_vocabulary", "tokenizer_type")


def parent_run(parent_dir):
    """`(preset name or None, RunConfig)` the trained run `parent_dir` stores (`stored_run`).

    Raises:
        RunDirectoryError: naming `parent_dir`, if it holds no trained model or settings.
    """
    parent_dir = os.fspath(parent_dir)
    model = os.path.join(parent_dir, "model.keras")
    stored = stored_run(parent_dir) if os.path.isdir(parent_dir) else None
    if stored is None or not os.path.exists(model):
        missing = RUN_FILE if stored is None and os.path.isdir(parent_dir) else "model.keras"
        raise RunDirectoryError(
            f"train.init_from={parent_dir!r}: not a trained run directory (no {missing}"
            f"{'' if os.path.isdir(parent_dir) else '; the directory does not exist'}). "
            "Give the run directory of a finished `tf-outheads train`.")
    return stored


def check_compatible(parent, config, parent_dir):
    """Refuses a child whose model or pieces differ from its parent's (before anything is
    written; `check_parent_files` checks the parent's files).

    Raises:
        ConfigError: naming every `model.*` and `data.*` key that differs, both values
            of the first ones, and the parent's directory.
    """
    update = config.train.update_vocab
    if update and config.train.init_optimizer:
        raise ConfigError("train.update_vocab with train.init_optimizer: the parent's Adam "
                          "moments belong to its pieces; a vocabulary update starts a fresh "
                          "optimizer (drop --init-optimizer).")
    parent, child = _json(parent.to_dict()), _json(config.to_dict())
    keys = [("model", key) for key in sorted(set(parent["model"]) | set(child["model"]))]
    keys += [("data", key) for key in VOCABULARY_KEYS if not (update and key == "vocab_size")]
    differ = [(section, key) for section, key in keys
              if parent[section].get(key) != child[section].get(key)]
    if differ:
        shown = "; ".join(f"{s}.{k}: {parent[s].get(k)!r} in the parent, "
                          f"{child[s].get(k)!r} here" for s, k in differ[:4])
        raise ConfigError(
            f"train.init_from={parent_dir!r}: this run's model differs from its parent's in "
            f"{', '.join(f'{s}.{k}' for s, k in differ)} ({shown}). A run initialised from "
            "another keeps its architecture, head and pieces: drop these settings (they "
            "default to the parent's when neither --preset nor --config is given).")


def check_parent_files(parent_dir):
    """Refuses a parent whose files the child would copy are damaged, before anything is
    copied (a bad copy would stay in the child's directory, and a resume would use it):
    its `model.keras` must load in safe mode, complete and naming no function (a crafted
    config naming `os.system` is refused, nothing of it run), with its tokenizer files,
    as `translate` loads a run (`load_run`). Its model is loaded once more for this.

    Raises:
        RunDirectoryError: naming `train.init_from`, the parent's file and what is wrong.
        OSError: no room for the temporary files of loading the model (not a damage).
    """
    try:
        load_run(parent_dir)
    except (FileNotFoundError, ValueError) as error:
        raise RunDirectoryError(
            f"train.init_from={parent_dir!r}: {str(error).rstrip('.')}. Nothing was copied "
            "from it: once it is repaired, the same command starts the new run.") from None


def _json(value):
    return json.loads(json.dumps(value, default=str))


def inherit(parent_dir, run_dir, update_vocab=None, log=print):
    """Copies what the child inherits into `run_dir` (with `update_vocab`, the
    tokenizer files, pairs and vectors into `run_dir/parent/`; files it has are kept:
    a resumed child keeps its own) and writes `init_from.json` once; returns its record."""
    parent_dir = os.path.abspath(parent_dir)
    record_path = os.path.join(run_dir, INIT_FILE)
    if os.path.exists(record_path):  # written last: every copy is there
        with open(record_path, encoding="utf-8") as f:
            return json.load(f)
    os.makedirs(os.path.join(run_dir, PARENT_DIR) if update_vocab else run_dir, exist_ok=True)
    with open(os.path.join(parent_dir, TOKENIZER_FILE), encoding="utf-8") as f:
        tokenizer = json.load(f)
    names = {TOKENIZER_FILE, tokenizer["source_model"], tokenizer["target_model"], PAIRS_FILE,
             TARGET_VECTORS_FILE}
    names |= {os.path.splitext(name)[0] + ".vocab" for name in names if name.endswith(".model")}
    copied = []
    for name in sorted(names):
        source = os.path.join(parent_dir, name)
        target = os.path.join(run_dir, PARENT_DIR if update_vocab else "", name)
        if os.path.exists(source) and not os.path.exists(target):
            tfo_backup.write_atomically(target, lambda path, s=source: shutil.copyfile(s, path))
            copied.append(name)
    model = os.path.join(run_dir, INIT_MODEL)
    if not os.path.exists(model):
        tfo_backup.write_atomically(model, lambda path: shutil.copyfile(
            os.path.join(parent_dir, "model.keras"), path))
        copied.append(f"model.keras → {INIT_MODEL}")
    parent_name = stored_run(parent_dir)[0]
    results = os.path.join(parent_dir, "results.json")
    steps = None
    if os.path.exists(results):
        with open(results, encoding="utf-8") as f:
            steps = json.load(f).get("steps")
    record = {"run_dir": parent_dir, "preset": parent_name, "steps": steps,
              "update_vocab": update_vocab,
              "model_sha256": tfo_backup.sha256_of_file(model), "inherited": copied}
    tfo_backup.write_atomically(record_path, lambda path: write_json(path, record))
    log(f"[init] from {parent_dir} ({parent_name}, {steps} steps): "
        f"{', '.join(copied)}")
    return record


def updated_tokenizers(data_config, train, run_dir, seed, mode, log=print):
    """The child's tokenizers with `train.update_vocab` `mode`: the new data's
    SentencePiece models (built in `run_dir/new/`) merged with, or replacing, the
    parent's (`run_dir/parent/`), written to `run_dir` once and loaded from there after."""
    if os.path.exists(os.path.join(run_dir, TOKENIZER_FILE)):
        return tfo_data.load_tokenizers(run_dir)
    parents = tfo_data.load_tokenizers(os.path.join(run_dir, PARENT_DIR))
    news = tfo_data.build_tokenizers(
        train.sources, train.targets, os.path.join(run_dir, NEW_DIR),
        vocab_size=data_config.vocab_size, joint=data_config.joint_vocabulary,
        model_type=data_config.tokenizer_type, seed=seed)
    joint = data_config.joint_vocabulary
    names = (("spm_joint.model",) * 2 if joint else ("spm_source.model", "spm_target.model"))
    record = {"format": 1, "update_vocab": mode, "source_model": names[0],
              "target_model": names[1]}
    for side, name, parent, new in zip(("source", "target"), names, parents, news):
        proto = tfo_data.updated_model_proto(mode, parent.model_proto, new.model_proto)
        tfo_backup.write_atomically(os.path.join(run_dir, name),
                                    lambda path, proto=proto: _write_bytes(path, proto))
        tokenizer = tfo_data.SubwordTokenizer.from_bytes(proto)
        record[f"{side}_model_fingerprint"] = tokenizer.fingerprint
        kept = int((tfo_data.piece_map(parent, tokenizer) >= 0).sum())
        log(f"[init] {side} pieces ({mode}): {parent.vocab_size} in the parent, "
            f"{new.vocab_size} in the new data's model, {tokenizer.vocab_size} now "
            f"({kept} kept, {tokenizer.vocab_size - kept} new)")
    tfo_backup.write_atomically(os.path.join(run_dir, TOKENIZER_FILE),
                                lambda path: write_json(path, record))
    return tfo_data.load_tokenizers(run_dir)


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def piece_maps(run_dir, source_tokenizer, target_tokenizer):
    """`(source_map, target_map)`: each child piece's parent id (−1: new), or
    `(None, None)` when the child has its parent's pieces."""
    parent_dir = os.path.join(run_dir, PARENT_DIR)
    if not os.path.exists(os.path.join(parent_dir, TOKENIZER_FILE)):
        return None, None
    parents = tfo_data.load_tokenizers(parent_dir)
    return tuple(tfo_data.piece_map(parent, child) for parent, child in
                 zip(parents, (source_tokenizer, target_tokenizer)))


def inherited_model_config(model_config, run_dir, maps=(None, None), tokenizers=None):
    """`model_config` with shared-private `pairs: auto` read from the inherited
    `word_pairs.tsv` (the parent's pairs, not pairs of the child's new data); after a
    vocabulary update (`maps`, `tokenizers`), the parent's pairs whose two pieces are
    kept, in the child's ids."""
    spec = model_config.shared_private
    if not isinstance(spec, dict) or spec.get("pairs") != "auto":
        return model_config
    spec = {key: value for key, value in spec.items() if key != "threshold"}
    path = os.path.join(run_dir, PAIRS_FILE)
    if maps[0] is not None and not os.path.exists(path):
        pairs = tfo_data.WordPairs.load(os.path.join(run_dir, PARENT_DIR, PAIRS_FILE))
        pairs.remapped(*maps, *(t.vocabulary() for t in tokenizers)).save(path)
    return dataclasses.replace(model_config, shared_private={**spec, "pairs": path})


def aligned_target_vectors(data_config, train, target_tokenizer, run_dir, seed, log=print):
    """After a vocabulary update, `run_dir/target_vectors.vec` for a continuous or ReWE
    head: the parent's vectors, and vectors trained on the new data for the pieces the
    parent had none for, rotated into the parent's space. Nothing to do without the
    parent's trained vectors (`data.target_vectors.path` given: the user's file)."""
    from tf_outheads_zoo.schema import TARGET_VECTOR_DEFAULTS

    options = {**TARGET_VECTOR_DEFAULTS, **(data_config.target_vectors or {})}
    parent_vectors = os.path.join(run_dir, PARENT_DIR, TARGET_VECTORS_FILE)
    path = os.path.join(run_dir, TARGET_VECTORS_FILE)
    if options["path"] or os.path.exists(path) or not os.path.exists(parent_vectors):
        return
    new_vectors = os.path.join(run_dir, NEW_DIR, TARGET_VECTORS_FILE)
    if not os.path.exists(new_vectors):
        tfo_data.train_word_vectors(
            train.targets, target_tokenizer, new_vectors, dim=options["dim"],
            epochs=options["epochs"], seed=seed, model=options["model"],
            eos_token=(target_tokenizer.id_to_piece(tfo_data.EOS_ID)
                       if options["eos"] == "file" else None))
    words, vectors, report = tfo_data.align_word_vectors(
        *tfo_data.load_word_vectors(parent_vectors), *tfo_data.load_word_vectors(new_vectors))
    tfo_data.write_word_vectors(path, words, vectors)
    log(f"[init] target vectors: the parent's, and {report['added']} of the new data's "
        f"rotated into their space (fitted on {report['shared']} shared pieces, mean "
        f"cosine {report['cosine']})")


def load_parent_weights(model, run_dir, config, maps=(None, None)):
    """Sets the built `model`'s variables from `run_dir/init_model.keras`, moving
    piece-indexed rows by `maps` (`piece_maps`) after a vocabulary update; returns
    `transfer_weights`' report.

    Raises:
        ConfigError: naming the variable or table that does not fit.
    """
    config.model.model_class()  # registers the class
    path = os.path.join(run_dir, INIT_MODEL)
    parent = load_model_file(path, compile=False, remedy=(
        f"it is this run's copy of its parent's model.keras: delete it and {INIT_FILE} to "
        "copy it again"))
    try:
        return transfer_weights(parent, model, *maps)
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None


def restore_optimizer(model, parent_dir):
    """The optimizer's variables (moments, step count) from the newest backup of
    `parent_dir`; returns the step it was written at.

    Raises:
        RunDirectoryError: naming the directory, if the parent has no backup.
    """
    import tensorflow as tf

    manager = tfo_backup.BackupManager(os.path.join(parent_dir, "backup"))
    found = manager.latest()
    if found is None:
        raise RunDirectoryError(f"train.init_optimizer: {parent_dir}/backup holds no backup "
                                "to take the optimizer from.")
    path, manifest = found
    optimizer = model.optimizer
    if not optimizer.built:
        optimizer.build(model.trainable_variables)
    checkpoint = tf.train.Checkpoint(optimizer_variables=[v.value for v in optimizer.variables])
    # Every optimizer variable must come from the backup (its weights are not read here).
    checkpoint.read(os.path.join(path, tfo_backup.PREFIX)).expect_partial() \
        .assert_existing_objects_matched()
    return int(manifest["step"])
