"""Training a study's runs, one `tf-outheads train` subprocess at a time, on one shared
tokenizer, and recording each finished run's light files (`record_run`)."""

import dataclasses
import json
import os
import shutil
import statistics
import sys

from tf_outheads_zoo.study.definition import (
    CROSS_ENTROPY_FILE, DEFAULT_RUNS_DIR, PLAN_FILE, RECORDS_DIR, RESERVED_NAMES, SETTINGS_FILE,
    TOKENIZER_SEED, arm_run_dir, budget_name, check_run_model, check_run_settings, run_settings,
    seed_of, short_hash, study_seeds, write_run_settings)
from tf_outheads_zoo.study.file import get_study
from tf_outheads_zoo.study.process import (Interrupted, check_not_in_use, run_child,
                                           stop_on_signals)
from tf_outheads_zoo.study.stats import primary_score

# What a record holds besides the translations and their references (`record_run`).
RECORD_FILES = ("results.json", "bleu.jsonl", "loss_curves.csv", "run.json", "preset.json",
                "history.csv",
                SETTINGS_FILE, CROSS_ENTROPY_FILE, "target_table.json")
# The directory holding this copy of the package: first on the subprocesses' PYTHONPATH.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_environment(**extra):
    """The environment of the study's subprocesses (`tf-outheads train`, `translate`):
    this process's, with `extra`, and the package's parent first on `PYTHONPATH`, so
    `python -m tf_outheads_zoo.cli` imports the copy of the package the study runs. They
    run in the study's working directory, where its relative paths (the runs directory,
    a study file's corpus) mean what they mean to the study: once they ran in the
    package's parent, and a study started elsewhere trained into another directory than
    the one it then read (a relative `--runs-dir` from a source checkout not on `cwd`)."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        [_PACKAGE_PARENT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def tokenizer_dir(runs_dir, preset_name, overrides=None, log=print):
    """The shared tokenizer of this data configuration, built once.

    Returns the directory holding `tokenizer.json` and the SentencePiece
    model(s), trained with `TOKENIZER_SEED` on the preset's cleaned training split.
    """
    from tf_outheads import data as tfo_data
    from tf_outheads_zoo.config import data_set
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.splits import TrainingData, load_splits

    data_config = preset_config(preset_name, overrides).data
    relevant = {k: getattr(data_config, k) for k in (
        "source_column", "target_column", "strip_target_suffixes", "max_length",
        "max_length_ratio", "vocab_size", "joint_vocabulary", "tokenizer_type")}
    # The corpus by name and size, not by path: a checkout elsewhere finds its tokenizers.
    relevant["corpus"] = [os.path.basename(data_config.corpus),
                          os.path.getsize(data_config.corpus)]
    if data_config.train is not None:  # text files (a study file's data)
        relevant["train"] = [[os.path.basename(p), os.path.getsize(p)]
                             for pair in data_set(data_config, "train").get("pairs", [])
                             for p in pair] or data_config.train
        relevant["tokenizer_sample"] = data_config.tokenizer_sample
    directory = os.path.join(runs_dir, "tokenizers", short_hash(relevant))
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        if data_config.train is not None:
            # The pairs a run's own tokenizer would learn from (data.tokenizer_sample).
            train = TrainingData(data_config, seed=TOKENIZER_SEED, log=lambda *_: None).sample
        else:
            train = load_splits(data_config, log=lambda *_: None)["train"]
        tfo_data.build_tokenizers(
            train.sources, train.targets, directory,
            vocab_size=data_config.vocab_size, joint=data_config.joint_vocabulary,
            model_type=data_config.tokenizer_type, seed=TOKENIZER_SEED)
        with open(os.path.join(directory, "data_config.json"), "w", encoding="utf-8") as f:
            json.dump(relevant, f, indent=2)
        log(f"[study] tokenizer for {preset_name} → {directory}")
    return directory


def _literal(value):
    return repr(value)


def run_overrides(study, arm_name, seed):
    """The overrides a run of `arm_name` trains with: the arm's, plus `train.seed`, the
    study's step or time budget, evaluation every `eval_every` steps, no early stopping,
    and the shared tokenizer's seed."""
    overrides = study.arms[arm_name].override_dict()
    overrides.update({
        "data.tokenizer_seed": TOKENIZER_SEED,
        "train.seed": seed,
        "train.max_steps": None if study.minutes else study.steps,
        "train.max_minutes": study.minutes,
        "train.steps_per_epoch": study.eval_every,
        "train.patience": None,
    })
    return overrides


