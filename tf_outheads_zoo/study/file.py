"""A study written as a file: `tf-outheads study --config study.yaml` (issue 39).

The file (YAML, or JSON for a `.json` name) says which heads to compare on which data,
for how long, over which seeds, and what the user expects::

    title: Heads on my corpus            # optional
    data:                                # a run file's data keys, for every arm
      train: {source: corpora/train.de, target: corpora/train.en}
      dev:   {source: corpora/dev.de,   target: corpora/dev.en}
      test:  {source: corpora/test.de,  target: corpora/test.en}
    budget: {steps: 20000}               # or {minutes: 60}: the same for every arm
    seeds: [1, 2, 3]
    eval_every: 1000                     # steps between dev evaluations (default 300)
    arms:
      tied:  {preset: transformer-base-tied}
      joint: {preset: transformer-base-tied,
              set: {model.head: {class_name: joint, config: {joint_dim: 1024}}}}
    baseline: tied                       # default: the first arm
    claims:                              # optional
      - {arm: joint, baseline: tied, expect: +0.5}   # holds if the interval is above +0.5
    select_by: dev_bleu                  # how a winner is chosen (never on test)

An arm may also give its own `seeds` and extra `decodings` (`{beam5: {beam_size: 5}}`);
a claim its `text`, `paper` (what the paper reports), or `margin` instead of `expect`
(a "not worse" claim: holds when the arm is within `margin` BLEU of the baseline).
Relative paths in `data` are relative to the study file. Every arm's settings are
checked against the schema when the file is read (errors name the file and the key).
"""

import collections.abc
import difflib
import functools
import os
import re

from tf_outheads_zoo.schema import ConfigError, refuse_unknown
from tf_outheads_zoo.study.definition import BUILTIN_DIR, RESERVED_NAMES, Arm, Claim, Study

STUDY_KEYS = ("title", "notes", "paper", "data", "budget", "seeds", "eval_every", "arms",
              "baseline", "claims", "select_by")
ARM_KEYS = ("preset", "set", "seeds", "decodings")
CLAIM_KEYS = ("arm", "baseline", "expect", "margin", "text", "paper")
SELECT_BY = ("dev_bleu", "dev_cross_entropy")


def _mapping(value, where):
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping. Received: {value!r}")
    return value


def _seeds(value, where):
    if (not isinstance(value, list) or not value
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in value)):
        raise ConfigError(f"{where} must be a non-empty list of ints. Received: {value!r}")
    repeated = sorted({s for s in value if value.count(s) > 1})
    if repeated:
        # A seed twice would be one run counted twice (issue 54).
        raise ConfigError(f"{where} must name each seed once; repeated: "
                          f"{', '.join(map(str, repeated))}. Received: {value!r}")
    return tuple(value)


