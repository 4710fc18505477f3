"""Atomic, verified training backups: weights, optimizer, data-iterator position.

A backup is a directory `ckpt-<step>/` holding a TensorFlow checkpoint
(`variables.index`, `variables.data-*`) and `manifest.json` (the step, the
trainer's state, and the size and SHA-256 of every file). It is written under a
temporary name and renamed into place only when complete, so a process killed
at any moment leaves either the previous backups or the new one, never half a
backup. Restoring checks the manifest first: a truncated or altered file is
reported by name (`CheckpointError`), not as a failure deep inside TensorFlow.

Keras 3's `BackupAndRestore` restores the epoch only (a mid-epoch kill replays
the epoch's start) and `ModelCheckpoint` overwrites its file in place; these
backups restore the step, the optimizer state and the input pipeline's
position.
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid

import numpy as np
import tensorflow as tf

from tf_outheads.validation import positive_int

MANIFEST = "manifest.json"
PREFIX = "variables"
_NAME = re.compile(r"^ckpt-(\d+)$")
_FORMAT = 1


class CheckpointError(RuntimeError):
    """A backup that cannot be restored: truncated, altered, or from another model."""


def sha256_of_file(path):
    """The SHA-256 hex digest of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_directory(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path, write):
    """Call `write(temporary_path)`, then rename the result to `path` (same directory).

    For single files (`.weights.h5`, `.keras`, JSON): a reader never sees a
    partly written `path`. The temporary name keeps `path`'s suffix (Keras
    checks it).
    """
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    stem, dot, suffix = name.partition(".")
    temporary = os.path.join(directory, f".{stem}.tmp-{uuid.uuid4().hex[:8]}{dot}{suffix}")
    try:
        write(temporary)
        with open(temporary, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    _fsync_directory(directory)
    return path


def variables_signature(variables):
    """`[[shape, dtype], ...]` of `variables`: what a backup must be restored into.

    Names are left out: Keras numbers them per process (`dense_1`...).
    """
    return [[list(v.shape), str(np.dtype(v.dtype))] for v in variables]


def verify_backup(path):
    """The manifest of the backup at `path`, after checking every file against it.

    Raises:
        CheckpointError: naming the missing, truncated or altered file.
    """
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.exists(manifest_path):
        raise CheckpointError(f"{manifest_path}: missing; {path} is not a complete backup "
                              "(backups are renamed into place only when complete, so "
                              "this directory was made or changed by something else)")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        files = manifest["files"]
        step = int(manifest["step"])
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{manifest_path}: unreadable manifest ({error})") from None
    for name, expected in sorted(files.items()):
        file_path = os.path.join(path, name)
        if not os.path.exists(file_path):
            raise CheckpointError(f"{file_path}: missing from the backup of step {step}")
        size = os.path.getsize(file_path)
        if size != expected["size"]:
            raise CheckpointError(
                f"{file_path}: truncated or overwritten: {size} bytes, the manifest of "
                f"step {step} says {expected['size']}")
        if sha256_of_file(file_path) != expected["sha256"]:
            raise CheckpointError(f"{file_path}: corrupted: its SHA-256 differs from the "
                                  f"manifest of step {step}")
    return manifest


class BackupManager:
    """Writes, lists, verifies and restores the backups in `directory`.

    Args:
        directory: str. Created if missing. In a multi-worker job it must be a
            filesystem every worker sees (all restore from it).
        keep: int. Complete backups kept (oldest removed first). Defaults to 3.
        chief: bool. Only the chief writes into `directory`; other workers
            write their (identical) copy to a local temporary directory and
            delete it
            (saving may run collective ops, so every worker must take part).
            Defaults to `True`.
    """

    def __init__(self, directory, keep=3, chief=True):
        self.directory = str(directory)
        self.keep = positive_int("keep", keep)
        self.chief = bool(chief)
        os.makedirs(self.directory, exist_ok=True)

    def checkpoints(self):
        """`[(step, path), ...]` of the complete-looking backups, oldest first."""
        found = []
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if match and os.path.isdir(os.path.join(self.directory, name)):
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        return sorted(found)

    def last(self, count):
        """Paths of the newest `count` backups (all if fewer), oldest first."""
        return [path for _, path in self.checkpoints()[-positive_int("count", count):]]

    def save(self, checkpoint, step, state, protect=()):
        """Write `checkpoint` (a `tf.train.Checkpoint`) as the backup of `step`.

        `state` is a JSON-serialisable dict stored in the manifest (epoch,
        position in the epoch, ...). Then older backups are pruned to the
        newest `keep`, except those of the steps in `protect` (e.g. the best
        model's, which a resumed run must still be able to return to).
        Returns the backup's path (`None` on a non-chief worker).
        """
        final = os.path.join(self.directory, f"ckpt-{int(step):09d}")
        tag = uuid.uuid4().hex[:8]
        if not self.chief:
            # Local scratch: the chief's directory is not this worker's to write.
            scratch = tempfile.mkdtemp(prefix="tf_outheads-worker-backup-")
            try:
                checkpoint.write(os.path.join(scratch, PREFIX))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return None
        temporary = os.path.join(self.directory, f".tmp-ckpt-{int(step):09d}-{tag}")
        try:
            checkpoint.write(os.path.join(temporary, PREFIX))
            files = {}
            for name in sorted(os.listdir(temporary)):
                path = os.path.join(temporary, name)
                with open(path, "rb+") as f:
                    os.fsync(f.fileno())
                files[name] = {"size": os.path.getsize(path), "sha256": sha256_of_file(path)}
            manifest = {"format": _FORMAT, "step": int(step), "state": state, "files": files}
            with open(os.path.join(temporary, MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            _fsync_directory(temporary)
            if os.path.exists(final):  # the same step saved again after a restore
                shutil.rmtree(final)
            os.rename(temporary, final)
            _fsync_directory(self.directory)
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
        self._prune(protect)
        return final

    def _prune(self, protect=()):
        complete = self.checkpoints()
        protect = {int(step) for step in protect}
        for step, path in complete[:-self.keep]:
            if step not in protect:
                shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.directory):  # left by a killed save
            if name.startswith(".tmp-ckpt-"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def latest(self):
        """`(path, manifest)` of the newest backup, verified; `None` if there is none.

        Raises:
            CheckpointError: the newest backup is damaged. The message names the
                file and the newest older backup, to delete the damaged one and
                resume from there (nothing is skipped silently).
        """
        complete = self.checkpoints()
        if not complete:
            return None
        step, path = complete[-1]
        try:
            return path, verify_backup(path)
        except CheckpointError as error:
            older = [p for _, p in complete[:-1]]
            hint = (f" The previous backup is {older[-1]}: delete {path} to resume from it."
                    if older else " There is no older backup.")
            raise CheckpointError(f"{error}.{hint}") from None

    def restore(self, checkpoint, path=None, signature=None):
        """Restore `checkpoint` from `path` (default: the newest backup); returns the manifest.

        Returns `None` when there is no backup (a fresh start). `signature`
        (`variables_signature` of the variables to restore), when given, must
        equal the one saved in the manifest's state.

        Raises:
            CheckpointError: a damaged backup, or one written for other
                variables (another model or optimizer).
        """
        if path is None:
            found = self.latest()
            if found is None:
                return None
            path, manifest = found
        else:
            manifest = verify_backup(path)
        saved = (manifest.get("state") or {}).get("signature")
        if signature is not None and saved != signature:
            raise CheckpointError(
                f"{path}: written for other variables ({len(saved or [])} saved, "
                f"{len(signature)} here, or other shapes): another model, head or optimizer. "
                "Use another backup directory for a new model")
        prefix = os.path.join(path, PREFIX)
        try:
            checkpoint.read(prefix).assert_existing_objects_matched()
        except (tf.errors.OpError, AssertionError, ValueError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise CheckpointError(f"{prefix}: cannot be restored into this model and optimizer "
                                  f"({type(error).__name__}: {first_line})") from None
        return manifest


def average_checkpoints(model, paths):
    """Set `model`'s weights to the mean of its weights in the backups `paths`.

    Checkpoint averaging (Vaswani et al. 2017 average the last 5 or 20
    checkpoints; OpenNMT-tf `average_checkpoints`): each backup is verified,
    read into the model's variables, and the float variables averaged; other
    variables (integer counters, RNG states) keep the newest backup's values.

    Args:
        model: the built `keras.Model` the backups were written for.
        paths: list of backup directories (`ckpt-<step>/`), e.g.
            `BackupManager(directory).last(5)`.

    Returns:
        `model`, with the averaged weights.
    """
    paths = list(paths)
    if not paths:
        raise ValueError("`paths` must name at least one backup. Received: paths=[]")
    variables = list(model.variables)
    totals = None
    signature = variables_signature(variables)
    for path in paths:
        saved = (verify_backup(path).get("state") or {}).get("signature")
        if saved is not None and saved != signature:
            raise CheckpointError(f"{path}: written for other variables than this model's "
                                  f"({len(saved)} saved, {len(signature)} here, or other "
                                  "shapes)")
        checkpoint = tf.train.Checkpoint(model_variables=[_tf_variable(v) for v in variables])
        try:
            checkpoint.read(os.path.join(path, PREFIX)).expect_partial()
        except (tf.errors.OpError, ValueError) as error:
            raise CheckpointError(f"{path}: cannot be read into this model ({error})") from None
        values = [np.array(v.numpy()) for v in variables]
        if totals is None:
            totals = [value.astype(np.float64) if value.dtype.kind == "f" else value
                      for value in values]
        else:
            totals = [total + value if value.dtype.kind == "f" else value
                      for total, value in zip(totals, values)]
    for variable, total in zip(variables, totals):
        if total.dtype.kind == "f":
            total = total / len(paths)
        variable.assign(total.astype(np.dtype(variable.dtype)))
    return model


def _tf_variable(variable):
    """The `tf.Variable` behind a Keras variable (TensorFlow backend)."""
    return getattr(variable, "value", variable) if not isinstance(variable, tf.Variable) else variable


__all__ = ["BackupManager", "CheckpointError", "average_checkpoints", "variables_signature",
           "verify_backup", "write_atomically"]
