"""Seeded head comparisons against sound baselines, and the results page they produce.

A *study* is a set of *arms* (a preset and overrides) trained for the same number
of steps (or the same wall clock) on the same pieces, for several seeds, with one
arm as the baseline of each paired test. Two commands:

    tf-outheads study pappas [--seeds 1234,1,2] [--arms tied,joint-512] [--runs-dir runs/study]
    tf-outheads results [--collect-from runs/study] [--output docs/results.md]

`study` trains what is missing, one run at a time, each in its own run directory
(`RUNS_DIR/runs/<preset>[+<overrides>]/s<seed>-<budget>`), which resumes after an
interruption and is skipped once finished. A finished run is then *recorded*:
its light files (scores, BLEU history, per-step losses, the dev/test
translations and the references they were scored against; not the weights)
are copied to the same place under `RECORDS_DIR` (`docs/results/study`),
which is committed, so the results page can be rewritten and its paired tests
redone on any checkout, after the machine that trained the runs is gone. Every run of a study copies one
tokenizer (`RUNS_DIR/tokenizers/<data key>`): SentencePiece trained twice on the
same text with the same seed in two processes gives different pieces, which
would confound the comparison. `results` reads the records and writes
the page: mean ± sd over seeds of dev and test BLEU, sacrebleu's paired
bootstrap test of each seed against the baseline's run of the same seed (test
and dev p-values), dev BLEU and training-loss curves as SVG, the time of each
run and the machine, and for each claim of a paper whether it held here.
`benchmarks/peer_opennmt.py` trains its "ours" side through `train_arm`, so
the baselines it checks against OpenNMT-py are the very runs the studies use.
"""

import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

DEFAULT_RUNS_DIR = os.path.join("runs", "study")
# The committed copy of every finished run's light files (`record_run`).
RECORDS_DIR = os.path.join("docs", "results", "study")
RECORD_FILES = ("results.json", "bleu.jsonl", "loss_curves.csv", "preset.json", "history.csv")
# SentencePiece's seed for every run of every study (data.tokenizer_seed).
TOKENIZER_SEED = 1234
CORE_SEEDS = (1234, 1, 2)
SWEEP_SEEDS = (1234,)
ALPHA = 0.05


