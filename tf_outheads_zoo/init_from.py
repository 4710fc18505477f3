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
"""

import json
import os
import shutil

import keras
import numpy as np

from tf_outheads.data.tokenizer import CONFIG_FILENAME as TOKENIZER_FILE
from tf_outheads.training import backup as tfo_backup
from tf_outheads_zoo.config import MODEL_TYPES, ConfigError
from tf_outheads_zoo.runs import PRESET_FILE, RunDirectoryError, stored_preset, write_json
from tf_outheads_zoo.shared_private import PAIRS_FILE

INIT_FILE = "init_from.json"
INIT_MODEL = "init_model.keras"
TARGET_VECTORS_FILE = "target_vectors.vec"
# The data keys that decide a run's pieces: the parent's tokenizer is the child's.
VOCABULARY_KEYS = ("vocab_size", "joint_vocabulary", "tokenizer_type")
# `train` keys of the initialisation itself.
INIT_KEYS = ("init_from", "init_optimizer")


def parent_run(parent_dir):
    """The stored preset of the trained run `parent_dir` (`{"name", ...}`).

    Raises:
        RunDirectoryError: naming `parent_dir`, if it holds no trained model or preset.
    """
    parent_dir = os.fspath(parent_dir)
    model = os.path.join(parent_dir, "model.keras")
    preset = stored_preset(parent_dir) if os.path.isdir(parent_dir) else None
    if preset is None or not os.path.exists(model):
        missing = PRESET_FILE if preset is None and os.path.isdir(parent_dir) else "model.keras"
        raise RunDirectoryError(
            f"train.init_from={parent_dir!r}: not a trained run directory (no {missing}"
            f"{'' if os.path.isdir(parent_dir) else '; the directory does not exist'}). "
            "Give the run directory of a finished `tf-outheads train`.")
    return preset


def check_compatible(parent, preset, parent_dir):
    """Refuses a child whose model or pieces differ from its parent's.

    Raises:
        ConfigError: naming every `model.*` and `data.*` key that differs, both values
            of the first ones, and the parent's directory.
    """
    keys = [("model", key) for key in sorted(set(parent["model"]) | set(preset["model"]))]
    keys += [("data", key) for key in VOCABULARY_KEYS]
    differ = [(section, key) for section, key in keys
              if _json(parent[section].get(key)) != _json(preset[section].get(key))]
    if differ:
        shown = "; ".join(f"{s}.{k}: {_json(parent[s].get(k))!r} in the parent, "
                          f"{_json(preset[s].get(k))!r} here" for s, k in differ[:4])
        raise ConfigError(
            f"train.init_from={parent_dir!r}: this run's model differs from its parent's in "
            f"{', '.join(f'{s}.{k}' for s, k in differ)} ({shown}). A run initialised from "
            "another keeps its architecture, head and pieces: drop these settings (they "
            "default to the parent's when neither --preset nor --config is given).")


def _json(value):
    return json.loads(json.dumps(value, default=str))


def inherit(parent_dir, run_dir, log=print):
    """Copies what the child inherits into `run_dir` (those files it does not have yet:
    a resumed child keeps its own) and writes `init_from.json` once; returns its record."""
    parent_dir = os.path.abspath(parent_dir)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(parent_dir, TOKENIZER_FILE), encoding="utf-8") as f:
        tokenizer = json.load(f)
    names = {TOKENIZER_FILE, tokenizer["source_model"], tokenizer["target_model"], PAIRS_FILE,
             TARGET_VECTORS_FILE}
    names |= {os.path.splitext(name)[0] + ".vocab" for name in names if name.endswith(".model")}
    copied = []
    for name in sorted(names):
        source, target = os.path.join(parent_dir, name), os.path.join(run_dir, name)
        if os.path.exists(source) and not os.path.exists(target):
            tfo_backup.write_atomically(target, lambda path, s=source: shutil.copyfile(s, path))
            copied.append(name)
    model = os.path.join(run_dir, INIT_MODEL)
    if not os.path.exists(model):
        tfo_backup.write_atomically(model, lambda path: shutil.copyfile(
            os.path.join(parent_dir, "model.keras"), path))
        copied.append(f"model.keras → {INIT_MODEL}")
    record_path = os.path.join(run_dir, INIT_FILE)
    if os.path.exists(record_path):
        with open(record_path, encoding="utf-8") as f:
            return json.load(f)
    parent = stored_preset(parent_dir)
    results = os.path.join(parent_dir, "results.json")
    steps = None
    if os.path.exists(results):
        with open(results, encoding="utf-8") as f:
            steps = json.load(f).get("steps")
    record = {"run_dir": parent_dir, "preset": parent.get("name"), "steps": steps,
              "model_sha256": tfo_backup.sha256_of_file(model), "inherited": copied}
    tfo_backup.write_atomically(record_path, lambda path: write_json(path, record))
    log(f"[init] from {parent_dir} ({parent.get('name')}, {steps} steps): "
        f"{', '.join(copied)}")
    return record


def inherited_model_config(model_config, run_dir):
    """`model_config` with shared-private `pairs: auto` read from the inherited
    `word_pairs.tsv` (the parent's pairs, not pairs of the child's new data)."""
    spec = model_config.get("shared_private")
    if not isinstance(spec, dict) or spec.get("pairs") != "auto":
        return model_config
    spec = {key: value for key, value in spec.items() if key != "threshold"}
    return {**model_config, "shared_private": {**spec,
                                                "pairs": os.path.join(run_dir, PAIRS_FILE)}}


def load_parent_weights(model, run_dir, preset):
    """Sets every variable of the built `model` to its value in `run_dir/init_model.keras`.

    Raises:
        ConfigError: naming the first variable whose shape differs, or the counts.
    """
    MODEL_TYPES[preset["model"]["model_type"]].model_class()  # registers the class
    path = os.path.join(run_dir, INIT_MODEL)
    parent = keras.saving.load_model(path, compile=False, safe_mode=True)
    theirs, ours = parent.variables, model.variables
    if len(theirs) != len(ours):
        raise ConfigError(f"{path}: {len(theirs)} variables, this run's model "
                          f"{len(ours)}: not the same architecture.")
    for mine, saved in zip(ours, theirs):
        if tuple(mine.shape) != tuple(saved.shape):
            raise ConfigError(f"{path}: variable {saved.path} has shape {tuple(saved.shape)}, "
                              f"this run's {mine.path} {tuple(mine.shape)}: not the same "
                              "architecture or vocabulary.")
    for mine, saved in zip(ours, theirs):
        mine.assign(np.asarray(saved.numpy()))
    del parent


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
    checkpoint.read(os.path.join(path, tfo_backup.PREFIX)).expect_partial()
    return int(manifest["step"])