def _number(value, where):
    """`+0.5`, `0.5`, `"+0.5 BLEU"` → 0.5."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = re.fullmatch(r"\s*([+-]?\d+(?:\.\d+)?)\s*(?:BLEU)?\s*", str(value))
    if not match:
        raise ConfigError(f"{where} must be a number of BLEU points (e.g. +0.5). "
                          f"Received: {value!r}")
    return float(match.group(1))


def _repeated_key(node, where=""):
    """`(dotted key, first line, line)` of the first key that a mapping of a composed YAML
    `node` gives twice (in the file's order), else None."""
    import yaml

    if isinstance(node, yaml.SequenceNode):
        items = [(f"{where}[{index}]", value) for index, value in enumerate(node.value)]
    elif isinstance(node, yaml.MappingNode):
        lines, items = {}, []
        for key, value in node.value:
            name = f"{where}.{key.value}" if where else str(key.value)
            if isinstance(key, yaml.ScalarNode):
                if key.value in lines:
                    return name, lines[key.value], key.start_mark.line + 1
                lines[key.value] = key.start_mark.line + 1
            items.append((name, value))
    else:
        return None
    for name, value in items:
        found = _repeated_key(value, name)
        if found:
            return found
    return None


def _refuse_repeated_keys(path):
    """Refuses a YAML study file giving a key twice in one mapping: PyYAML keeps the last
    silently (two arms of one name were one arm, and the study "needed two arms")."""
    import yaml

    if path.endswith(".json"):
        return
    with open(path, encoding="utf-8") as f:
        found = _repeated_key(yaml.compose(f.read(), Loader=yaml.SafeLoader))
    if found:
        key, first, line = found
        raise ConfigError(f"{path}: {key} is given twice, and YAML would keep only the last: "
                          f"give each key once. Received: {key} on lines {first} and {line}")


def read_study_file(path):
    """The `Study` of a study file, checked (see the module doc).

    Raises:
        ConfigError: naming the file and the key; OSError: an unreadable file.
    """
    from tf_outheads_zoo.components import check_components
    from tf_outheads_zoo.presets import PRESET_CONFIGS
    from tf_outheads_zoo.stored import _read_mapping, resolve_paths

    path = os.fspath(path)
    values = _read_mapping(path, STUDY_KEYS, "study file")
    _refuse_repeated_keys(path)
    refuse_unknown(values, STUDY_KEYS, path)
    data = _mapping(values.get("data") or {}, f"{path}: data")
    data = resolve_paths(data, os.path.dirname(os.path.abspath(path)))
    budget = _mapping(values.get("budget") or {"steps": 1500}, f"{path}: budget")
    refuse_unknown(budget, ("steps", "minutes"), f"{path}: budget")
    if len(budget) != 1:
        raise ConfigError(f"{path}: budget is {{steps: N}} or {{minutes: M}}, one of the two. "
                          f"Received: budget={budget!r}")
    steps, minutes = budget.get("steps"), budget.get("minutes")
    for key, value in budget.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
                or (key == "steps" and not isinstance(value, int)):
            raise ConfigError(f"{path}: budget.{key} must be a positive number"
                              f"{' (an int)' if key == 'steps' else ''}. Received: {value!r}")
    eval_every = values.get("eval_every", 300)
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
        raise ConfigError(f"{path}: eval_every must be an int >= 1. Received: {eval_every!r}")
    seeds = _seeds(values["seeds"], f"{path}: seeds") if "seeds" in values else None

    arms_values = _mapping(values.get("arms"), f"{path}: arms")
    if len(arms_values) < 2:
        raise ConfigError(f"{path}: arms needs at least two arms to compare. "
                          f"Received: arms={arms_values!r}")
    data_overrides = tuple((f"data.{key}", value) for key, value in data.items())
    arms = {}
    for name, arm in arms_values.items():
        where = f"{path}: arms.{name}"
        if (not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name)
                or name in RESERVED_NAMES):
            raise ConfigError(f"{path}: arms: an arm's name is its runs' directory: letters, "
                              "digits and _.+- (not starting with one of these), and none of "
                              f"{', '.join(RESERVED_NAMES)}. Received: {name!r}")
        arm = _mapping(arm, where)
        refuse_unknown(arm, ARM_KEYS, where)
        preset = arm.get("preset")
        if preset not in PRESET_CONFIGS:
            close = difflib.get_close_matches(str(preset), PRESET_CONFIGS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}.preset: unknown preset{hint}; `tf-outheads presets` "
                              f"lists them. Received: preset={preset!r}")
        settings = _mapping(arm.get("set") or {}, f"{where}.set")
        overrides = data_overrides + tuple(settings.items())
        # Checked now, as the run will apply them: a wrong key or a name nobody registered
        # fails before any arm trains.
        try:
            check_components(PRESET_CONFIGS[preset].with_overrides(dict(overrides), where))
        except ConfigError as error:
            message = str(error)
            raise ConfigError(message if message.startswith(path) else f"{where}: {message}") \
                from None
        decodings = _mapping(arm.get("decodings") or {}, f"{where}.decodings")
        arms[str(name)] = Arm(preset, overrides,
                              seeds=_seeds(arm["seeds"], f"{where}.seeds") if "seeds" in arm
                              else None,
                              decodings=tuple((str(k), dict(_mapping(v, f"{where}.decodings.{k}")))
                                              for k, v in decodings.items()))
    baseline = values.get("baseline", next(iter(arms)))
    if baseline not in arms:
        raise ConfigError(f"{path}: baseline must be one of the arms ({', '.join(arms)}). "
                          f"Received: baseline={baseline!r}")
    claims = []
    for index, claim in enumerate(values.get("claims") or []):
        where = f"{path}: claims[{index}]"
        claim = _mapping(claim, where)
        refuse_unknown(claim, CLAIM_KEYS, where)
        arm, against = claim.get("arm"), claim.get("baseline", baseline)
        for key, value in (("arm", arm), ("baseline", against)):
            if value not in arms:
                raise ConfigError(f"{where}.{key} must be one of the arms "
                                  f"({', '.join(arms)}). Received: {key}={value!r}")
        if "expect" in claim and "margin" in claim:
            raise ConfigError(f"{where}: give expect (the arm is better by at least this) or "
                              f"margin (not worse by more than this), not both. "
                              f"Received: {claim!r}")
        if "margin" in claim:
            margin = _number(claim["margin"], f"{where}.margin")
            kind, threshold = "not_worse", -abs(margin)
            text = claim.get("text") or f"{arm} is within {abs(margin):g} BLEU of {against}"
        else:
            threshold = _number(claim.get("expect", 0.0), f"{where}.expect")
            kind = "better"
            text = claim.get("text") or (f"{arm} beats {against}" + (
                f" by more than {threshold:+g} BLEU" if threshold else ""))
        claims.append(Claim(str(text), arm, against, str(claim.get("paper", "—")), kind=kind,
                            threshold=threshold))
    select_by = values.get("select_by", "dev_bleu")
    if select_by not in SELECT_BY:
        raise ConfigError(f"{path}: select_by must be one of {', '.join(SELECT_BY)} (the "
                          f"winner is never chosen on test). Received: select_by={select_by!r}")
    return Study(title=str(values.get("title") or os.path.basename(path)),
                 paper=str(values.get("paper", "")), arms=arms, baseline=baseline,
                 claims=tuple(claims), steps=steps, minutes=minutes, eval_every=eval_every,
                 notes=str(values.get("notes", "")), seeds=seeds, select_by=select_by)