def check_arm_settings(name, study, arm_name, seed):
    """Refuses a run whose settings (`run_overrides` on the arm's preset) the schema or
    the registries refuse, as `tf-outheads train` would, but before any run of the study
    trains: a `ConfigError` naming the study and the arm (a study file's arms are checked
    when it is read; a built-in study's, the command's --steps and the run keys here)."""
    from tf_outheads_zoo.components import check_components
    from tf_outheads_zoo.schema import ConfigError
    from tf_outheads_zoo.presets import preset_config

    try:
        check_components(preset_config(study.arms[arm_name].preset,
                                       run_overrides(study, arm_name, seed)))
    except ValueError as error:
        raise ConfigError(f"study {name}: arms.{arm_name}: {error}") from None


def train_command(preset, run_dir, overrides):
    """`tf-outheads train` of one run, as the subprocess `train_arm` starts."""
    command = [sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", preset,
               "--run-dir", run_dir]
    for key, value in overrides.items():
        command += ["--set", f"{key}={_literal(value)}"]
    return command


def train_arm(runs_dir, study, arm_name, seed, log=print, records_dir=None):
    """Trains one arm of `study` for one seed (unless finished); returns its run directory,
    `RUNS_DIR/<arm>/s<seed>` (`arm_run_dir`).

    The run is `tf-outheads train` in a subprocess (`process.run_child`: its log in
    `train.log`) with the arm's overrides plus `train.seed`, the study's step or time
    budget, evaluation every `eval_every` steps, no early stopping, and the shared
    tokenizer (`run_overrides`); a directory another process trains in is refused
    (`process.check_not_in_use`), and a failed run raises `process.StudyRunError`, one
    line. Its settings are written first (`study_run.json`): a run killed midway resumes
    from its backup when the study runs again, and a run of other settings is refused
    (`check_run_settings`), never retrained or mixed in. With `records_dir`, the finished
    run (and its extra decodings) is recorded there (`record_run`).
    """
    arm = study.arms[arm_name]
    settings = run_settings(study, arm_name, seed)
    run_dir = arm_run_dir(runs_dir, arm_name, seed)
    check_run_settings(run_dir, settings)
    check_run_model(run_dir, arm)
    if not os.path.exists(os.path.join(run_dir, "results.json")):
        check_not_in_use(run_dir, f"arm {arm_name} seed {seed}")
        source = tokenizer_dir(runs_dir, arm.preset, arm.override_dict(), log=log)
        write_run_settings(run_dir, settings)
        for name in os.listdir(source):
            if name.startswith("spm_") or name == "tokenizer.json":
                if not os.path.exists(os.path.join(run_dir, name)):
                    shutil.copy(os.path.join(source, name), os.path.join(run_dir, name))
        command = train_command(arm.preset, run_dir, run_overrides(study, arm_name, seed))
        env = child_environment(TF_OUTHEADS_QUIET="1", TF_CPP_MIN_LOG_LEVEL="2")
        run_child(command, os.path.join(run_dir, "train.log"),
                  f"arm {arm_name} seed {seed}: tf-outheads train", env=env)
    score_run(run_dir, log=log)
    for suffix, options in arm.decodings:
        _decode_variant(run_dir, suffix, dict(options), log=log)
    if records_dir:
        record_run(run_dir, runs_dir, records_dir, log=lambda *_: None)
    return run_dir


