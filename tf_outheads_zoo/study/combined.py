"""Effects over seeds *and* test sentences: one interval for both noises, the seeds that
would settle a claim, and a multiplicity correction over a study's claims.

`stats.seed_effect`'s t interval over the per-seed differences sees the training noise,
not the test set's: every seed is scored on the same sentences, one draw from the
domain, and a draw that favours the arm favours it at every seed. `combined_effect` adds
the test set's noise (a paired bootstrap over its sentences) to the seeds' on
Welch-Satterthwaite degrees of freedom. It works from per-sentence sufficient
statistics (`sentence_bleu_statistics`; `(nll, tokens)` rows for cross-entropy), so a
resampled corpus score is a matrix product, never a rescoring. `holm` adjusts a study's
family of p-values, `adjusted_verdict` reads them. Imports no TensorFlow.
"""

import dataclasses
import math

import numpy as np

from tf_outheads_zoo.study.stats import (ALPHA, MAX_SEEDS, POWER, detectable_effect,
                                         seed_effect)

BLEU_COLUMNS = 10  # hyp length, ref length, 4 n-gram matches, 4 n-gram totals
_CHUNK = 1 << 22  # bootstrap replicates x sentences held in memory at once


# -- per-sentence statistics ----------------------------------------------------------------

def sentence_bleu_statistics(hypotheses, references, tokenize="13a"):
    """Per-sentence sufficient statistics of corpus BLEU, as sacrebleu 2.6 collects them.

    Args:
        hypotheses: list of str, one detokenized translation per sentence.
        references: list of str, one reference per sentence (one stream).
        tokenize: str, sacrebleu tokenizer. Defaults to `"13a"`.

    Returns:
        numpy int64 array `(n_sentences, 10)`: hypothesis length, closest reference
        length, matched and total n-grams for n = 1..4. Rows sum to the corpus's.

    Raises:
        ValueError: when the two lists differ in length (sacrebleu would zip them).

    References:
        Papineni et al. 2002, "BLEU: a method for automatic evaluation of machine
        translation"; Post 2018, "A Call for Clarity in Reporting BLEU Scores".
    """
    from sacrebleu.metrics import BLEU

    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"sentence_bleu_statistics needs one reference per hypothesis. "
                         f"Received: {len(hypotheses)} hypotheses, {len(references)} "
                         f"references.")
    if not hypotheses:
        return np.zeros((0, BLEU_COLUMNS), dtype=np.int64)
    metric = BLEU(tokenize=tokenize)
    rows = metric._extract_corpus_statistics(hypotheses, [references])
    return np.asarray(rows, dtype=np.int64).reshape(len(hypotheses), BLEU_COLUMNS)


def _summed(stats):
    stats = np.asarray(stats)
    return stats.sum(axis=0) if stats.ndim == 2 else stats


def _bleu(row):
    """sacrebleu's corpus BLEU of one summed row (a list of 10 ints), default settings."""
    from sacrebleu.metrics import BLEU

    return float(BLEU.compute_bleu(row[2:6], row[6:10], row[0], row[1],
                                   smooth_method="exp").score)


def bleu_from_statistics(stats):
    """Corpus BLEU from per-sentence statistics (`sentence_bleu_statistics`).

    Args:
        stats: array `(n, 10)` of per-sentence rows (summed here) or `(10,)`, already
            summed.

    Returns:
        float, sacrebleu's corpus BLEU of the summed rows with its default settings
        (exponential smoothing, no effective order): `corpus_bleu(...).score`.
    """
    return _bleu(np.rint(_summed(stats)).astype(np.int64).tolist())


def cross_entropy_from_statistics(stats):
    """Per-token cross-entropy from per-sentence `(nll, tokens)` rows: summed negative
    log-probability over summed tokens, so every token weighs the same (not the mean of
    per-sentence means, which gives a short sentence's tokens more weight).

    Args:
        stats: array `(n, 2)` of rows `(negative log-probability, tokens)`, or `(2,)`.

    Returns:
        float, nats per token.
    """
    nll, tokens = _summed(stats).astype(np.float64)
    return float(nll / tokens)


