"""The statistics of a study: each run's BLEU, the paired tests of an arm's seeds against
a baseline's runs of the same seeds, and whether a paper's claim held (`claim_verdict`);
effects over seeds with their interval, minimum detectable effect and three-state verdict
(`seed_effect`: issue 39, not yet what the reports print).

An arm's *summary*, as `report.study_report` builds it and `claim_verdict` reads it, is a
dict: `seeds` (sorted), `dev` and `test` (BLEU per seed, in that order), and against a
baseline `deltas` (test BLEU minus the baseline run's of the same seed) and `p_test`
(the paired bootstrap p-value of each of those seeds).
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


def claim_verdict(arm, baseline, claim):
    """Whether a claim held: the arm beat the baseline on test BLEU in the mean, and
    significantly (p < 0.05 against the baseline's run of the same seed, that seed's
    run ahead) in most seeds; a "not worse" claim fails when the arm is behind in the
    mean and significantly behind in most seeds. `arm["p_test"]` and `arm["deltas"]`
    are its paired tests against the claim's baseline (`paired_against` when that is
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

    def text(self, unit="BLEU", digits=2):
        """One line: `holds: Δ +1.20 BLEU [+0.40, +2.00] over 5 seeds, p = 0.012; ...`."""
        f = f"{{:+.{digits}f}}"
        line = (f"{self.verdict}: Δ {f.format(self.mean)} {unit} "
                f"[{f.format(self.low)}, {f.format(self.high)}] over {self.seeds} seeds, "
                f"p = {self.p_value:.3g}")
        if not math.isnan(self.mde):
            line += f"; detectable at {POWER:.0%} power: {self.mde:.{digits}f} {unit}"
        if self.verdict == "inconclusive":
            line += (f"; about {self.seeds_needed} seeds would settle it"
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
    needed = None
    distance = abs(mean - threshold)
    if (verdict == "inconclusive" and sd > 0 and distance > 0
            and detectable_effect(MAX_SEEDS, sd, alpha, power) <= distance):
        # The detectable effect falls with the seeds: the first count that reaches it.
        low_seeds, needed = n, MAX_SEEDS
        while needed - low_seeds > 1:
            middle = (low_seeds + needed) // 2
            if detectable_effect(middle, sd, alpha, power) <= distance:
                needed = middle
            else:
                low_seeds = middle
    return SeedEffect(n, mean, sd, low, high, p_value, detectable_effect(n, sd, alpha, power),
                      threshold, verdict, needed)
