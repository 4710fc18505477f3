"""What a study is: its arms, claims, budget and seeds (the built-in ones, one per paper,
are study files in `builtin/`: `file.STUDIES`), where its runs live
(`arm_run_dir`, `finished_runs`), and the settings each run was trained with
(`run_settings`, `check_run_settings`).

`tf_outheads_zoo.study.runner` trains and records the runs named here;
`tf_outheads_zoo.study.report` reads them back.
"""

import dataclasses
import hashlib
import json
import os
import re

# The built-in studies' runs: `DEFAULT_RUNS_DIR/<study>/<arm>/s<seed>`.
DEFAULT_RUNS_DIR = os.path.join("runs", "study")
# The committed copy of every finished run's light files (`runner.record_run`), as
# `RECORDS_DIR/<study>/<arm>/s<seed>`.
RECORDS_DIR = os.path.join("docs", "results", "study")
# The built-in studies' files: `BUILTIN_DIR/<name>.yaml`.
BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")
# SentencePiece's seed for every run of every study (data.tokenizer_seed).
TOKENIZER_SEED = 1234
# The seeds of a study file that names none.
DEFAULT_SEEDS = (1234, 1, 2)
# What a run directory holds besides the arms' runs: no arm may be called so.
RESERVED_NAMES = ("tokenizers", "results", "results.md", "results.json", "winner", "plan.json")
# Each run's settings, written before it trains (`run_settings`).
SETTINGS_FILE = "study_run.json"
# Each finished run's dev/test cross-entropy by forced decoding (`runner.score_run`).
CROSS_ENTROPY_FILE = "cross_entropy.json"
# A study's seeds as it first started, and seeds added later (`runner.run_study`).
PLAN_FILE = "plan.json"