# The statistics above on `(m, k)` summed rows at once (`_evaluate`); others, row by row.
_BATCHED = {cross_entropy_from_statistics: lambda sums: sums[:, 0] / sums[:, 1]}


def _evaluate(statistic, sums):
    batched = _BATCHED.get(statistic)
    if batched is not None:
        return np.asarray(batched(sums), dtype=np.float64)
    return np.array([statistic(row) for row in sums], dtype=np.float64)


# -- the combined interval ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CombinedEffect:
    """An arm's effect against its baseline over seeds and test sentences
    (`combined_effect`). Every number is in units of improvement (positive: arm better).

    Attributes:
        seeds, sentences: int, the paired seeds `n` and the test sentences.
        mean, sd: mean and sample standard deviation of the per-seed improvements.
        se_seeds: `sd / sqrt(n)`, the training noise of the mean (nan at one seed).
        se_sentences: the test set's noise of the mean: the standard deviation of the
            seed-mean improvement over a paired bootstrap of the sentences.
        se: `sqrt(se_seeds² + se_sentences²)`.
        dof: Welch-Satterthwaite degrees of freedom of `se` (inf: no seed level).
        levels: `"seeds and sentences"`, or `"sentences only"` at one seed.
        seeds_floor: bool, the interval is the seeds-alone t interval's width, which
            Welch's would undercut (few seeds, small test noise; see `combined_effect`).
        low, high, p_value: the `1 - alpha` interval, the test against `threshold`.
        threshold: what the interval is compared with (0, or -margin).
        verdict: `"holds"` (above `threshold`), `"contradicted"` or `"inconclusive"`.
        mde: the minimum detectable effect at `n` seeds (nan at one seed).
        seeds_needed: for an inconclusive verdict, the seeds at which the minimum
            detectable effect falls to `|mean - threshold|` if the observed spread is
            the true one; None when settled, unknown or beyond `MAX_SEEDS`.
        seeds_needed_upper: the same at the 80 % upper confidence bound of the spread.
        test_noise_limited: bool, the test set's noise alone keeps the distance below
            detectable: no number of seeds settles it, a larger test set would.
        t_low, t_high, t_p_value, t_verdict: `seed_effect`'s t interval over seeds alone.
    """

    seeds: int
    sentences: int
    mean: float
    sd: float
    se_seeds: float
    se_sentences: float
    se: float
    dof: float
    levels: str
    seeds_floor: bool
    low: float
    high: float
    p_value: float
    threshold: float
    verdict: str
    mde: float
    seeds_needed: int | None
    seeds_needed_upper: int | None
    test_noise_limited: bool
    t_low: float
    t_high: float
    t_p_value: float
    t_verdict: str

    def text(self, unit="BLEU", digits=2):
        """One line: `Δ +0.20 BLEU [-0.12, +0.52] (seeds and sentences; seeds alone
        [+0.16, +0.24]) over 3 seeds × 1,074 sentences, p = 0.21; about 4 seeds ...`."""
        f = f"{{:+.{digits}f}}"
        if self.seeds >= 2:
            source = (f"seeds and sentences; seeds alone "
                      f"[{f.format(self.t_low)}, {f.format(self.t_high)}]")
        else:
            source = ("sentences only: one seed, its training noise unmeasured, so no "
                      "verdict")
        line = (f"Δ {f.format(self.mean)} {unit} [{f.format(self.low)}, "
                f"{f.format(self.high)}] ({source}) over {self.seeds} "
                f"seed{'s' if self.seeds != 1 else ''} × {self.sentences:,} sentences"
                + (f", p = {self.p_value:.3g}" if self.seeds >= 2 else ""))
        if self.verdict != "inconclusive":
            return line
        if self.test_noise_limited:
            line += (f"; no number of seeds settles it on this test set (its sampling "
                     f"noise alone, ±{self.se_sentences:.{digits}f} {unit}, hides the "
                     f"distance); a larger test set would")
        elif self.seeds_needed:
            upper = (f"up to {self.seeds_needed_upper}" if self.seeds_needed_upper
                     else f"more than {MAX_SEEDS}")
            line += (f"; about {self.seeds_needed} seeds would settle it at the observed "
                     f"spread, {upper} if it was underestimated")
        elif self.seeds >= 2:
            line += (f"; no number of seeds up to {MAX_SEEDS} would settle it at the "
                     f"observed spread")
        return line