def score_run(run_dir, log=print):
    """The dev and test cross-entropy per token of a finished run by forced decoding of its
    references (`tf_outheads.decoding.Scorer`, the path of `tf-outheads score`): no label
    smoothing, no sampling, the same number for every categorical head whatever loss it
    trained with; with each sentence's negative log-probability and tokens, the dev
    cross-entropy of the references after mismatched sources (how much the model reads
    its source: `stall.stall_check`) and the unigram levels. Written once to
    `cross_entropy.json` and returned. For a continuous head it is the cross-entropy of its decoding posterior (`scoring="posterior"`), which no
    categorical head's compares with (`continuous: true`); for other scorings, the mean
    step score (`log_probabilities: false`)."""
    path = os.path.join(run_dir, CROSS_ENTROPY_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    import keras

    from tf_outheads.decoding.scoring import Scorer
    from tf_outheads_zoo.runs import load_run
    from tf_outheads_zoo.splits import read_split

    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    scorer = Scorer(model, source_tokenizer, target_tokenizer)
    scores = {"head": type(model.head).__name__,
              "continuous": bool(getattr(model.head, "needs_target_vectors", False)),
              "log_probabilities": scorer.log_probabilities}
    for split in ("dev", "test"):
        # The pairs the run was evaluated on (its references: `compare.run_references`).
        pairs = read_split(config.data, split, log=lambda *_: None)
        results = scorer.score(pairs.sources, pairs.targets)
        tokens = sum(r["tokens"] for r in results)
        scores[split] = {"cross_entropy": -sum(r["log_prob"] for r in results) / tokens,
                         "tokens": tokens, "sentences": len(results),
                         "truncated": len(scorer.truncated_indices),
                         # Per sentence, for intervals over sentences (`study.combined`).
                         "sentence_nll": [round(-r["log_prob"], 4) for r in results],
                         "sentence_tokens": [r["tokens"] for r in results]}
        if split == "dev":
            # The same references after sources of other sentences (each paired with the
            # source half the split away): a model that does not read its source (the
            # unigram or language-model plateau) scores them alike (`stall.stall_check`).
            half = len(pairs.sources) // 2
            others = pairs.sources[half:] + pairs.sources[:half]
            mismatched = scorer.score(others, pairs.targets)
            scores[split]["mismatched_source_cross_entropy"] = (
                -sum(r["log_prob"] for r in mismatched) / tokens)
            scores[split].update(_unigram_scores(config, target_tokenizer, pairs.targets,
                                                 scores["continuous"]))
    del model, scorer
    keras.backend.clear_session()
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(scores, f, indent=2)
    os.replace(path + ".tmp", path)
    log(f"[study] {run_dir}: dev cross-entropy {scores['dev']['cross_entropy']:.4f} nats per "
        "token by forced decoding")
    return scores


def _unigram_scores(config, target_tokenizer, references, continuous):
    """`{"unigram_entropy", "unigram_loss"}` of `references` in the run's pieces
    (`stall.unigram_levels`: the unigram plateau, in the dev loss's units); `{}` where
    the run's dev loss is not a cross-entropy (a continuous head, another loss)."""
    from tf_outheads.data.special_tokens import EOS_ID
    from tf_outheads_zoo.study.stall import unigram_levels

    train = config.train
    if continuous or train.loss:
        return {}
    pieces = [piece for row in target_tokenizer.tokenize(list(references)).to_list()
              for piece in row + [EOS_ID]]
    entropy, loss = unigram_levels(pieces, target_tokenizer.vocab_size,
                                   train.label_smoothing or 0.0)
    return {"unigram_entropy": entropy, "unigram_loss": loss}


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
    plan = os.path.join(runs_dir, PLAN_FILE)
    if os.path.exists(plan):
        shutil.copyfile(plan, os.path.join(records_dir, PLAN_FILE + ".tmp"))
        os.replace(os.path.join(records_dir, PLAN_FILE + ".tmp"),
                   os.path.join(records_dir, PLAN_FILE))
    for split in ("dev", "test"):
        path = os.path.join(target, f"{split}.ref")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(run_references(run_dir, split)) + "\n")
        os.replace(path + ".tmp", path)
    log(f"[study] recorded {run_dir} → {target}")
    return target


def restore_records(runs_dir, records_dir, study, order, log=print):
    """A study resumes from its records where its run directories are gone (a fresh
    machine, a cleaned disk): each `(arm, seed)` of `order` without a run directory whose
    record (`records_dir/<arm>/s<seed>`) is complete — finished, scored by forced decoding
    (`score_run`), every extra decoding of its arm — and of the study's settings
    (`run_settings`) and model (`check_run_model`) is copied back as a finished run; the
    seed plan too, where `runs_dir` has none. A record of other settings, or one from
    before forced scoring, is left alone (its run trains, and its record is replaced).
    Returns the runs restored."""
    from tf_outheads_zoo.schema import ConfigError

    plan = os.path.join(records_dir, PLAN_FILE)
    if os.path.exists(plan) and not os.path.exists(os.path.join(runs_dir, PLAN_FILE)):
        os.makedirs(runs_dir, exist_ok=True)
        shutil.copyfile(plan, os.path.join(runs_dir, PLAN_FILE))
    restored = []
    for arm, seed in order:
        run_dir, record = arm_run_dir(runs_dir, arm, seed), arm_run_dir(records_dir, arm, seed)
        needed = ["results.json", SETTINGS_FILE, CROSS_ENTROPY_FILE] + [
            f"{split}.{suffix}.hyp" for suffix, _ in study.arms[arm].decodings
            for split in ("dev", "test")]
        if os.path.exists(run_dir) or not all(
                os.path.exists(os.path.join(record, name)) for name in needed):
            continue
        try:
            check_run_settings(record, run_settings(study, arm, seed))
            check_run_model(record, study.arms[arm])
        except ConfigError as error:
            log(f"[study] {record}: not restored ({error})")
            continue
        shutil.rmtree(run_dir + ".tmp", ignore_errors=True)  # an interrupted restore's
        shutil.copytree(record, run_dir + ".tmp")
        os.replace(run_dir + ".tmp", run_dir)
        restored.append((arm, seed))
    if restored:
        log(f"[study] {len(restored)} finished run(s) restored from their records in "
            f"{records_dir}: " + ", ".join(f"{arm} seed {seed}" for arm, seed in restored))
    return restored