@dataclasses.dataclass(frozen=True)
class Arm:
    """One system of a study: a preset, dotted overrides, and optional extra decodings.

    `decodings` maps a suffix to `translate` options run after training on dev
    and test (`{"beam5": {"beam_size": 5}}` writes `dev.beam5.hyp`); each is
    reported as its own row, `"<arm> (<suffix>)"`.
    """

    preset: str
    overrides: tuple = ()
    core: bool = True
    decodings: tuple = ()

    def override_dict(self):
        return dict(self.overrides)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A paper's claim about `arm` against `baseline` on test BLEU (`paper_delta`: what
    the paper reports). `kind` `"better"`: the arm beats the baseline; `"not_worse"`:
    the arm is not significantly behind it."""

    text: str
    arm: str
    baseline: str
    paper_delta: str
    kind: str = "better"


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


def _pappas_arm(head, core=False):
    from tf_outheads_zoo.presets import PAPPAS_HEADS

    return Arm("lstm-cpu-tied", (("model.head", PAPPAS_HEADS[head]),), core=core)


STUDIES = {
    "pappas": Study(
        title="Joint input-output embeddings (Pappas et al. 2018)",
        paper="pappas2018",
        arms={
            "untied": Arm("lstm-cpu-softmax"),
            "tied": Arm("lstm-cpu-tied"),
            "joint-512": Arm("lstm-cpu-joint-512"),
            "joint-256": Arm("lstm-cpu-joint", core=False),
            "joint-1024": Arm("lstm-cpu-joint-1024", core=False),
            "bilinear": _pappas_arm("bilinear"),
            "output-structure": _pappas_arm("output-structure"),
            "context-structure": _pappas_arm("context-structure"),
        },
        baseline="tied",
        claims=(
            Claim("The joint head (d_j = 512) beats weight tying", "joint-512", "tied",
                  "+0.5 to +1.2 BLEU (Table 2, 32K BPE, en-de/en-fi/en-ro)"),
            Claim("The joint head (d_j = 512) beats the untied softmax", "joint-512",
                  "untied", "+0.6 to +1.7 BLEU (Table 2)"),
            Claim("Weight tying beats the untied softmax", "tied", "untied",
                  "+0.1 to +0.6 BLEU (Table 2)"),
        ),
        notes="CPU size (1-layer biLSTM/LSTM 256, 4K joint BPE, 2,048-token batches), "
              "not the paper's 2-layer 512 LSTM with 32K/128K vocabularies. The three "
              "ablations (Eq. 6, 7a, 7b) and d_j 256/1024 run one seed. The context-"
              "structure ablation (Eq. 7b, E·tanh(W·h̃ + b)) stalls here: its training "
              "loss stays at the unigram level (6.6) for ~100 steps and is 5.16 at step "
              "300 (bilinear 4.07); by step 160, 26 % of tanh(W·h̃ + b) is saturated "
              "(|·| > 0.99). The same head without the tanh leaves the plateau by step 40, "
              "and global clipping makes no difference (measured with clipnorm 1000). "
              "At the paper's Adam rate, 1e-3 (we use the peer's 5e-3), tied and "
              "context-structure follow the same curve for 160 steps (6.37 and 6.39 at "
              "step 101, against 5.57 for tied at 5e-3); whether Eq. 7b catches up at "
              "1e-3 over a whole run was not measured.",
    ),
    "liu": Study(
        title="Shared-private bilingual embeddings (Liu et al. 2019)",
        paper="liu2019",
        arms={
            "vanilla": Arm("transformer-cpu"),
            "decoder-wt": Arm("transformer-cpu-decoder-wt"),
            "shared-private": Arm("transformer-cpu-shared-private"),
        },
        baseline="decoder-wt",
        claims=(
            Claim("Shared-private beats decoder weight tying", "shared-private",
                  "decoder-wt", "+0.7 to +1.3 BLEU (Table 1)"),
            Claim("Shared-private beats the vanilla Transformer", "shared-private",
                  "vanilla", "+0.9 to +1.8 BLEU (Table 1)"),
        ),
        steps=900,
        notes="transformer-cpu (pre-norm 3+3 layers, 256/1024, 4K joint BPE). 900 steps, "
              "not the other studies' 1,500: a transformer-cpu step takes ~2.5 s on these 2 "
              "CPU cores (4,096-token batches, the dev evaluations included; a 900-step run "
              "takes 37-44 minutes alone on the machine), and 9 runs of 1,500 steps would "
              "take ~9.5 hours, the whole study's budget. The learning rate peaks at step "
              "800, so these are models early in training (dev BLEU 12.2-13.6 at step 900). "
              "Code 4555569; decoder-wt seed 1234 ran beside other jobs (its min / run is "
              "not comparable), every other run alone on the machine.",
    ),
    "jauregi": Study(
        title="ReWE: regressing word embeddings (Jauregi Unanue et al. 2019)",
        paper="jauregi2019",
        arms={
            # lstm-cpu is lstm-cpu-joint-512 (the same model): the Pappas study's runs.
            "plain": Arm("lstm-cpu-joint-512"),
            "rewe-1": Arm("lstm-cpu-rewe", (("train.rewe", {"weight": 1.0,
                                                            "distance": "cosine"}),),
                          core=False),
            "rewe-5": Arm("lstm-cpu-rewe", (("train.rewe", {"weight": 5.0,
                                                            "distance": "cosine"}),),
                          core=False),
            "rewe-20": Arm("lstm-cpu-rewe"),
        },
        baseline="plain",
        claims=(
            Claim("ReWE (λ = 20, cosine) beats the plain model", "rewe-20", "plain",
                  "+0.4 to +1.5 BLEU (Table 2)"),
        ),
        notes="The plain model is lstm-cpu (joint head, d_j = 512: the runs of the Pappas "
              "study's joint-512 arm); ReWE regresses frozen 300-d "
              "FastText vectors trained on the target side. λ 1 and 5 run one seed, "
              "trained later than the rest (code 4555569, which changed only the "
              "order of float sums) beside the test suite and other jobs: their min / "
              "run is not comparable with the other rows' (λ 1's excludes 8.4 minutes "
              "for which its process was stopped).",
    ),
    "kumar": Study(
        title="Continuous outputs with the vMF loss (Kumar & Tsvetkov 2019)",
        paper="kumar2019",
        arms={
            "softmax": Arm("lstm-cpu-vmf-softmax",
                           decodings=(("beam5", {"beam_size": 5}),)),
            "vmf": Arm("lstm-cpu-vmf", decodings=(("beam5", {"beam_size": 5}),)),
        },
        baseline="softmax",
        claims=(
            Claim("vMF outputs reach the softmax's BLEU in the same wall clock", "vmf",
                  "softmax", "about equal BLEU, 2.5x faster training (Tables 2-3)",
                  kind="not_worse"),
        ),
        minutes=10.0,
        notes="Equal wall clock (10 minutes of training each, the greedy dev evaluation "
              "every 300 steps included) on 2 CPU cores; separate 4K vocabularies; greedy "
              "and beam-5 decoding. The target vectors are 300-d FastText vectors trained "
              "on the target side of the training set (~30K verses), not on a large "
              "monolingual corpus as in the paper. Per seed (1 / 2 / 1234), test BLEU: "
              "softmax 22.37 / 21.13 / 4.16, vMF 14.43 / 13.69 / 12.65. The softmax's "
              "seed 1234 stalls on the language-model plateau (dev BLEU 1.0 / 1.9 / 3.1 "
              "at steps 300 / 600 / 900; a rerun repeats its losses to two decimals; "
              "OpenNMT-py at that seed on the same pieces reaches 9.0 / 11.8 at steps "
              "300 / 600, benchmarks/docs/peer_opennmt.md). The seeds were fixed before the "
              "study and "
              "that run is kept: it is the one seed vMF wins, and it pulls the softmax "
              "mean down and its sd up. Most of vMF's gap is length: its greedy dev "
              "outputs are 0.74-0.82 of the reference length (brevity penalty "
              "0.70-0.80; the softmax's are 1.05-1.17 of it), while its n-gram "
              "precisions are close to the softmax's (seed 1: 45.1/19.5/10.0/5.5 "
              "against 48.0/23.9/12.9/7.3); beam 5, with no length penalty, shortens "
              "them further (test words -17% at seed 1). At seed 1, 579 of its 1,068 "
              "dev outputs hold the piece .”’ (in 125 of 27,952 training verses, in no "
              "dev reference): the FastText vectors of sentence-final punctuation "
              "pieces form a tight cluster (cosines 0.74-0.95), which nearest-neighbour "
              "decoding confuses, before an early EOS. The EOS vector (the VIVO "
              "report: results are very sensitive to it) and a length penalty are untuned. "
              "Code 4555569, every run alone on the machine.",
    ),
}


# -- running ---------------------------------------------------------------------------
def _key(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]


def budget_name(steps=None, minutes=None):
    return f"{minutes:g}min" if minutes else f"{steps}"


def arm_run_dir(runs_dir, arm, seed, steps=None, minutes=None):
    """`RUNS_DIR/runs/<preset>[+<overrides key>]/s<seed>-<budget>`."""
    name = arm.preset + (f"+{_key(arm.overrides)}" if arm.overrides else "")
    return os.path.join(runs_dir, "runs", name, f"s{seed}-{budget_name(steps, minutes)}")


def tokenizer_dir(runs_dir, preset_name, overrides=None, log=print):
    """The shared tokenizer of this data configuration, built once.

    Returns the directory holding `tokenizer.json` and the SentencePiece
    model(s), trained with `TOKENIZER_SEED` on the preset's cleaned training split.
    """
    from tf_outheads import data as tfo_data
    from tf_outheads_zoo.presets import get_preset
    from tf_outheads_zoo.train import load_splits

    preset = get_preset(preset_name, overrides)
    data_config = preset["data"]
    relevant = {k: data_config[k] for k in (
        "source_column", "target_column", "strip_target_suffixes", "max_length",
        "max_length_ratio", "vocab_size", "joint_vocabulary", "tokenizer_type")}
    # The corpus by name and size, not by path: a checkout elsewhere finds its tokenizers.
    relevant["corpus"] = [os.path.basename(data_config["corpus"]),
                          os.path.getsize(data_config["corpus"])]
    directory = os.path.join(runs_dir, "tokenizers", _key(relevant))
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        splits = load_splits(data_config, log=lambda *_: None)
        tfo_data.build_tokenizers(
            splits["train"].sources, splits["train"].targets, directory,
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
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    from tf_outheads_zoo.train import read_split

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
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.replace(output + ".tmp", output)
        log(f"[study] {run_dir}: {split} decoded with {options} → {output}")


def study_seeds(study, arm_name, seeds=None):
    if seeds is not None:
        return tuple(seeds)
    return CORE_SEEDS if study.arms[arm_name].core else SWEEP_SEEDS


def run_study(name, runs_dir=DEFAULT_RUNS_DIR, arms=None, seeds=None, steps=None, log=print,
              records_dir=RECORDS_DIR):
    """Trains every missing (arm, seed) of study `name`, one after the other, and records
    each finished run in `records_dir` (`record_run`; `None`: not recorded)."""
    study = _study(name)
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


def _study(name):
    if name not in STUDIES:
        raise ValueError(f"Unknown study {name!r}. Available: {', '.join(STUDIES)}")
    return STUDIES[name]


# -- reporting ---------------------------------------------------------------------------
def _finished_runs(runs_dir, study, arm_name):
    """`{seed: run_dir}` of the finished runs of one arm at the study's budget."""
    arm = study.arms[arm_name]
    found = {}
    parent = os.path.dirname(arm_run_dir(runs_dir, arm, 0, study.steps, study.minutes))
    suffix = "-" + budget_name(study.steps, study.minutes)
    if not os.path.isdir(parent):
        return found
    for entry in sorted(os.listdir(parent)):
        if entry.startswith("s") and entry.endswith(suffix):
            run_dir = os.path.join(parent, entry)
            if os.path.exists(os.path.join(run_dir, "results.json")):
                found[int(entry[1:-len(suffix)])] = run_dir
    return found