def _welch(seed_var, test_var, seeds):
    """`(se, dof)` of a mean over `seeds` seeds of variance `seed_var` (n - 1 degrees of
    freedom) plus a known test-set variance `test_var`."""
    part = seed_var / seeds
    se = math.sqrt(part + test_var)
    dof = (part + test_var) ** 2 / (part ** 2 / (seeds - 1)) if part > 0 else math.inf
    return se, dof


def _seeds_needed(sd, test_var, seeds, distance, alpha, power):
    """The smallest n' in (seeds, MAX_SEEDS] whose minimum detectable effect is at most
    `distance`, or None: (t_{1-α/2,ν'} + t_{power,ν'})·SE(n') with Welch's ν', never
    below the seeds-alone one (`detectable_effect`); both fall as n' grows."""
    def detectable(count):
        from scipy import stats

        se, dof = _welch(sd * sd, test_var, count)
        welch = (stats.t.ppf(1 - alpha / 2, dof) + stats.t.ppf(power, dof)) * se
        return max(welch, detectable_effect(count, sd, alpha, power))

    if seeds >= MAX_SEEDS or detectable(MAX_SEEDS) > distance:
        return None
    low, high = seeds, MAX_SEEDS  # detectable(low) > distance >= detectable(high)
    while high - low > 1:
        middle = (low + high) // 2
        if detectable(middle) <= distance:
            high = middle
        else:
            low = middle
    return high


