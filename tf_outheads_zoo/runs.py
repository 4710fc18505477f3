"""Run directories: the settings a run trains with, its lock, its resume checks, its model.

What every command on a run directory needs (`train`, `translate`, `evaluate`, `export`,
`average`, `compare`, `study`) without the training itself (`tf_outheads_zoo.train`):
`resolve_run_config` (the `RunConfig` of a run, refusing a mismatch), `stored_run` (what a
run directory stores: `run.json`, or an older directory's `preset.json`), `check_data_files` and
`check_data_fingerprints` (refused before anything is written), `run_directory_lock`,
`finished_run`, and `save_model` / `load_run` (the trained model with its tokenizers).
"""

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import tempfile
import zipfile

import keras

from tf_outheads import data as tfo_data
from tf_outheads.data.tokenizer import CONFIG_FILENAME as TOKENIZER_FILE
from tf_outheads.training import backup as tfo_backup
from tf_outheads_zoo.config import data_set
from tf_outheads_zoo.presets import DEFAULT_PRESET, preset_config
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.stored import (LEGACY_RUN_FILE, RUN_FILE, read_run_config, read_stored_run,
                                    stored_settings_path)

# Settings a resumed run may change: budgets, evaluation, backups, the strategy
# (every other `data`, `model` and `train` key shapes the model, its variables,
# its pieces or its data order, which the run's backups and tokenizer hold).
RESUMABLE_TRAIN_KEYS = frozenset({
    "max_steps", "max_minutes", "epochs", "steps_per_epoch", "patience",
    "backup_every_n_steps", "keep_backups", "nonfinite", "max_skipped_share", "max_loss",
    "average_last", "strategy",
    "num_gpus", "jit_compile", "steps_per_execution"})
# The fingerprints of the data files a run reads (`check_data_fingerprints`).
DATA_FILES = "data_files.json"
# Inside a run's `.keras` file: the fingerprints of its tokenizers (`save_model`).
MODEL_METADATA = "tf_outheads.json"
LOCK_FILE = ".lock"


class RunDirectoryError(ValueError):
    """A run directory that cannot take this command: other settings, or in use."""


def stored_run(run_dir, required=False):
    """`(preset name or None, RunConfig)` that `run_dir` stores (`run.json`, or the
    `preset.json` of a directory written before it), or `None` when it stores neither
    (with `required`: `FileNotFoundError` naming `run.json`).

    Read through the schema (`tf_outheads_zoo.stored.read_stored_run`): a file written
    before a key existed gets the value the run trained with (`data.bucket_width`
    8), so the run resumes as it was trained.
    """
    path = stored_settings_path(run_dir)
    if path is None:
        if required:
            raise FileNotFoundError(
                f"{os.path.join(run_dir, RUN_FILE)}: not a run directory, or its settings are "
                f"missing (tf-outheads train writes them; {LEGACY_RUN_FILE} in older run "
                "directories)")
        return None
    try:
        return read_stored_run(path)
    except ConfigError:  # a key the schema does not know: the message names file and key
        raise
    except ValueError as error:
        raise RunDirectoryError(f"{path}: not a readable settings file ({error})") from None


# Settings the files a first start builds before its first step depend on (tokenizer,
# word pairs, word vectors, a parent's copies): every `data` key but `BATCHING_KEYS`, and
# these. A directory that took no training step takes new values of any other setting
# (a first start that failed on a bad one is not stuck: `resolve_run_config`).
RESOURCE_KEYS = ("train.seed", "train.init_from", "train.update_vocab",
                 "model.shared_private")
BATCHING_KEYS = ("data.batch_tokens", "data.bucket_width", "data.shuffle_buffer",
                 "data.shuffle_indices", "data.max_sequence_length", "data.subword_sampling")


def holds_run(run_dir, tokenizer=True):
    """Whether `run_dir` holds a run: a tokenizer (unless `tokenizer` is False: one
    placed there before training, as a study shares its tokenizer, read no data), a
    backup, training curves, a trained model or results. A directory with only
    `run.json` (a first start that failed before its tokenizer was built) holds none."""
    names = ((TOKENIZER_FILE,) if tokenizer else ()) + ("loss_curves.csv", "model.keras",
                                                        "results.json")
    if any(os.path.exists(os.path.join(run_dir, name)) for name in names):
        return True
    backup_dir = os.path.join(run_dir, "backup")
    return os.path.isdir(backup_dir) and bool(tfo_backup.BackupManager(backup_dir).checkpoints())


