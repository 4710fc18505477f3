"""The statistics of a study: each run's BLEU, the paired tests of an arm's seeds against
a baseline's runs of the same seeds, the dev cross-entropy of a run and its kind; effects
over seeds with their interval, minimum detectable effect and three-state verdict
(`seed_effect`). `combined` adds the test sentences' noise; `verdicts` judges claims.

An arm's *summary*, as `report.study_report` builds it and `verdicts.claim_verdict` reads it, is a
dict: `seeds` (sorted), `dev` and `test` (BLEU per seed, in that order), `dev_ce` (the
last dev cross-entropy per seed) and `ce_kind` (what it measures: `dev_cross_entropy`),
and against a baseline `deltas` (test BLEU minus the baseline run's of the same seed)
and `p_test` (the paired bootstrap p-value of each of those seeds).
"""

import dataclasses
import json
import math
import os
import statistics

ALPHA = 0.05
POWER = 0.8  # of the minimum detectable effect
MAX_SEEDS = 100  # the seeds `seed_effect` looks for at most
VERDICTS = ("holds", "contradicted", "inconclusive")


def primary_score(results, split):
    (key,) = [k for k in results[split] if k.startswith("bleu[") and "+" not in k]
    return results[split][key]["score"]


def hyp_name(split, variant):
    return f"{split}.{variant}.hyp" if variant else f"{split}.hyp"


def variant_score(run_dir, split, variant):
    """BLEU of a run's `split` translations (`variant`: an extra decoding or `None`)."""
    from tf_outheads.metrics import corpus_bleu, read_lines
    from tf_outheads_zoo.compare import run_references

    if variant is None:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
            return primary_score(json.load(f), split)
    path = os.path.join(run_dir, hyp_name(split, variant))
    return corpus_bleu(read_lines(path), run_references(run_dir, split)).score


def paired_p(baseline_dir, run_dir, split, variant, samples, references_dir=None):
    """sacrebleu's paired test of `run_dir` against `baseline_dir`, on the references of
    `references_dir` (default the baseline's; the arms of a study share them)."""
    from tf_outheads.metrics import paired_significance, read_lines
    from tf_outheads_zoo.compare import run_references

    references = run_references(references_dir or baseline_dir, split)
    systems = [("baseline", read_lines(os.path.join(baseline_dir, hyp_name(split, variant)))),
               ("system", read_lines(os.path.join(run_dir, hyp_name(split, variant))))]
    return paired_significance(systems, references, samples=samples)[1]


def paired_tests(arm_runs, test_scores, baseline_runs, samples, variant=None,
                 splits=("test",), references_runs=None):
    """Each seed of `test_scores` (`{seed: the arm's test BLEU}`, in order) that
    `baseline_runs` also ran, against the baseline's run of that seed.

    Returns `(deltas, {split: p-values}, signature)`: the test BLEU deltas, the paired
    bootstrap p-values of each split in `splits` (on the references of
    `references_runs`' run of the seed where there is one, else the baseline run's),
    and the signature of the last test (`""`: none ran).
    """
    deltas, p_values, signature = [], {split: [] for split in splits}, ""
    for seed, score in test_scores.items():
        if seed not in baseline_runs:
            continue
        deltas.append(score - variant_score(baseline_runs[seed], "test", variant))
        for split in splits:
            result = paired_p(baseline_runs[seed], arm_runs[seed], split, variant, samples,
                              (references_runs or {}).get(seed))
            p_values[split].append(result.p_value)
            signature = result.signature
    return deltas, p_values, signature


def paired_against(arm, arm_runs, baseline_runs, samples, references_runs=None):
    """`arm`'s summary with its test deltas and paired p-values against another arm's
    runs (each seed against that arm's run of the same seed; the references of
    `references_runs`' run of the seed where there is one: the study baseline's)."""
    deltas, p_values, _ = paired_tests(arm_runs, dict(zip(arm["seeds"], arm["test"])),
                                       baseline_runs, samples,
                                       references_runs=references_runs)
    return dict(arm, deltas=deltas, p_test=p_values["test"])