def _bootstrap_variance(arm, base, statistic, lower_is_better, samples, seed):
    """Variance of the seed-mean improvement over `samples` resamples of the sentences,
    each one multiset of indices (as counts) applied to every seed and both arms."""
    seeds, sentences, columns = arm.shape
    stacked = np.concatenate([arm, base]).transpose(1, 0, 2).reshape(sentences, -1)
    rng = np.random.default_rng(seed)
    uniform = np.full(sentences, 1.0 / sentences)
    chunk = max(1, _CHUNK // max(sentences, 1))
    means = []
    for start in range(0, samples, chunk):
        counts = rng.multinomial(sentences, uniform, size=min(chunk, samples - start))
        sums = (counts.astype(np.float64) @ stacked).reshape(-1, columns)
        scores = _evaluate(statistic, sums).reshape(len(counts), 2, seeds)
        deltas = (scores[:, 0] - scores[:, 1]) * (-1.0 if lower_is_better else 1.0)
        means.append(deltas.mean(axis=1))
    means = np.concatenate(means)
    return float(np.var(means, ddof=1)) if len(means) > 1 else 0.0


def combined_effect(arm_units, baseline_units, statistic, threshold=0.0,
                    lower_is_better=False, samples=2000, seed=12345, alpha=ALPHA,
                    power=POWER):
    """The effect of an arm against its baseline with the training noise (seeds) and
    the test set's sampling noise (sentences) in one interval (`CombinedEffect`).

    Each seed s gives Δ_s = statistic(arm_s) - statistic(baseline_s) (reversed when
    lower is better). Two noises, two levels. The seeds': the sample variance s² of
    the Δ_s, entering through its t interval, s²/n on n - 1 degrees of freedom. The
    test set's: v, the variance of the seed-mean Δ over a paired bootstrap of the
    sentences, one resample per replicate shared by every seed and both arms (the
    test set is one draw that all seeds share; Koehn 2004 resamples it for one pair
    of systems, Clark et al. 2011 pair that with several optimizer runs).
    SE = sqrt(s²/n + v) on Welch-Satterthwaite's ν = (s²/n + v)² / ((s²/n)² / (n - 1))
    (inf when s² = 0 or at one seed, where only the sentence level is measured). The
    interval is mean ± t_{1-α/2, ν}·SE, its p-value two-sided on t_ν.

    The seeds enter through their t interval, not by resampling them as the second
    level of a hierarchical bootstrap (Saravanan et al. 2020): at 3 to 6 seeds a
    bootstrap over seeds underestimates their variance by (n - 1)/n and has normal,
    not t, tails: anti-conservative. The seed × sentence interaction is in both terms
    (in s², and in v divided by n), so SE errs wide. But ν, estimated from s², runs
    high at 2 to 4 seeds when v is small beside s²/n: simulated, the Welch interval
    then rejects a true null up to 8 % (3 seeds) or 13 % (2 seeds) of the time at 5 %,
    being narrower than the seeds-alone t interval. So it is never narrower than that
    (`seeds_floor`; the p-value is the larger of the two), which keeps those under
    about 5.5 %; from about 6 seeds the floor no longer binds.

    Args:
        arm_units, baseline_units: lists, one per seed in the same seed order, of
            per-sentence statistic arrays `(sentences, k)`, every one with the same
            sentences in the same order.
        statistic: callable on a column-summed `(k,)` array, giving the corpus score
            (`bleu_from_statistics`, `cross_entropy_from_statistics`).
        threshold: float, what "holds" must beat: 0, or -margin for "within margin".
        lower_is_better: bool, Δ = baseline - arm (cross-entropy).
        samples: int, bootstrap replicates of the sentences.
        seed: int, of the numpy Generator drawing them.
        alpha: float, two-sided level of the interval and the test.
        power: float, of the minimum detectable effect and the seeds needed.

    Returns:
        `CombinedEffect`. `seeds_needed` uses the minimum detectable effect at n'
        seeds, (t_{1-α/2,ν'} + t_{power,ν'})·sqrt(s²/n' + v), never below the seeds-alone
        one (`stats.detectable_effect`); where even n' -> inf leaves the test set's
        (z_{1-α/2} + z_{power})·sqrt(v) above the distance, `test_noise_limited`.

    Raises:
        ValueError: no seed, unpaired seeds, or arrays of different shapes.

    References:
        Koehn 2004, "Statistical significance tests for machine translation
        evaluation"; Clark et al. 2011, "Better hypothesis testing for statistical
        machine translation: controlling for optimizer instability"; Saravanan, Berman
        & Sober 2020, "Application of the hierarchical bootstrap to multi-level data in
        neuroscience"; Satterthwaite 1946, "An approximate distribution of estimates of
        variance components"; Welch 1947, "The generalization of 'Student's' problem
        when several different population variances are involved".
    """
    from scipy import stats

    if not arm_units or len(arm_units) != len(baseline_units):
        raise ValueError(f"combined_effect needs the same seeds (at least one) for both "
                         f"arms. Received: {len(arm_units)} arm and "
                         f"{len(baseline_units)} baseline seeds.")
    arm = [np.asarray(unit, dtype=np.float64) for unit in arm_units]
    base = [np.asarray(unit, dtype=np.float64) for unit in baseline_units]
    shapes = {unit.shape for unit in arm + base}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2 or not arm[0].shape[0]:
        raise ValueError(f"combined_effect needs every seed's statistics as one "
                         f"(sentences, columns) shape. Received: {sorted(shapes)}.")
    arm, base = np.stack(arm), np.stack(base)
    n, sentences = arm.shape[:2]
    scores = _evaluate(statistic, np.concatenate([arm, base]).sum(axis=1))
    deltas = scores[n:] - scores[:n] if lower_is_better else scores[:n] - scores[n:]
    mean = float(deltas.mean())
    test_var = _bootstrap_variance(arm, base, statistic, lower_is_better, samples, seed)
    alone = seed_effect(deltas.tolist(), threshold, alpha, power)
    distance = abs(mean - threshold)
    if n >= 2:
        sd = float(np.std(deltas, ddof=1))
        se, dof = _welch(sd * sd, test_var, n)
        se_seeds = sd / math.sqrt(n)
    else:
        sd, se_seeds, se, dof = math.nan, math.nan, math.sqrt(test_var), math.inf
    half = float(stats.t.ppf(1 - alpha / 2, dof)) * se
    p_value = (float(2 * stats.t.sf(distance / se, dof)) if se > 0
               else 1.0 if distance == 0 else 0.0)
    floor = bool(n >= 2 and alone.high - alone.mean > half)
    if floor:
        half, p_value = alone.high - alone.mean, max(p_value, alone.p_value)
    low, high = mean - half, mean + half
    verdict = ("holds" if low > threshold else "contradicted" if high < threshold
               else "inconclusive")
    if n < 2:
        # One seed: the test set's noise is measured, the training noise is not, and
        # a claim about a method needs both. The interval is shown; no verdict, no p.
        verdict, p_value = "inconclusive", math.nan
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    limited = bool(verdict == "inconclusive" and z * math.sqrt(test_var) > distance)
    needed = upper = None
    if verdict == "inconclusive" and not limited and n >= 2 and distance > 0:
        needed = _seeds_needed(sd, test_var, n, distance, alpha, power)
        sd_upper = sd * math.sqrt((n - 1) / stats.chi2.ppf(0.2, n - 1))
        upper = _seeds_needed(sd_upper, test_var, n, distance, alpha, power)
    mde = (max(float(stats.t.ppf(1 - alpha / 2, dof) + stats.t.ppf(power, dof)) * se,
               alone.mde) if n >= 2 else math.nan)
    return CombinedEffect(
        seeds=n, sentences=sentences, mean=mean, sd=sd, se_seeds=se_seeds,
        se_sentences=math.sqrt(test_var), se=se, dof=dof, seeds_floor=floor,
        levels="seeds and sentences" if n >= 2 else "sentences only", low=float(low),
        high=float(high), p_value=float(p_value), threshold=threshold, verdict=verdict,
        mde=float(mde), seeds_needed=needed, seeds_needed_upper=upper,
        test_noise_limited=limited, t_low=float(alone.low), t_high=float(alone.high),
        t_p_value=float(alone.p_value), t_verdict=alone.verdict)


# -- multiplicity ---------------------------------------------------------------------------

def holm(p_values):
    """Holm-Bonferroni adjusted p-values of a family of tests: the i-th smallest of m
    times m - i + 1, made non-decreasing in that order, capped at 1. Rejecting below α
    keeps the family-wise error rate at α under any dependence between the tests.

    Args:
        p_values: list of float; None or NaN entries (tests not run) are passed through
            as None and left out of the family.

    Returns:
        list of float or None, in the original order.

    References:
        Holm 1979, "A simple sequentially rejective multiple test procedure".
    """
    present = sorted((float(p), i) for i, p in enumerate(p_values)
                     if p is not None and not math.isnan(float(p)))
    adjusted, running = [None] * len(p_values), 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (len(present) - rank) * p))
        adjusted[i] = running
    return adjusted


def adjusted_verdict(mean, threshold, adjusted_p, alpha=ALPHA):
    """The three-state verdict from a family-adjusted p-value (`holm`): "holds" when it
    is below `alpha` and `mean` above `threshold`, "contradicted" when below `alpha`
    and `mean` below `threshold`, else (or None) "inconclusive"."""
    if adjusted_p is None or math.isnan(adjusted_p) or not adjusted_p < alpha:
        return "inconclusive"
    return ("holds" if mean > threshold else "contradicted" if mean < threshold
            else "inconclusive")