def resolve_run_config(preset_name, run_dir, overrides=None, run_file=None, log=print,
                       parent=None):
    """`(preset name or None, RunConfig)` for `tf-outheads train` on `run_dir`, refusing a
    mismatch.

    With `run_file` (a user's YAML/JSON run file, `tf_outheads_zoo.stored.load_run_config`;
    not together with `preset_name`), the settings are the file's, then `overrides`;
    the name is the file's `preset:` (`None` when it starts from the defaults).

    Without `preset_name`, a run directory that stores its settings (`stored_run`)
    supplies them (so `train --run-dir R` resumes R as it was trained), else
    `parent`'s (`(name, RunConfig)` of the run `train.init_from` names), else the
    default preset. With one, the stored settings must agree with it, and
    with `overrides`, on every setting but `RESUMABLE_TRAIN_KEYS` and the
    `decode` section, when the directory holds a run (`holds_run`). The
    settings of a first start that failed before its first training step are
    replaced by the new ones, with one logged line; where it built its
    tokenizer already, only if no setting its files depend on differs
    (`RESOURCE_KEYS`, the data section but `BATCHING_KEYS`). Nothing is written.

    Raises:
        RunDirectoryError: naming the run directory, both presets and the
            settings that differ.
    """
    stored = stored_run(run_dir)
    if run_file is not None:
        if preset_name is not None:
            raise ConfigError(f"{run_file}: a run file and a preset ({preset_name}) both "
                              "given; name the preset inside the run file (preset: NAME). "
                              f"Received: preset={preset_name!r}, run_file={run_file!r}")
        name, config = read_run_config(run_file, overrides)
    elif preset_name is None and (stored or parent) is not None:
        name, base = stored if stored is not None else parent
        name = name or DEFAULT_PRESET
        source = (f"preset {name!r} (from "
                  f"{run_dir if stored is not None else 'train.init_from'})")
        config = base.with_overrides(overrides, source)
    else:
        name = preset_name or DEFAULT_PRESET
        config = preset_config(name, overrides)
    if stored is not None:
        stored_name, stored_config = stored
        wanted = json.loads(json.dumps(config.to_dict(), default=str))
        before = json.loads(json.dumps(stored_config.to_dict(), default=str))
        differ = sorted(
            f"{section}.{key}"
            for section in ("data", "model", "train")
            for key in set(wanted[section]) | set(before[section])
            if not (section == "train" and key in RESUMABLE_TRAIN_KEYS)
            and wanted[section].get(key) != before[section].get(key))
        untrained = not holds_run(run_dir, tokenizer=False)
        if differ and (not holds_run(run_dir) or (
                untrained and not any(key in RESOURCE_KEYS or (
                    key.startswith("data.") and key not in BATCHING_KEYS) for key in differ))):
            log(f"[train] {run_dir}: its {os.path.basename(stored_settings_path(run_dir))} "
                f"is from a start that took no training "
                f"step; this command's settings replace it ({', '.join(differ[:8])}"
                f"{', ...' if len(differ) > 8 else ''})")
        elif differ:
            raise RunDirectoryError(
                f"{run_dir} holds a run of preset {stored_name!r}; this command asks "
                f"for {name!r} with other settings ({', '.join(differ[:8])}"
                f"{', ...' if len(differ) > 8 else ''}), which its tokenizer and backups "
                f"do not fit. Resume it with `tf-outheads train --run-dir {run_dir}` (its own "
                "settings; budgets, evaluation and backup settings may change), or give a new "
                "--run-dir. Nothing was changed.")
    return name, config


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
            files.append((f"{key}.tsv" if getattr(data_config, split) else "data.corpus",
                          spec["path"]))
            continue
        several = len(spec["pairs"]) > 1
        for index, pair in enumerate(spec["pairs"]):
            for side, path in zip(("source", "target"), pair):
                files.append((f"{key}{f'[{index}]' if several else ''}.{side}", path))
        files += [(f"{key}.references[{index}]", path)
                  for index, path in enumerate(spec["references"])]
    vectors = (data_config.target_vectors or {}).get("path")
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
                try:
                    recorded = json.load(f).get("files", {})
                except (ValueError, AttributeError):
                    raise RunDirectoryError(
                        f"{path}: damaged (not the JSON record of the data files this run "
                        "trained on), so a resume cannot check them. Restore it, or, if the "
                        "data files did not change, delete it (it is written anew). Nothing "
                        "was changed.") from None
        elif holds_run(run_dir, tokenizer=False):
            # (A tokenizer alone, as a study places one before training, read no data.)
            log(f"[data] {run_dir} holds a run from before data files were fingerprinted: "
                f"resumed unchecked; their fingerprints are recorded now in {path}")
    files = {}
    by_key = {entry.get("key"): entry for entry in recorded.values()}
    for key, file in data_files(data_config):
        # The same setting at another path (the embedded corpus of another installation,
        # `read_stored_run`): its bytes must still be those the run trained on.
        before = recorded.get(file) or by_key.get(key)
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
    if train_config.max_steps is not None:
        return results if steps >= train_config.max_steps else None
    if train_config.max_minutes and backups:
        state = tfo_backup.verify_backup(backups[-1][1]).get("state") or {}
        seconds = (state.get("callbacks") or {}).get("TimeLimit", {}).get("seconds", 0.0)
        return results if seconds >= 60.0 * train_config.max_minutes else None
    return None