def collect_records(runs_dir, records_dir=RECORDS_DIR, log=print):
    """Records every finished run `runs_dir/<arm>/s<seed>` (`record_run`) of one study;
    returns their count."""
    count = 0
    for arm_name in sorted(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else ():
        arm_dir = os.path.join(runs_dir, arm_name)
        if arm_name in RESERVED_NAMES or not os.path.isdir(arm_dir):
            continue
        for entry in sorted(os.listdir(arm_dir)):
            run_dir = os.path.join(arm_dir, entry)
            if (seed_of(entry) is not None
                    and os.path.exists(os.path.join(run_dir, "results.json"))):
                record_run(run_dir, runs_dir, records_dir, log=log)
                count += 1
    return count


def translate_flags(options):
    """`tf-outheads translate` flags of decoding `options`: `--beam-size 5`; a bool as
    `--block-repeats` / `--no-block-repeats` (its flag takes no value)."""
    flags = []
    for name, value in options.items():
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            flags += [f"--{flag}", str(value)]
    return flags


def _decode_variant(run_dir, suffix, options, log=print):
    """`tf-outheads translate` of dev and test with `options` → `<split>.<suffix>.hyp`
    (its log in `translate.log`)."""
    from tf_outheads_zoo.runs import stored_run
    from tf_outheads_zoo.splits import read_split

    data_config = stored_run(run_dir, required=True)[1].data  # as the run read it
    for split in ("dev", "test"):
        output = os.path.join(run_dir, f"{split}.{suffix}.hyp")
        if os.path.exists(output):
            continue
        source = os.path.join(run_dir, f"{split}.src")
        with open(source, "w", encoding="utf-8") as f:
            f.write("\n".join(read_split(data_config, split, log=lambda *_: None).sources)
                    + "\n")
        command = [sys.executable, "-m", "tf_outheads_zoo.cli", "translate", "--run-dir", run_dir,
                   "--input", source, "--output", output + ".tmp", *translate_flags(options)]
        env = child_environment(TF_CPP_MIN_LOG_LEVEL="2")
        run_child(command, os.path.join(run_dir, "translate.log"),
                  f"{run_dir}: tf-outheads translate of {split} with {options}", env=env)
        os.replace(output + ".tmp", output)
        log(f"[study] {run_dir}: {split} decoded with {options} → {output}")


def run_study(name, runs_dir=None, arms=None, seeds=None, steps=None, log=print,
              records_dir=None, study=None):
    """Trains every missing (arm, seed) of study `name` (built in) or `study` (a study
    file's), one after the other, in `runs_dir/<arm>/s<seed>`; returns the study run (with
    `steps`, the command's budget, in place of the study's).

    Every run's settings are checked first (`check_arm_settings`), and every finished
    or started run against the study (`check_run_settings`): a wrong or changed setting
    is refused before anything trains. One line per run says its arm, seed, steps of the
    budget, its time and the study's ETA. With `records_dir`, each finished run is
    recorded there (`record_run`), and a run whose directory is gone is first restored
    from its record (`restore_records`: a study goes on on a fresh machine). SIGTERM or
    SIGINT stops the study after the running training has written its backup
    (`process.stop_on_signals`): a `TrainingPreempted` naming the run (`tf-outheads`
    prints it as one `stopped: ...` line).
    """
    import time

    study = study or get_study(name)
    runs_dir = runs_dir or os.path.join(DEFAULT_RUNS_DIR, name)
    if steps:
        study = dataclasses.replace(study, steps=int(steps), minutes=None)
    arms = list(arms or study.arms)
    unknown = [a for a in arms if a not in study.arms]
    if unknown:
        raise ValueError(f"Study {name!r} has no arm {unknown[0]!r}; its arms: "
                         f"{', '.join(study.arms)}")
    # Seeds first (arms in the study's order), so that an interrupted study has every arm
    # at its first seed.
    arm_seeds = {arm: study_seeds(study, arm, seeds) for arm in arms}
    order = [(arm, arm_seeds[arm][index])
             for index in range(max(len(s) for s in arm_seeds.values()))
             for arm in arms if index < len(arm_seeds[arm])]
    for arm, seed in order:
        check_arm_settings(name, study, arm, seed)
        run_dir = arm_run_dir(runs_dir, arm, seed)
        check_run_settings(run_dir, run_settings(study, arm, seed))
        check_run_model(run_dir, study.arms[arm])
    if records_dir:
        restore_records(runs_dir, records_dir, study, order, log=log)
    _record_seed_plan(runs_dir, arm_seeds, log)
    todo = [(arm, seed) for arm, seed in order if not os.path.exists(
        os.path.join(arm_run_dir(runs_dir, arm, seed), "results.json"))]
    log(f"[study] {name}: {len(order)} runs ({len(order) - len(todo)} finished earlier), "
        f"{budget_name(study.steps, study.minutes)} each → {runs_dir}")
    durations, number, arm, seed = [], 0, None, None
    try:
        with stop_on_signals():
            for number, (arm, seed) in enumerate(order, 1):
                run_dir = arm_run_dir(runs_dir, arm, seed)
                finished = os.path.exists(os.path.join(run_dir, "results.json"))
                if not finished:
                    log(f"[study] run {number}/{len(order)} {arm} seed {seed}: training "
                        f"(log: {os.path.join(run_dir, 'train.log')})")
                started = time.monotonic()
                train_arm(runs_dir, study, arm, seed, log=log, records_dir=records_dir)
                if finished:
                    log(f"[study] run {number}/{len(order)} {arm} seed {seed}: finished "
                        "earlier, skipped")
                    continue
                durations.append(time.monotonic() - started)
                todo.remove((arm, seed))
                log(f"[study] run {number}/{len(order)} {arm} seed {seed}: "
                    f"{_run_progress(run_dir, study)} in {durations[-1] / 60:.1f} min; "
                    + (f"study ETA {_duration(statistics.fmean(durations) * len(todo))} "
                       f"({len(todo)} run(s) left)" if todo else "study done"))
    except Interrupted as stop:
        raise _study_stopped(
            f"study {name} stopped by {stop.signal_name}: run {number}/{len(order)} (arm "
            f"{arm} seed {seed}, {arm_run_dir(runs_dir, arm, seed)}) was interrupted; the "
            "same command resumes it", stop.signal_name) from None
    return study


def _study_stopped(message, signal_name):
    """A `TrainingPreempted` saying `message`, of signal `signal_name`: `tf-outheads`
    prints it as one `stopped: ...` line, with the exit status of a `train` stopped by
    that signal (`errors`: 143 after SIGTERM)."""
    import signal

    from tf_outheads.training.stopping import TrainingPreempted

    return TrainingPreempted(0, None, signal.Signals[signal_name], message=message)


def _record_seed_plan(runs_dir, arm_seeds, log=print):
    """The seeds of every arm as the study first started (`runs_dir/PLAN_FILE`), and any
    seed a later start adds (`added`: arm, seeds, time), said in the log: seeds added
    after looking at an interval until it clears 0 are optional stopping, and the page
    names them (`report.study_report`)."""
    import time

    path = os.path.join(runs_dir, PLAN_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
    else:
        plan = {"seeds": {arm: list(seeds) for arm, seeds in arm_seeds.items()},
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "added": []}
    known = {arm: set(seeds) for arm, seeds in plan["seeds"].items()}
    for entry in plan["added"]:
        known.setdefault(entry["arm"], set()).update(entry["seeds"])
    for arm, seeds in arm_seeds.items():
        new = [seed for seed in seeds if seed not in known.get(arm, set())]
        if new and arm in plan["seeds"]:
            plan["added"].append({"arm": arm, "seeds": new,
                                  "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            log(f"[study] seeds {', '.join(map(str, new))} of arm {arm} were not in the "
                "study when it started: seeds added after looking at the intervals are "
                "optional stopping (the page names them)")
        elif new:
            plan["seeds"][arm] = list(seeds)
    os.makedirs(runs_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(plan, f, indent=2)
    os.replace(path + ".tmp", path)


def _run_progress(run_dir, study):
    """`step 1500/1500, dev BLEU 12.31, source gain 2.10 nats per token` of a finished run
    (its results.json), or `... STALLED (why)` (`stall.stall_check`)."""
    from tf_outheads_zoo.study.stall import stall_check

    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    budget = f"/{study.steps}" if not study.minutes else f" in {study.minutes:g} min"
    line = f"step {results['steps']}{budget}, dev BLEU {primary_score(results, 'dev'):.2f}"
    check = stall_check(run_dir)
    if check["stalled"]:
        line += " STALLED (" + "; ".join(check["reasons"]) + ")"
    elif check["source_gain"] is not None:
        line += f", source gain {check['source_gain']:.2f} nats per token"
    return line


def _duration(seconds):
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"