# -- the built-in studies ----------------------------------------------------------------
def builtin_study_path(name):
    """The study file of built-in study `name` (`BUILTIN_DIR/<name>.yaml`)."""
    return os.path.join(BUILTIN_DIR, f"{name}.yaml")


@functools.lru_cache(maxsize=None)
def _read_builtin(name):
    return read_study_file(builtin_study_path(name))


class _Studies(collections.abc.MutableMapping):
    """`{name: Study}` of the built-in studies, each read from its shipped file when first
    asked for (the names need no file read: `tf-outheads study --help` loads no
    TensorFlow). A study set here (a test's) hides a file of that name."""

    def __init__(self):
        self._set = {}

    def _names(self):
        files = sorted(n[:-5] for n in os.listdir(BUILTIN_DIR) if n.endswith(".yaml"))
        # The papers' order, as the results page has always had it.
        order = ("pappas", "liu", "jauregi", "kumar")
        files = [n for n in order if n in files] + [n for n in files if n not in order]
        return files + [n for n in self._set if n not in files]

    def __getitem__(self, name):
        if name in self._set:
            return self._set[name]
        if name not in self._names():
            raise KeyError(name)
        return _read_builtin(name)

    def __setitem__(self, name, study):
        self._set[name] = study

    def __delitem__(self, name):
        del self._set[name]

    def __iter__(self):
        return iter(self._names())

    def __len__(self):
        return len(self._names())


STUDIES = _Studies()


def get_study(name):
    """The built-in study `name` (its shipped file, read and checked)."""
    if name not in STUDIES:
        raise ValueError(f"Unknown study {name!r}. Available: {', '.join(STUDIES)}")
    return STUDIES[name]