def _primary_score(results, split):
    (key,) = [k for k in results[split] if k.startswith("bleu[") and "+" not in k]
    return results[split][key]["score"]


def _hyp_name(split, variant):
    return f"{split}.{variant}.hyp" if variant else f"{split}.hyp"


def _variant_score(run_dir, split, variant):
    """BLEU of a run's `split` translations (`variant`: an extra decoding or `None`)."""
    from tf_outheads.metrics import corpus_bleu, read_lines
    from tf_outheads_zoo.compare import run_references

    if variant is None:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
            return _primary_score(json.load(f), split)
    path = os.path.join(run_dir, _hyp_name(split, variant))
    return corpus_bleu(read_lines(path), run_references(run_dir, split)).score


def _paired_p(baseline_dir, run_dir, split, variant, samples, references_dir=None):
    """sacrebleu's paired test of `run_dir` against `baseline_dir`, on the references of
    `references_dir` (default the baseline's; the arms of a study share them)."""
    from tf_outheads.metrics import paired_significance, read_lines
    from tf_outheads_zoo.compare import run_references

    references = run_references(references_dir or baseline_dir, split)
    systems = [("baseline", read_lines(os.path.join(baseline_dir, _hyp_name(split, variant)))),
               ("system", read_lines(os.path.join(run_dir, _hyp_name(split, variant))))]
    return paired_significance(systems, references, samples=samples)[1]


