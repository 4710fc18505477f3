"""Training a study's runs, one `tf-outheads train` subprocess at a time, on one shared
tokenizer, and recording each finished run's light files (`record_run`)."""

import json
import os
import shutil
import subprocess
import sys

from tf_outheads_zoo.study.definition import (
    DEFAULT_RUNS_DIR, RECORDS_DIR, TOKENIZER_SEED, arm_run_dir, budget_name, get_study,
    short_hash, study_seeds)

# What a record holds besides the translations and their references (`record_run`).
RECORD_FILES = ("results.json", "bleu.jsonl", "loss_curves.csv", "preset.json", "history.csv")
# The subprocesses run here, where `python -m tf_outheads_zoo.cli` finds the package.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokenizer_dir(runs_dir, preset_name, overrides=None, log=print):
    """The shared tokenizer of this data configuration, built once.

    Returns the directory holding `tokenizer.json` and the SentencePiece
    model(s), trained with `TOKENIZER_SEED` on the preset's cleaned training split.
    """
    from tf_outheads import data as tfo_data
    from tf_outheads_zoo.config import data_set
    from tf_outheads_zoo.presets import get_preset
    from tf_outheads_zoo.splits import TrainingData, load_splits

    preset = get_preset(preset_name, overrides)
    data_config = preset["data"]
    relevant = {k: data_config[k] for k in (
        "source_column", "target_column", "strip_target_suffixes", "max_length",
        "max_length_ratio", "vocab_size", "joint_vocabulary", "tokenizer_type")}
    # The corpus by name and size, not by path: a checkout elsewhere finds its tokenizers.
    relevant["corpus"] = [os.path.basename(data_config["corpus"]),
                          os.path.getsize(data_config["corpus"])]
    if data_config.get("train") is not None:  # text files (a study file's data)
        relevant["train"] = [[os.path.basename(p), os.path.getsize(p)]
                             for pair in data_set(data_config, "train").get("pairs", [])
                             for p in pair] or data_config["train"]
        relevant["tokenizer_sample"] = data_config["tokenizer_sample"]
    directory = os.path.join(runs_dir, "tokenizers", short_hash(relevant))
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        if data_config.get("train") is not None:
            # The pairs a run's own tokenizer would learn from (data.tokenizer_sample).
            train = TrainingData(data_config, seed=TOKENIZER_SEED, log=lambda *_: None).sample
        else:
            train = load_splits(data_config, log=lambda *_: None)["train"]
        tfo_data.build_tokenizers(
            train.sources, train.targets, directory,
            vocab_size=data_config["vocab_size"], joint=data_config["joint_vocabulary"],
            model_type=data_config["tokenizer_type"], seed=TOKENIZER_SEED)
        with open(os.path.join(directory, "data_config.json"), "w", encoding="utf-8") as f:
            json.dump(relevant, f, indent=2)
        log(f"[study] tokenizer for {preset_name} → {directory}")
    return directory


def _literal(value):
    return repr(value)


def train_arm(runs_dir, arm, seed, steps=None, minutes=None, eval_every=300, log=print,
              records_dir=None):
    """Trains one arm for one seed (unless finished); returns its run directory.

    The run is `tf-outheads train` in a subprocess (its log in `train.log`) with
    the arm's overrides plus `train.seed`, the step or time budget, evaluation
    every `eval_every` steps, no early stopping, and the shared tokenizer.
    With `records_dir`, the finished run (and its extra decodings) is recorded
    there (`record_run`).
    """
    run_dir = arm_run_dir(runs_dir, arm, seed, steps, minutes)
    if not os.path.exists(os.path.join(run_dir, "results.json")):
        source = tokenizer_dir(runs_dir, arm.preset, arm.override_dict(), log=log)
        os.makedirs(run_dir, exist_ok=True)
        for name in os.listdir(source):
            if name.startswith("spm_") or name == "tokenizer.json":
                if not os.path.exists(os.path.join(run_dir, name)):
                    shutil.copy(os.path.join(source, name), os.path.join(run_dir, name))
        overrides = dict(arm.overrides)
        overrides.update({
            "data.tokenizer_seed": TOKENIZER_SEED,
            "train.seed": seed,
            "train.max_steps": None if minutes else steps,
            "train.max_minutes": minutes,
            "train.steps_per_epoch": eval_every,
            "train.patience": None,
        })
        command = [sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", arm.preset,
                   "--run-dir", run_dir]
        for key, value in overrides.items():
            command += ["--set", f"{key}={_literal(value)}"]
        log(f"[study] {arm.preset} seed {seed} ({budget_name(steps, minutes)}) → {run_dir}")
        env = dict(os.environ, TF_OUTHEADS_QUIET="1", TF_CPP_MIN_LOG_LEVEL="2")
        with open(os.path.join(run_dir, "train.log"), "a", encoding="utf-8") as out:
            subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=True,
                           cwd=_PACKAGE_PARENT)
    for suffix, options in arm.decodings:
        _decode_variant(run_dir, suffix, dict(options), log=log)
    if records_dir:
        record_run(run_dir, runs_dir, records_dir, log=log)
    return run_dir


