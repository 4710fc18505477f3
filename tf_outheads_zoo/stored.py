"""Settings read from files: a user's run file (YAML or JSON: `load_run_config`) and a run
directory's stored settings, `run.json` (`preset.json` in directories written before it;
`read_stored_run`, in today's form whichever version wrote it).

A run file may start from a named preset, so this module reads the preset table
(`tf_outheads_zoo.presets`); the schema (`tf_outheads_zoo.config`) does not.
"""

import dataclasses
import difflib
import json
import os

from tf_outheads_zoo.config import EMBEDDED_CORPUS, SECTIONS, RunConfig, TrainConfig
from tf_outheads_zoo.presets import PRESET_CONFIGS
from tf_outheads_zoo.schema import ConfigError, refuse_unknown

# Keys of the data section that hold paths: relative ones in a run file are
# relative to the run file's directory.
_PATH_KEYS = ("corpus", "source", "target", "references", "tsv", "path")


def resolve_paths(data, base):
    """The `data` section of a run file with its relative paths joined to `base`."""
    def resolve(value, key):
        if isinstance(value, dict):
            if "tsv" in value:  # source, target, references: column names
                return {k: resolve(v, k) if k == "tsv" else v for k, v in value.items()}
            return {k: resolve(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v, key) for v in value]
        if key in _PATH_KEYS and isinstance(value, str) and value and not os.path.isabs(value):
            return os.path.normpath(os.path.join(base, os.path.expanduser(value)))
        return value

    paths = {key: resolve(value, key) for key, value in data.items()
             if key in ("corpus", "train", "dev", "test", "target_vectors")}
    return {**data, **paths}


RUN_FILE_KEYS = ("preset", "description", "imports") + SECTIONS
# A run directory's settings: `run.json` (a run file's layout: `preset:` the named preset
# it started from or null, then every section whole); directories written before
# 2026-11-29 hold `preset.json` (`name:` for `preset:`), read the same way.
RUN_FILE = "run.json"
LEGACY_RUN_FILE = "preset.json"


def stored_settings_path(run_dir):
    """The path of `run_dir`'s stored settings: its `run.json`, else the `preset.json` of an
    older run directory; `None` when it holds neither."""
    for name in (RUN_FILE, LEGACY_RUN_FILE):
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            return path
    return None


# `train` keys of a run started from another (`tf_outheads_zoo.init_from`): a child's own,
# never taken from its parent's settings.
INIT_KEYS = ("init_from", "init_optimizer", "update_vocab")


def without_init_keys(config):
    """A stored `RunConfig` as a child's base settings: its own `INIT_KEYS` reset."""
    defaults = TrainConfig()
    return dataclasses.replace(config, train=dataclasses.replace(
        config.train, **{key: getattr(defaults, key) for key in INIT_KEYS}))


# Bounds of a parsed run or study file (a few KB in practice): its size, and the values
# it holds once YAML aliases are expanded (nine levels of nine aliases are 387M values
# from a 1 KB file, which writing run.json would expand) and how deep they nest.
MAX_FILE_BYTES = 1 << 20
MAX_VALUES = 100_000
MAX_DEPTH = 50


def _check_bounds(values, path):
    """Refuses a parsed file holding more than `MAX_VALUES` values (aliases counted each
    time they are used) or nested deeper than `MAX_DEPTH`, before anything reads it."""
    count, stack = 0, [(values, 1)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES or depth > MAX_DEPTH:
            what = (f"more than {MAX_VALUES:,} values (YAML aliases counted each time they "
                    "are used)" if count > MAX_VALUES else f"values nested deeper than "
                    f"{MAX_DEPTH} levels")
            raise ConfigError(f"{path}: holds {what}; a run or study file is a few settings. "
                              "Nothing was written.")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for pair in value.items() for item in pair)
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)


def _read_mapping(path, expected=None, what="run file"):
    """A YAML (or, for `.json`, JSON) file's top-level mapping, bounded (`MAX_FILE_BYTES`,
    `_check_bounds`). `expected`: the top-level keys named when the file is not a mapping
    (default `RUN_FILE_KEYS`), `what` the kind of file."""
    with open(path, encoding="utf-8") as f:
        text = f.read(MAX_FILE_BYTES + 1)
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; a {what} is a few "
                          "settings (the data goes in files it names). Nothing was written.")
    try:
        if path.endswith(".json"):
            try:
                values = json.loads(text)
            except ValueError as error:
                raise ConfigError(f"{path}: not valid JSON ({error})") from None
        else:
            import yaml

            try:
                values = yaml.safe_load(text)
            except yaml.YAMLError as error:
                raise ConfigError(f"{path}: not valid YAML ({' '.join(str(error).split())})") \
                    from None
    except RecursionError:
        raise ConfigError(f"{path}: values nested too deep to read; a {what} is a few "
                          "settings. Nothing was written.") from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: a {what} is a mapping of "
                          f"{', '.join(expected or RUN_FILE_KEYS)}. "
                          f"Received: {type(values).__name__}")
    _check_bounds(values, path)
    return values