def _mean_sd(values):
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"


def _curve_means(run_dirs, reader):
    """Mean over runs at each x all runs share."""
    curves = [dict(zip(*reader(d))) for d in run_dirs]
    curves = [c for c in curves if c]
    if not curves:
        return [], []
    xs = sorted(set.intersection(*(set(c) for c in curves)))
    return xs, [statistics.fmean(c[x] for c in curves) for x in xs]


def _loss_curve(run_dir, window=50):
    from tf_outheads_zoo.compare import moving_average, nll_curve

    steps, values = nll_curve(run_dir)
    return steps, moving_average(values, window)


def _bleu_curve(run_dir):
    path = os.path.join(run_dir, "bleu.jsonl")
    if not os.path.exists(path):
        return [], []
    records = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                records[record["step"]] = record["bleu"]
    return list(records), list(records.values())


def _data_settings(data, sizes=None):
    """The `data` section `data` a run trained with (`_stored_data`), compared as: the
    corpus by file name only (the same corpus sits at another path on another machine).

    `sizes`: `{corpus file name: training split size}` of corpora readable here; a
    shuffle buffer or tokenizer sample at least that large (or None: all of it) is
    the same setting, `"all"`: the same batches, the same pieces."""
    data = dict(data)
    # ReWE's frozen target vectors are its method's input (trained on the same
    # training targets), not a difference in the data every arm sees.
    data.pop("target_vectors", None)
    data["corpus"] = os.path.basename(str(data["corpus"]))
    size = (sizes or {}).get(data["corpus"]) if data.get("train") is None else None
    for key in ("shuffle_buffer", "tokenizer_sample"):
        if size is not None and (data.get(key) is None or data[key] >= size):
            data[key] = "all"
    return data