@dataclasses.dataclass(frozen=True)
class Arm:
    """One system of a study: a preset, dotted overrides, and optional extra decodings.

    `decodings` maps a suffix to `translate` options run after training on dev
    and test (`{"beam5": {"beam_size": 5}}` writes `dev.beam5.hyp`); each is
    reported as its own row, `"<arm> (<suffix>)"`.
    """

    preset: str
    overrides: tuple = ()
    decodings: tuple = ()
    seeds: tuple = None  # its own seeds, else the study's

    def override_dict(self):
        return dict(self.overrides)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A paper's claim about `arm` against `baseline` on test BLEU (`paper_delta`: what
    the paper reports). `kind` `"better"`: the arm beats the baseline; `"not_worse"`:
    the arm is within a margin of it. `threshold`: the improvement the interval over
    seeds must exceed for the claim to hold (0 for "better"; minus the margin for
    "not_worse"); below it, the claim is contradicted (`verdicts.claim_verdict`)."""

    text: str
    arm: str
    baseline: str
    paper_delta: str
    kind: str = "better"
    threshold: float = 0.0


@dataclasses.dataclass(frozen=True)
class Study:
    title: str
    paper: str
    arms: dict
    baseline: str
    claims: tuple = ()
    steps: int = 1500
    minutes: float = None  # equal wall clock instead of equal steps
    eval_every: int = 300
    notes: str = ""
    seeds: tuple = None  # every arm's seeds; None: DEFAULT_SEEDS
    select_by: str = "dev_bleu"  # how a winner is chosen (never on test)


def study_seeds(study, arm_name, seeds=None):
    """The seeds an arm runs: `seeds` (the command's), the arm's own, the study's, or
    `DEFAULT_SEEDS`. A seed named twice is a `ConfigError` naming the key and the seed
    (one run counted twice: the study announced 4 runs and reported one seed)."""
    from tf_outheads_zoo.schema import ConfigError

    arm = study.arms[arm_name]
    for key, chosen in (("--seeds", seeds), (f"arms.{arm_name}.seeds", arm.seeds),
                        ("seeds", study.seeds)):
        if chosen is not None:
            chosen = tuple(chosen)
            repeated = sorted({s for s in chosen if chosen.count(s) > 1})
            if repeated:
                raise ConfigError(f"{key} must name each seed once; repeated: "
                                  f"{', '.join(map(str, repeated))} (a seed twice is one run "
                                  f"counted twice). Received: {','.join(map(str, chosen))}")
            return chosen
    return DEFAULT_SEEDS


# -- where the runs live -----------------------------------------------------------------
def short_hash(value):
    """10 hex digits of the SHA-256 of `value`'s JSON (keys sorted): names a directory."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]


def budget_name(steps=None, minutes=None):
    return f"{minutes:g} minutes" if minutes else f"{steps} steps"


def arm_run_dir(runs_dir, arm_name, seed):
    """`RUNS_DIR/<arm>/s<seed>`: where one seed of one arm trains."""
    return os.path.join(runs_dir, arm_name, f"s{seed}")


def seed_of(entry):
    """The seed of a run directory's name `s<seed>` (`arm_run_dir`), else None: `s1234.tmp`
    (an interrupted restore), `s--3` and `backup` are not runs."""
    match = re.fullmatch(r"s(-?[0-9]+)", entry)
    return int(match.group(1)) if match else None


def finished_runs(runs_dir, study, arm_name):
    """`{seed: run_dir}` of the finished runs (a `results.json`) of one arm under
    `runs_dir`, each checked against the study's settings (`check_run_settings`)."""
    parent = os.path.join(runs_dir, arm_name)
    found = {}
    if not os.path.isdir(parent):
        return found
    for entry in sorted(os.listdir(parent)):
        run_dir = os.path.join(parent, entry)
        seed = seed_of(entry)
        if seed is not None and os.path.exists(os.path.join(run_dir, "results.json")):
            check_run_settings(run_dir, run_settings(study, arm_name, seed))
            found[seed] = run_dir
    return dict(sorted(found.items()))


# -- what a run was trained with -------------------------------------------------------
def run_settings(study, arm_name, seed):
    """What decides one run's model: `{"arm", "preset", "set", "seed", "budget",
    "eval_every"}`."""
    arm = study.arms[arm_name]
    budget = {"minutes": study.minutes} if study.minutes else {"steps": study.steps}
    return {"arm": arm_name, "preset": arm.preset,
            "set": json.loads(json.dumps(dict(arm.overrides), default=str)),
            "seed": int(seed), "budget": budget, "eval_every": study.eval_every}


def _differences(stored, expected, prefix=""):
    """`[(dotted key, stored value, expected value)]` where two settings dicts differ. The
    overrides (`set`) compare key by key, each value whole (`set.model.head`)."""
    keys = []
    for key in list(expected) + [k for k in stored if k not in expected]:
        a, b = stored.get(key, "<unset>"), expected.get(key, "<unset>")
        if isinstance(a, dict) and isinstance(b, dict) and not prefix.startswith("set."):
            keys += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            keys.append((prefix + key, a, b))
    return keys


def _study_key(run_key, arm_name):
    """The study file's name for a setting: `budget.steps`, `arms.<arm>.set.<key>`, or
    `data.<key>` for the study's data (applied to every arm as `set: data.<key>`)."""
    if run_key.startswith("set.data."):
        return run_key[len("set."):]
    if run_key.startswith(("set", "preset")):
        return f"arms.{arm_name}.{run_key}"
    return run_key


def check_run_settings(run_dir, expected):
    """Refuses a run trained (or training) with other settings than `expected`
    (`run_settings`): a `ConfigError` naming the study file's key, both values, and
    what to do. A run without a settings file (one recorded before they existed) passes.
    """
    from tf_outheads_zoo.schema import ConfigError

    path = os.path.join(run_dir, SETTINGS_FILE)
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        stored = json.load(f)
    differences = _differences(stored, expected)
    if differences:
        key, was, now = differences[0]
        raise ConfigError(
            f"{run_dir} was trained with {_study_key(key, expected['arm'])}="
            f"{json.dumps(was)}, but the study now says {json.dumps(now)}"
            + (f" (and {len(differences) - 1} more setting(s) differ)"
               if len(differences) > 1 else "")
            + ". A study never retrains or mixes runs of other settings: restore the study "
            "file (or drop --steps), or give another --runs-dir.")


def check_run_model(run_dir, arm):
    """Refuses a finished run whose model differs from what its arm's preset and
    overrides give today: a preset changed by an update of the library (issue 53 turned
    `model.scaled_attention` on for the CPU presets), which the study's own settings
    (`check_run_settings`) cannot see. A `ConfigError` naming the first differing key
    and both values; an unfinished run (training resumes check it) or one without a
    `run.json` (`preset.json`) passes."""
    from tf_outheads_zoo.schema import ConfigError
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.stored import read_stored_run, stored_settings_path

    path = stored_settings_path(run_dir)
    if path is None or not os.path.exists(os.path.join(run_dir, "results.json")):
        return
    stored = json.loads(json.dumps(read_stored_run(path)[1].to_dict()["model"], default=str))
    today = json.loads(json.dumps(
        preset_config(arm.preset, arm.override_dict()).to_dict()["model"], default=str))
    differences = _differences(stored, today, "model.")
    if differences:
        key, was, now = differences[0]
        raise ConfigError(
            f"{run_dir} was trained with {key}={json.dumps(was)}, but preset {arm.preset} "
            f"(with the arm's settings) now gives {json.dumps(now)}"
            + (f" (and {len(differences) - 1} more model setting(s) differ)"
               if len(differences) > 1 else "")
            + ": the preset changed since the run. A study never mixes runs of other "
            "settings: give another --runs-dir to train it anew.")


def write_run_settings(run_dir, settings):
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, SETTINGS_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2)
    os.replace(path + ".tmp", path)


def added_seeds(runs_dir):
    """`[{"arm", "seeds", "time"}]`: seeds that a later start of a study added to those it
    first started with (`PLAN_FILE`, written by `runner.run_study`); [] without it."""
    path = os.path.join(runs_dir, PLAN_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("added", [])