def dev_cross_entropy(run_dir):
    """`(cross-entropy, kind)` on dev of a finished run, or `(None, None)`.

    Where the run was scored by forced decoding (`cross_entropy.json`,
    `runner.score_run`): the cross-entropy per token of the dev references, with no
    label smoothing, comparable between every categorical head whatever loss it trained
    with (a continuous head's posterior is its own kind). Else (records from before):
    the output layer's loss on dev at the last evaluation of its history.csv
    (`val_logits_loss` where the model has an auxiliary head such as ReWE, whose total
    `val_loss` adds that head's weighted loss; else `val_loss`), label-smoothed where
    training is; an auxiliary head's from those records is its own kind, averaged
    otherwise than `val_loss` (by sentences over batches, fixed in issue 53). `kind`
    says what it measures ("full cross-entropy, label smoothing 0.1", "vmf"...): only
    runs of the same kind compare."""
    from tf_outheads_zoo.stored import read_stored_run, stored_settings_path

    scores = forced_scores(run_dir)
    if scores is not None:
        if not scores.get("log_probabilities", True):
            kind = f"mean decoding score of {scores['head']} (not a log-probability)"
        elif scores.get("continuous"):
            kind = (f"posterior cross-entropy of {scores['head']} by forced decoding (not "
                    "comparable with categorical heads')")
        else:
            kind = "cross-entropy by forced decoding, no label smoothing"
        return float(scores["dev"]["cross_entropy"]), kind
    losses = dev_loss_curve(run_dir)[1]
    if not losses:
        return None, None
    train = read_stored_run(stored_settings_path(run_dir))[1].train
    if train.loss:
        kind = train.loss["class_name"]
    else:
        kind = (f"{'sampled' if train.sampled_softmax else 'full'} cross-entropy, "
                f"label smoothing {train.label_smoothing:g}")
    if _has_column(run_dir, "val_logits_loss"):
        # Before issue 53 a model with an auxiliary head logged its output layer's dev
        # loss as a mean of batch means weighted by sentences, where `val_loss` is
        # weighted by tokens: its own kind, never compared with a plain arm's.
        kind += ", batch means weighted by sentences (an auxiliary head's, before issue 53)"
    return losses[-1], kind


def _has_column(run_dir, name):
    path = os.path.join(run_dir, "history.csv")
    with open(path, encoding="utf-8") as f:
        return name in f.readline().strip().split(",")