def _stored_data(run_dir):
    """The `data` section of a run's `preset.json`, read through the schema: records
    from before a key get the value they trained with."""
    from tf_outheads_zoo.config import read_stored_preset

    return read_stored_preset(os.path.join(run_dir, "preset.json"))[1]["data"]


@functools.lru_cache(maxsize=None)
def _train_split_size(path, split, source, target):
    from tf_outheads import data as tfo_data

    return len(tfo_data.read_tsv(path, source=source, target=target, references=(),
                                 split=split, id_column=None))


def _corpus_sizes(stored):
    """`{corpus file name: pairs of its train split}` for the TSV corpora of the `data`
    sections `stored` found here (at the stored path, or the embedded corpus by name)."""
    from tf_outheads_zoo.config import EMBEDDED_CORPUS, data_set

    sizes = {}
    for data in stored:
        spec = data_set(data, "train")
        name = os.path.basename(str(data["corpus"]))
        if spec["kind"] != "tsv" or name in sizes:
            continue
        path = spec["path"]
        if not os.path.exists(path) and name == os.path.basename(EMBEDDED_CORPUS):
            path = EMBEDDED_CORPUS
        if os.path.exists(path):
            sizes[name] = _train_split_size(path, spec["split"], spec["source"],
                                            spec["target"])
    return sizes


def data_differences(runs):
    """`{"data.key": {value: ["arm seed", ...]}}` for every data setting on which the
    finished runs `{arm: {seed: run_dir}}` of one study disagree (pieces, batches,
    filters): arms trained on other data are not a comparison of output layers."""
    stored = {run_dir: _stored_data(run_dir)
              for arm_runs in runs.values() for run_dir in arm_runs.values()}
    sizes = _corpus_sizes(stored.values())
    seen = {}
    for arm_name, arm_runs in runs.items():
        for seed, run_dir in sorted(arm_runs.items()):
            for key, value in _data_settings(stored[run_dir], sizes).items():
                seen.setdefault(key, {}).setdefault(json.dumps(value, sort_keys=True), []
                                                    ).append(f"{arm_name} {seed}")
    return {f"data.{key}": values for key, values in sorted(seen.items()) if len(values) > 1}