def record_run(run_dir, runs_dir, records_dir, log=print):
    """Copies a finished run's light files to the same relative place under `records_dir`.

    Recorded: `RECORD_FILES`, every `*.hyp` (dev, test and extra decodings), and
    `<split>.ref`, the references the run was scored against
    (`tf_outheads_zoo.compare.run_references`), so that a record needs neither the corpus
    nor the weights. Files are replaced atomically; returns the record's path.

    Raises:
        FileNotFoundError: `run_dir` has no `results.json` (not finished).
    """
    from tf_outheads_zoo.compare import run_references

    if not os.path.exists(os.path.join(run_dir, "results.json")):
        raise FileNotFoundError(f"{os.path.join(run_dir, 'results.json')}: the run has not "
                                "finished; only finished runs are recorded")
    target = os.path.join(records_dir, os.path.relpath(run_dir, runs_dir))
    os.makedirs(target, exist_ok=True)
    names = [n for n in os.listdir(run_dir) if n in RECORD_FILES or n.endswith(".hyp")]
    for name in names:
        shutil.copyfile(os.path.join(run_dir, name), os.path.join(target, name + ".tmp"))
        os.replace(os.path.join(target, name + ".tmp"), os.path.join(target, name))
    for split in ("dev", "test"):
        path = os.path.join(target, f"{split}.ref")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(run_references(run_dir, split)) + "\n")
        os.replace(path + ".tmp", path)
    log(f"[study] recorded {run_dir} → {target}")
    return target


def collect_records(runs_dir, records_dir=RECORDS_DIR, log=print):
    """Records every finished run under `runs_dir/runs` (`record_run`); returns their count."""
    count = 0
    root = os.path.join(runs_dir, "runs")
    for arm_name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        for entry in sorted(os.listdir(os.path.join(root, arm_name))):
            run_dir = os.path.join(root, arm_name, entry)
            if os.path.exists(os.path.join(run_dir, "results.json")):
                record_run(run_dir, runs_dir, records_dir, log=log)
                count += 1
    return count


def _decode_variant(run_dir, suffix, options, log=print):
    """`tf-outheads translate` of dev and test with `options` → `<split>.<suffix>.hyp`."""
    from tf_outheads_zoo.splits import read_split

    with open(os.path.join(run_dir, "preset.json"), encoding="utf-8") as f:
        data_config = json.load(f)["data"]
    for split in ("dev", "test"):
        output = os.path.join(run_dir, f"{split}.{suffix}.hyp")
        if os.path.exists(output):
            continue
        source = os.path.join(run_dir, f"{split}.src")
        with open(source, "w", encoding="utf-8") as f:
            f.write("\n".join(read_split(data_config, split, log=lambda *_: None).sources)
                    + "\n")
        command = [sys.executable, "-m", "tf_outheads_zoo.cli", "translate", "--run-dir", run_dir,
                   "--input", source, "--output", output + ".tmp"]
        for name, value in options.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL,
                       cwd=_PACKAGE_PARENT)
        os.replace(output + ".tmp", output)
        log(f"[study] {run_dir}: {split} decoded with {options} → {output}")


def run_study(name, runs_dir=DEFAULT_RUNS_DIR, arms=None, seeds=None, steps=None, log=print,
              records_dir=RECORDS_DIR, study=None):
    """Trains every missing (arm, seed) of study `name` (or of `study`, a study file's),
    one after the other, and records each finished run in `records_dir` (`record_run`;
    `None`: not recorded)."""
    study = study or get_study(name)
    arms = list(arms or study.arms)
    unknown = [a for a in arms if a not in study.arms]
    if unknown:
        raise ValueError(f"Study {name!r} has no arm {unknown[0]!r}; its arms: "
                         f"{', '.join(study.arms)}")
    # Seeds first, so that an interrupted study has every arm at the first seed.
    order = sorted({(i, arm) for arm in arms
                    for i, _ in enumerate(study_seeds(study, arm, seeds))})
    for index, arm in order:
        seed = study_seeds(study, arm, seeds)[index]
        train_arm(runs_dir, study.arms[arm], seed, steps=steps or study.steps,
                  minutes=None if steps else study.minutes, eval_every=study.eval_every,
                  log=log, records_dir=records_dir)