def forced_scores(run_dir):
    """A run's `cross_entropy.json` (dev and test cross-entropy by forced decoding,
    `runner.score_run`), or None for a run scored before it existed."""
    from tf_outheads_zoo.study.definition import CROSS_ENTROPY_FILE

    path = os.path.join(run_dir, CROSS_ENTROPY_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def dev_loss_curve(run_dir):
    """`(steps, losses)`: the output layer's loss on dev at each evaluation of a run's
    history.csv (`val_logits_loss` where the model has an auxiliary head such as ReWE,
    whose total `val_loss` adds that head's weighted loss; else `val_loss`)."""
    import csv

    path = os.path.join(run_dir, "history.csv")
    if not os.path.exists(path):
        return [], []
    with open(path, encoding="utf-8", newline="") as f:
        rows = [row for row in csv.DictReader(f) if row.get("val_loss") and row.get("step")]
    return ([int(float(row["step"])) for row in rows],
            [float(row.get("val_logits_loss") or row["val_loss"]) for row in rows])


def paired_improvements(arm, baseline, key):
    """`[arm - baseline]` of `key` (a list in seed order) over the seeds both ran."""
    base = dict(zip(baseline["seeds"], baseline.get(key) or []))
    return [value - base[seed] for seed, value in zip(arm["seeds"], arm.get(key) or [])
            if seed in base and value is not None and base[seed] is not None]


# -- effects over seeds ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SeedEffect:
    """An arm's effect against its baseline over training seeds (`seed_effect`).

    Every number is in units of improvement (positive: the arm is better).

    Attributes:
        seeds: int, the paired seeds `n`.
        mean, sd: the mean and sample standard deviation of the per-seed improvements.
        low, high: the two-sided `1 - alpha` t interval of the mean over seeds.
        p_value: the two-sided one-sample t-test of the mean against `threshold`.
        mde: the minimum detectable effect: the true mean improvement (beyond
            `threshold`) a study of `n` seeds with this spread finds with probability
            `power` (noncentral t). `nan` below 2 seeds.
        threshold: what the interval is compared with (0, or a claimed effect).
        verdict: `"holds"` (interval above `threshold`), `"contradicted"` (below it) or
            `"inconclusive"` (it contains it).
        seeds_needed: for an inconclusive verdict, the seeds at which the minimum
            detectable effect falls to the observed distance from `threshold` (the
            seeds that would settle it if the observed mean and spread are the true
            ones); `None` when settled, unknown (below 2 seeds, a mean on the
            threshold) or above `MAX_SEEDS`.
        seeds_needed_upper: the same at the 80 % upper confidence bound of the
            spread, sd·sqrt((n − 1)/χ²_{0.2, n−1}): with 2 degrees of freedom the
            observed sd can be far below the true one.
    """

    seeds: int
    mean: float
    sd: float
    low: float
    high: float
    p_value: float
    mde: float
    threshold: float
    verdict: str
    seeds_needed: int | None
    seeds_needed_upper: int | None = None

    def text(self, unit="BLEU", digits=2):
        """One line: `Δ +1.20 BLEU [+0.40, +2.00] over 5 seeds, p = 0.012; ...` (the
        interval is the 95 % t interval; the verdict is `verdict`)."""
        f = f"{{:+.{digits}f}}"
        line = (f"Δ {f.format(self.mean)} {unit} "
                f"[{f.format(self.low)}, {f.format(self.high)}] over {self.seeds} seeds, "
                f"p = {self.p_value:.3g}")
        if not math.isnan(self.mde):
            line += f"; detectable at {POWER:.0%} power: {self.mde:.{digits}f} {unit}"
        if self.verdict == "inconclusive":
            upper = (f"up to {self.seeds_needed_upper}" if self.seeds_needed_upper
                     else f"more than {MAX_SEEDS}")
            line += (f"; about {self.seeds_needed} seeds would settle it at the observed "
                     f"spread, {upper} if it was underestimated"
                     if self.seeds_needed else
                     f"; no number of seeds up to {MAX_SEEDS} would settle it at this "
                     "spread" if self.seeds >= 2 else "")
        return line


def detectable_effect(seeds, sd, alpha=ALPHA, power=POWER):
    """The smallest true mean improvement a two-sided one-sample t-test over `seeds`
    paired seeds with standard deviation `sd` detects with probability `power`:
    δ with P(T' > t_{1-α/2, n-1}) = power, T' noncentral t (n - 1 degrees of freedom,
    noncentrality δ√n / sd). The far tail, below -t, is left out (under 1e-3 of the
    power at these effects). Close to the closed form (t_{1-α/2} + t_{power})·sd/√n:
    within 5 % from 3 seeds."""
    from scipy import optimize, stats

    if seeds < 2 or not sd > 0:
        return float("nan") if seeds < 2 else 0.0
    dof = seeds - 1
    critical = stats.t.ppf(1 - alpha / 2, dof)
    root = math.sqrt(seeds)

    def shortfall(effect):
        return stats.nct.sf(critical, dof, effect * root / sd) - power

    closed = (critical + stats.t.ppf(power, dof)) * sd / root
    return float(optimize.brentq(shortfall, 0.5 * closed, 2.0 * closed, xtol=1e-6 * sd))


def seed_effect(improvements, threshold=0.0, alpha=ALPHA, power=POWER):
    """The effect over seeds of an arm against its baseline: interval, p-value, minimum
    detectable effect and a three-state verdict (`SeedEffect`).

    The per-seed differences are the unit: each seed trains both arms, so training
    noise (the spread between seeds) is in them; a paired bootstrap over the
    sentences of one pair of runs sees only test-set noise. The interval is the t
    interval of their mean (scipy.stats), which needs no more than the seeds.

    Args:
        improvements: per-seed differences arm - baseline, oriented so that positive is
            better (BLEU: arm - baseline; cross-entropy: baseline - arm).
        threshold: float, what "holds" must beat: 0, or the claimed improvement.
        alpha: float, two-sided level of the interval and the test.
        power: float, of the minimum detectable effect and the seeds needed.
    """
    from scipy import stats

    values = [float(v) for v in improvements]
    n = len(values)
    if n == 0:
        raise ValueError("seed_effect needs at least one seed's improvement. Received: []")
    mean = statistics.fmean(values)
    if n < 2:
        return SeedEffect(n, mean, float("nan"), float("-inf"), float("inf"), float("nan"),
                          float("nan"), threshold, "inconclusive", None)
    sd = statistics.stdev(values)
    half = stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if sd > 0:
        p_value = float(stats.ttest_1samp(values, threshold).pvalue)
    else:
        p_value = 1.0 if mean == threshold else 0.0
    verdict = "holds" if low > threshold else "contradicted" if high < threshold \
        else "inconclusive"
    needed = upper = None
    distance = abs(mean - threshold)
    if verdict == "inconclusive" and sd > 0 and distance > 0:
        needed = _seeds_to_detect(sd, n, distance, alpha, power)
        upper = _seeds_to_detect(sd * math.sqrt((n - 1) / stats.chi2.ppf(0.2, n - 1)), n,
                                 distance, alpha, power)
    return SeedEffect(n, mean, sd, low, high, p_value, detectable_effect(n, sd, alpha, power),
                      threshold, verdict, needed, upper)


def _seeds_to_detect(sd, seeds, distance, alpha, power):
    """The first seed count above `seeds` whose detectable effect (`detectable_effect`,
    which falls with the seeds) reaches `distance`, or None beyond `MAX_SEEDS`."""
    if detectable_effect(MAX_SEEDS, sd, alpha, power) > distance:
        return None
    low_seeds, needed = seeds, MAX_SEEDS
    while needed - low_seeds > 1:
        middle = (low_seeds + needed) // 2
        if detectable_effect(middle, sd, alpha, power) <= distance:
            needed = middle
        else:
            low_seeds = middle
    return needed