def study_report(name, runs_dir=DEFAULT_RUNS_DIR, figures_dir=None, samples=1000):
    """The Markdown section of one study (and its SVG figures in `figures_dir`)."""
    from tf_outheads_zoo.plots import write_line_plot

    study = _study(name)
    runs = {arm: _finished_runs(runs_dir, study, arm) for arm in study.arms}
    budget = (f"{study.minutes:g} minutes of training" if study.minutes
              else f"{study.steps} steps")
    lines = [f"## {study.title}", "", f"{study.notes} Budget: {budget} per run; dev BLEU "
             f"every {study.eval_every} steps; greedy decoding unless marked. Baseline of "
             f"the paired tests: **{study.baseline}** (sacrebleu paired bootstrap, "
             f"{samples} resamples, each seed against the baseline's run of the same "
             "seed).", ""]
    baseline_runs = runs[study.baseline]
    rows = [("arm", "preset", "seeds", "dev BLEU", "test BLEU", f"Δ test vs {study.baseline}",
             "p test (per seed)", "p dev (per seed)", "min / run")
            + (("steps / run",) if study.minutes else ())]
    # Equal wall clock: the steps each arm reached are its training speed (the same
    # batches), against the baseline's.
    baseline_steps = _mean_steps(baseline_runs.values())
    summary = {}
    signature = ""
    for arm_name, arm in study.arms.items():
        arm_runs = runs[arm_name]
        for variant, _ in ((None, None),) + tuple(arm.decodings):
            label = arm_name + (f" ({variant})" if variant else "")
            if not arm_runs:
                rows.append((label, arm.preset, "not run") + ("",) * (len(rows[0]) - 3))
                continue
            seeds = sorted(arm_runs)
            dev = [_variant_score(arm_runs[s], "dev", variant) for s in seeds]
            test = [_variant_score(arm_runs[s], "test", variant) for s in seeds]
            minutes, steps = [], []
            for s in seeds:
                with open(os.path.join(arm_runs[s], "results.json"), encoding="utf-8") as f:
                    results = json.load(f)
                minutes.append(results["train_seconds"] / 60)
                steps.append(results["steps"])
            deltas, p_test, p_dev = [], [], []
            if arm_name != study.baseline:
                for s in seeds:
                    if s not in baseline_runs:
                        continue
                    deltas.append(test[seeds.index(s)]
                                  - _variant_score(baseline_runs[s], "test", variant))
                    for split, out in (("test", p_test), ("dev", p_dev)):
                        result = _paired_p(baseline_runs[s], arm_runs[s], split, variant,
                                           samples)
                        out.append(result.p_value)
                        signature = result.signature
            summary[label] = {"seeds": seeds, "dev": dev, "test": test, "deltas": deltas,
                              "p_test": p_test}
            rows.append((label, arm.preset + "".join(
                f" `{k}={json.dumps(v)}`" for k, v in arm.overrides),
                ", ".join(map(str, seeds)), _mean_sd(dev), _mean_sd(test),
                f"{statistics.fmean(deltas):+.2f}" if deltas else "—",
                " / ".join(f"{p:.3f}" for p in p_test) or "—",
                " / ".join(f"{p:.3f}" for p in p_dev) or "—",
                f"{statistics.fmean(minutes):.1f}")
                + ((_steps_cell(statistics.fmean(steps), baseline_steps,
                                arm_name == study.baseline),) if study.minutes else ()))
            summary[label]["steps"] = statistics.fmean(steps)
    lines += _markdown_table(rows)
    if signature:
        lines += ["", f"Test signature: `{signature}`."]
    if figures_dir and any(runs.values()):
        os.makedirs(figures_dir, exist_ok=True)
        bleu = {a: _curve_means(list(r.values()), _bleu_curve) for a, r in runs.items() if r}
        loss = {a: _curve_means(list(r.values()), _loss_curve) for a, r in runs.items() if r}
        bleu = {a: c for a, c in bleu.items() if c[0]}
        figures = []
        if bleu:
            path = os.path.join(figures_dir, f"{name}_dev_bleu.svg")
            write_line_plot(path, bleu, title=f"{study.title}: dev BLEU (mean over seeds)",
                            xlabel="training step", ylabel="BLEU")
            figures.append(path)
        if any(c[0] for c in loss.values()):
            path = os.path.join(figures_dir, f"{name}_loss.svg")
            write_line_plot(path, {a: c for a, c in loss.items() if c[0]},
                            title=f"{study.title}: training loss (moving average of 50 "
                                  "steps, mean over seeds)",
                            xlabel="training step", ylabel="loss")
            figures.append(path)
        base = os.path.dirname(os.path.dirname(figures[0])) if figures else ""
        lines += [""] + [f"![{os.path.basename(p)}]({os.path.relpath(p, base)})"
                         for p in figures]
    differences = data_differences(runs)
    if differences:
        lines += ["", "**Not comparable yet:** these runs trained on different data settings, "
                  "so no claim is judged until the runs named below are trained again "
                  "with the study's settings:", ""]
        for key, values in differences.items():
            lines.append(f"- `{key}`: " + "; ".join(
                f"{value} ({', '.join(runs_)})" for value, runs_ in values.items()))
    lines += ["", "Claims:", ""]
    for claim in study.claims:
        if differences:
            verdict = ("**not comparable yet** (data settings differ: "
                       f"{', '.join(differences)})")
        else:
            arm = summary.get(claim.arm)
            if arm and claim.baseline != study.baseline and runs[claim.baseline]:
                # The table's tests are against the study's baseline: this claim's pair
                # gets its own, seed by seed.
                arm = _paired_against(arm, runs[claim.arm], runs[claim.baseline], samples,
                                      references_runs=baseline_runs)
            verdict = claim_verdict(arm, summary.get(claim.baseline), claim)
            if study.minutes and arm and summary.get(claim.baseline):
                verdict += (f"; in the same {study.minutes:g} minutes it trained "
                            f"{arm['steps'] / summary[claim.baseline]['steps']:.2f}× the "
                            f"steps of {claim.baseline} ({arm['steps']:,.0f} against "
                            f"{summary[claim.baseline]['steps']:,.0f})")
        lines.append(f"- {claim.text} (paper: {claim.paper_delta}): {verdict}")
    return "\n".join(lines) + "\n"