def write_json(path, value):
    """`value` as indented JSON in `path` (`run.json`, `data_files.json`, `results.json`)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)


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


# What a write that does not fit fails with: a full disk, a spent quota, a file-size
# limit (`ulimit -f`: the kernel's SIGXFSZ, which Python ignores, leaves EFBIG).
NO_SPACE_ERRNOS = {errno.ENOSPC: "its disk is full", errno.EDQUOT: "its disk quota is spent",
                   errno.EFBIG: "a file reached the file-size limit, ulimit -f"}
DAMAGED_MODEL_REMEDY = ("train again, or restore it from the run's best weights with "
                        "`tf-outheads train --run-dir` after deleting it")


def _no_space(error):
    """The `OSError` of a write that did not fit (`NO_SPACE_ERRNOS`) in `error` or in the
    exceptions it was raised from or while handling (Keras may wrap it), or `None`."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in NO_SPACE_ERRNOS:
            return error
        error = error.__cause__ or error.__context__
    return None


def load_model_file(model_path, compile=True, remedy=DAMAGED_MODEL_REMEDY):
    """The `.keras` model at `model_path`, loaded in Keras' safe mode: a config naming
    a function (a crafted file naming `os.system`) is refused, nothing of it is run.

    Keras extracts the archive into temporary files (`TMPDIR`); when they do not fit
    (a full disk, a quota, a file-size limit), the model is not damaged and is not
    reported so.

    Raises:
        OSError: the temporary files did not fit; the message names the model, `TMPDIR`
            and the cause (never advising to delete the model).
        ValueError: naming `model_path`: not a readable .keras model (damaged, or from
            another program), and `remedy`.
    """
    try:
        if os.path.isfile(model_path) and not zipfile.is_zipfile(model_path):
            # (Keras says "File not found" of a file that is there.)
            raise zipfile.BadZipFile("not a complete zip archive: truncated, or not a "
                                     f".keras file ({os.path.getsize(model_path)} bytes)")
        return keras.saving.load_model(model_path, compile=compile, safe_mode=True)
    except Exception as error:  # a full disk first, whatever exception wraps it
        full = _no_space(error)
        # (Not the system's words, "No space left on device": for those `error_message`
        # adds a training run's advice.)
        if full is not None:
            raise OSError(
                f"no space left for the temporary files of loading {model_path} (TMPDIR="
                f"{tempfile.gettempdir()}: {NO_SPACE_ERRNOS[full.errno]}): free space or set "
                "TMPDIR to another directory, then run the same command again; the model is "
                f"not damaged. Received: errno {errno.errorcode[full.errno]}") from None
        # TypeError: a config naming a class or function Keras will not load in safe
        # mode (a crafted file naming `os.system`).
        if not isinstance(error, (OSError, ValueError, KeyError, TypeError,
                                  zipfile.BadZipFile)):
            raise
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"{model_path}: not a readable .keras model, damaged or from "
                         f"another program ({type(error).__name__}: {first_line}); "
                         f"{remedy}") from None