def read_run_config(path, overrides=None):
    """`(preset_name or None, RunConfig)` of a run file (see `load_run_config`)."""
    path = os.fspath(path)
    values = _read_mapping(path)
    refuse_unknown(values, RUN_FILE_KEYS, path, "top-level key", "A run file has")
    name = values.get("preset")
    base = os.path.dirname(os.path.abspath(path))
    train = values.get("train") if isinstance(values.get("train"), dict) else {}
    parent = train.get("init_from")
    if isinstance(parent, str):  # a trained run, relative to the run file
        parent = os.path.normpath(os.path.join(base, os.path.expanduser(parent)))
        values = {**values, "train": {**train, "init_from": parent}}
    elif parent is None and isinstance((overrides or {}).get("train.init_from"), str):
        parent = (overrides or {})["train.init_from"]  # `train --init-from R --config FILE`
    parent_settings = stored_settings_path(parent) if isinstance(parent, str) else None
    if name is None and parent_settings is not None:
        # A child run without `preset:` starts from its parent's settings.
        name, stored = read_stored_run(parent_settings)
        config = without_init_keys(stored)
    elif name is None:
        config = RunConfig()
    else:
        if name not in PRESET_CONFIGS:
            close = difflib.get_close_matches(str(name), PRESET_CONFIGS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{path}: unknown preset{hint}. Available: "
                              f"{', '.join(sorted(PRESET_CONFIGS))}. Received: preset={name!r}")
        config = PRESET_CONFIGS[name]
    description = values.get("description")
    if description is None:
        description = (f"{name}, " if name else "") + f"settings of {os.path.basename(path)}"
    if not isinstance(description, str):
        raise ConfigError(f"{path}: description must be str. "
                          f"Received: description={description!r}")
    config = config.with_imports(values.get("imports") or [], path)
    changes = {section: values[section] for section in SECTIONS
               if values.get(section) is not None}
    if isinstance(changes.get("data"), dict):
        changes["data"] = resolve_paths(changes["data"], base)
    config = config.updated(changes, path, description=description)
    return name, config.with_overrides(overrides, f"--set (or an option) over {path}")


def load_run_config(path, overrides=None):
    """The settings of a user's run file, a `RunConfig` (as `preset_config` gives a preset's).

    The file (YAML, or JSON for a `.json` name) is a mapping with an optional
    `preset:` (the base; default: the schema's defaults), an optional
    `description:` and any of the sections `data`, `model`, `train`, `decode`,
    each a mapping of the keys it changes::

        preset: lstm-cpu
        data:
          corpus: my-corpus.tsv
          source_column: de
          target_column: en
          reference_columns: []
        train:
          max_minutes: 30

    Plain-text corpora (one sentence per line, `.gz` read as gzip; the
    training files are streamed, never held in memory)::

        preset: transformer-base
        data:
          train: {source: corpora/train.de.gz, target: corpora/train.en.gz}
          dev: {source: corpora/newstest2013.de, target: corpora/newstest2013.en}
          test: {source: corpora/newstest2014.de, target: corpora/newstest2014.en,
                 references: [corpora/newstest2014.en.alt]}
          vocab_size: 32000

    Relative paths in the `data` section are relative to the run file's
    directory (`resolve_paths`); the stored `run.json` holds them absolute.

    `imports:` lists modules that register the run's own components (a model type,
    a head, a loss: docs/architecture.md, "Registries"), imported before the
    sections are checked; `run.json` keeps the list, so `translate`, `export`
    and a resumed run import them too::

        imports: [my_project.heads]
        preset: lstm-cpu
        model: {head: my_head}

    Args:
        path: str or path-like.
        overrides: dotted overrides applied after the file (`--set`).

    Returns:
        A `RunConfig`.

    Raises:
        ConfigError: naming the file and the key; OSError: unreadable file.
    """
    return read_run_config(path, overrides)[1]


def stored_run_dict(config, name):
    """What a run directory stores (`RUN_FILE`): `{"preset": name, **config.to_dict()}`."""
    return {"preset": name, **config.to_dict()}


def read_stored_run(path):
    """`(preset name or None, RunConfig)` of a run directory's `run.json` (or an older
    directory's `preset.json`, `stored_settings_path`), in today's form.

    Files written before a key existed resume as they trained: the key gets its
    `legacy` value (`data.bucket_width` 8, `data.strip_target_suffixes` none);
    `train.model_type` is read as `model.model_type`. A `data.corpus` naming the
    embedded corpus of another installation names this one's.

    Raises:
        ValueError: not JSON; ConfigError: a key the schema does not know.
    """
    with open(path, encoding="utf-8") as f:
        stored = json.load(f)
    if not isinstance(stored, dict):
        raise ConfigError(f"{path}: expected a mapping. Received: {type(stored).__name__}")
    name = stored.get("preset", stored.get("name"))  # ("name": preset.json)
    sections = {key: value for key, value in stored.items() if key not in ("name", "preset")}
    data = sections.get("data")
    if isinstance(data, dict) and _is_embedded_corpus(data.get("corpus")):
        # The embedded corpus was stored as the path of the installation that trained:
        # it is this installation's own (a checkout moved, another venv); its
        # fingerprint in data_files.json still guards a resume.
        sections["data"] = {**data, "corpus": EMBEDDED_CORPUS}
    return name, RunConfig.from_dict(sections, path, stored=True)


def _is_embedded_corpus(path):
    """Whether `path` is the embedded corpus of some installation of the zoo."""
    if not isinstance(path, str):
        return False
    tail = os.path.join(*EMBEDDED_CORPUS.split(os.sep)[-3:])  # tf_outheads_zoo/data/NAME
    return os.path.normpath(path).endswith(os.sep + tail)