def _mean_steps(run_dirs):
    """The mean number of steps trained by finished runs (their results.json), or None."""
    steps = []
    for run_dir in run_dirs:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
            steps.append(json.load(f)["steps"])
    return statistics.fmean(steps) if steps else None


def _steps_cell(steps, baseline_steps, is_baseline):
    if is_baseline or not baseline_steps:
        return f"{steps:,.0f}"
    return f"{steps:,.0f} (×{steps / baseline_steps:.2f})"


def _paired_against(arm, arm_runs, baseline_runs, samples, references_runs=None):
    """`arm`'s summary with its test deltas and paired p-values against another arm's
    runs (each seed against that arm's run of the same seed; the references of
    `references_runs`' run of the seed where there is one: the study baseline's)."""
    deltas, p_test = [], []
    for seed, score in zip(arm["seeds"], arm["test"]):
        if seed in baseline_runs:
            deltas.append(score - _variant_score(baseline_runs[seed], "test", None))
            p_test.append(_paired_p(baseline_runs[seed], arm_runs[seed], "test", None,
                                    samples, (references_runs or {}).get(seed)).p_value)
    return dict(arm, deltas=deltas, p_test=p_test)


def claim_verdict(arm, baseline, claim):
    """Whether a claim held: the arm beat the baseline on test BLEU in the mean, and
    significantly (p < 0.05 against the baseline's run of the same seed, that seed's
    run ahead) in most seeds; a "not worse" claim fails when the arm is behind in the
    mean and significantly behind in most seeds. `arm["p_test"]` and `arm["deltas"]`
    are its paired tests against the claim's baseline (`_paired_against` when that is
    not the study's); with them, the mean Δ is over the seeds both arms ran (as the
    table's Δ column); without them, the means alone are compared."""
    if not arm or not baseline:
        return "**not measured yet**"
    if len(arm["seeds"]) < 3 or len(baseline["seeds"]) < 3:
        scope = f"only {min(len(arm['seeds']), len(baseline['seeds']))} seed(s): "
    else:
        scope = ""
    delta = (statistics.fmean(arm["deltas"]) if arm["p_test"]
             else statistics.fmean(arm["test"]) - statistics.fmean(baseline["test"]))
    if arm["p_test"]:
        # A seed counts when its paired test is significant in the claim's direction:
        # ahead of its baseline run for "beats", behind it for "not worse".
        sign = -1.0 if claim.kind == "not_worse" else 1.0
        significant = sum(p < ALPHA and sign * d > 0
                          for p, d in zip(arm["p_test"], arm["deltas"]))
        most = significant * 2 > len(arm["p_test"])
        if claim.kind == "not_worse":
            behind = delta < 0 and most
            verdict = ("**not reproduced** (significantly behind)" if behind
                       else "**holds** (not significantly behind)")
        elif delta > 0 and most:
            verdict = "**holds**"
        elif delta > 0:
            verdict = "**not reproduced** (ahead in the mean, not significantly)"
        else:
            verdict = "**not reproduced**"
        direction = "behind" if claim.kind == "not_worse" else "ahead"
        return (f"{scope}{verdict}: mean test Δ {delta:+.2f} BLEU; significantly {direction} "
                f"(p < {ALPHA}) in {significant} of {len(arm['p_test'])} seeds (p per seed "
                f"{' / '.join(f'{p:.3f}' for p in arm['p_test'])})")
    verdict = "**holds in the mean**" if delta > 0 else "**not reproduced**"
    return f"{scope}{verdict}: mean test Δ {delta:+.2f} BLEU (no paired test against this arm)"