def load_run(run_dir):
    """`(model, source tokenizer, target tokenizer, RunConfig)`: the trained model and
    tokenizers of a run directory (checked to belong together), and its settings
    (`stored_run`: in today's form, whichever version wrote them)."""
    model_path = os.path.join(run_dir, "model.keras")
    if not os.path.exists(model_path):
        raise FileNotFoundError(f"{model_path}: no trained model in this run directory "
                                "(train first: tf-outheads train --run-dir ...)")
    # (Imports the modules of its own components, `imports:`.)
    config = stored_run(run_dir, required=True)[1]
    # Its model type's class, imported: Keras finds a class only once its module ran.
    config.model.model_class()
    model = load_model_file(model_path)
    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(run_dir)
    check_model_tokenizers(model_path, run_dir, source_tokenizer, target_tokenizer)
    return model, source_tokenizer, target_tokenizer, config


def average_run(run_dir, last, output=None):
    """`tf-outheads average`: the mean of the run's newest `last` backups saved as a
    `.keras` model (default `run_dir/model.averaged.keras`); returns `(output, paths)`.

    Raises:
        ValueError: naming the backup directory, if it holds fewer than `last` backups.
    """
    import functools

    model, source_tokenizer, target_tokenizer, _ = load_run(run_dir)
    backup_dir = os.path.join(run_dir, "backup")
    paths = tfo_backup.BackupManager(backup_dir).last(last)
    if len(paths) < last:
        raise ValueError(f"{backup_dir} holds {len(paths)} backup(s); --last {last} needs as "
                         "many (train.keep_backups)")
    tfo_backup.average_checkpoints(model, paths)
    output = output or os.path.join(run_dir, "model.averaged.keras")
    tfo_backup.write_atomically(output, functools.partial(
        save_model, model, source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer))
    return output, paths


def export_run(run_dir, output, **options):
    """`tf-outheads export`: the SavedModel of a trained run (raw strings in, translations
    out) in `output`, its signatures' defaults the run's decoding settings unless given in
    `options` (`tf_outheads.export.export_options`' names); returns its path. An older
    export at `output` is replaced whole (`tf_outheads.export.atomic`); a directory that is
    not an export is refused before the run is loaded."""
    from tf_outheads.export import export_options, export_translator
    from tf_outheads.export.atomic import check_export_directory

    check_export_directory(output)  # a directory it would not overwrite: before the load
    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    settings = export_options(config.decode.options())
    settings.update({k: v for k, v in options.items() if v is not None})
    return export_translator(model, source_tokenizer, target_tokenizer, output, **settings)


def export_run_ctranslate2(run_dir, output, quantization=None, **options):
    """`tf-outheads export --format ctranslate2`: the run's model as a CTranslate2 model
    directory (`tf_outheads.export.to_ctranslate2`), its decoding defaults the run's
    (`options` over them) where CTranslate2 takes them. Returns `(path, left out)`: the
    defaults it does not take, `{name: value}` (`CTranslate2Translator`). Checked
    before the run is loaded: CTranslate2 installed, the quantization, the directory."""
    from tf_outheads.export import ctranslate2 as ct2
    from tf_outheads.export.atomic import CTRANSLATE2, check_export_directory
    from tf_outheads.decoding.options import DecodeOptions
    from tf_outheads.export.ctranslate2_translator import SUPPORTED_OPTIONS

    ct2.import_ctranslate2()
    if quantization is not None and quantization not in ct2.QUANTIZATIONS:
        raise ValueError(f"--quantize {quantization}: CTranslate2 takes one of "
                         f"{', '.join(ct2.QUANTIZATIONS)}")
    check_export_directory(output, CTRANSLATE2)
    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    settings = config.decode.options()
    settings.update({k: v for k, v in options.items() if v is not None})
    defaults = {field.name: field.default for field in dataclasses.fields(DecodeOptions)}
    kept = {k: v for k, v in settings.items() if k in SUPPORTED_OPTIONS}
    dropped = {k: v for k, v in settings.items()
               if k not in SUPPORTED_OPTIONS and k in defaults and v != defaults[k]}
    path = ct2.to_ctranslate2(model, source_tokenizer, target_tokenizer, output,
                              quantization=quantization, decode=kept)
    return path, dropped