def _markdown_table(rows):
    header, *body = rows
    return (["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])


def machine_description():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    import tensorflow as tf

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"TensorFlow {tf.__version__}")


def write_results(runs_dir=RECORDS_DIR, output=os.path.join("docs", "results.md"),
                  studies=None, samples=1000, log=print):
    """Writes the results page from the run records (or run directories); returns its path."""
    figures_dir = os.path.join(os.path.dirname(output) or ".", "results")
    sections = [study_report(name, runs_dir, figures_dir, samples)
                for name in (studies or STUDIES)]
    text = "\n".join([
        "# Results: which output layer is better?", "",
        "Written by `tf-outheads results` from the run records of `tf-outheads study` "
        f"(`{RECORDS_DIR}`: each run's scores, curves and translations; do not edit by hand). Every arm of a study trains on the same pieces for the same "
        "budget; seeds are the model's (the tokenizer is shared). The baselines are checked "
        "against OpenNMT-py by `benchmarks/peer_opennmt.py` "
        "(benchmarks/docs/peer_opennmt.md). Mean ± "
        "sd over seeds; a claim holds when the arm is ahead in the mean and significantly "
        f"(p < {ALPHA}) ahead in most seeds. \"min / run\" is the wall clock of training "
        "(dev evaluations included), which grows when other jobs share the machine.", "",
        f"Machine: {machine_description()}.", "",
        *sections,
    ])
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(output + ".tmp", output)
    log(f"[results] {output}")
    return output
