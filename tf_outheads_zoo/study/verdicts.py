"""A claim's verdict: its tests (test BLEU against the claim's threshold, the dev
cross-entropy where both arms measure the same kind), each by the interval over seeds and
test sentences (`combined.combined_effect`) or, for records without per-sentence
statistics, over seeds alone (`stats.seed_effect`); Holm's adjustment over a family of
such tests decides (`combined.holm`, `combined.adjusted_verdict`); stalled runs are
named (`stall`).

A summary (`report.study_report` builds them) is the dict `stats` describes, plus
`bleu_units` and `ce_units` (`{seed: per-sentence statistics}`) and `stalls`
(`{seed: stall.stall_check(run)}`).
"""

import math

from tf_outheads_zoo.study.combined import (
    adjusted_verdict, bleu_from_statistics, combined_effect, cross_entropy_from_statistics,
    holm)
from tf_outheads_zoo.study.stats import paired_improvements, seed_effect


def paired_units(arm, baseline, key):
    """`(arm units, baseline units)` per seed of `key` (`"bleu_units"`, `"ce_units"`:
    `{seed: per-sentence statistics}`), over the seeds both ran, in `arm`'s order; None
    unless every such seed has them on both sides."""
    arm_units, base_units = arm.get(key) or {}, baseline.get(key) or {}
    seeds = [seed for seed in arm["seeds"] if seed in set(baseline["seeds"])]
    if not seeds or any(seed not in arm_units or seed not in base_units for seed in seeds):
        return None
    return [arm_units[seed] for seed in seeds], [base_units[seed] for seed in seeds]


def claim_tests(arm, baseline, claim, samples=2000):
    """The tests of a claim, each `{"metric", "unit", "digits", "effect"}`: test BLEU
    against `claim.threshold`, then the dev cross-entropy (against 0) where both arms
    measure the same kind. The effect is `combined.combined_effect` (seeds and test
    sentences) where both arms have per-sentence statistics at every seed both ran,
    else `seed_effect` (seeds only: records from before them)."""
    tests = []
    deltas = paired_improvements(arm, baseline, "test")
    if deltas:
        units = paired_units(arm, baseline, "bleu_units")
        effect = (combined_effect(*units, bleu_from_statistics, claim.threshold,
                                  samples=samples) if units
                  else seed_effect(deltas, claim.threshold))
        tests.append({"metric": "test BLEU", "unit": "BLEU", "digits": 2, "effect": effect})
    if arm.get("ce_kind") and arm.get("ce_kind") == baseline.get("ce_kind"):
        ce = paired_improvements(baseline, arm, "dev_ce")  # lower is better: baseline - arm
        if ce:
            units = paired_units(arm, baseline, "ce_units")
            effect = (combined_effect(*units, cross_entropy_from_statistics,
                                      lower_is_better=True, samples=samples) if units
                      else seed_effect(ce))
            tests.append({"metric": f"dev cross-entropy ({arm['ce_kind']}; Δ = baseline − "
                                    "arm, lower is better)",
                          "unit": "nats", "digits": 3, "effect": effect})
    return tests


def claim_text(arm, baseline, claim, tests, adjusted, family):
    """A claim's verdict line from its `tests` (`claim_tests`) and their Holm-adjusted
    p-values `adjusted` within `family` (its description): each test's verdict follows
    its adjusted p (`combined.adjusted_verdict`); the interval and raw p are beside it.
    Runs that `stall.stall_check` flagged are named."""
    if not arm or not baseline:
        return "**not measured yet**"
    if not tests:
        return "**not measured yet** (no seed that both arms ran)"
    parts = []
    for test, p_holm in zip(tests, adjusted):
        effect = test["effect"]
        verdict = adjusted_verdict(effect.mean, effect.threshold, p_holm)
        detail = effect.text(unit=test["unit"], digits=test["digits"])
        if not hasattr(effect, "se_sentences"):
            detail += " (seeds only: these records have no per-sentence statistics)"
        if p_holm is not None:
            detail += f"; Holm-adjusted p = {p_holm:.3g} ({family})"
        elif not math.isnan(effect.p_value):
            detail += " (no Holm-adjusted p)"
        if test["metric"] == "test BLEU":
            against = f" (threshold {claim.threshold:+g})" if claim.threshold else ""
            parts.append(f"**{verdict}**{against}: test BLEU {detail}")
        else:
            parts.append(f"{test['metric'][0].upper()}{test['metric'][1:]}: **{verdict}**, "
                         f"{detail}")
    text = ". ".join(parts)
    if arm.get("ce_kind") and arm.get("ce_kind") != baseline.get("ce_kind"):
        text += (f". Dev cross-entropy not compared: {arm['ce_kind']} against "
                 f"{baseline.get('ce_kind')}")
    if arm.get("p_test"):
        text += ("; paired bootstrap per seed (test-set noise only): p = "
                 + " / ".join(f"{p:.3f}" for p in arm["p_test"]))
    stalled = stalled_runs(arm) + stalled_runs(baseline)
    if stalled:
        text += "; **uses stalled runs**: " + "; ".join(stalled)
    return text


def stalled_runs(summary):
    """`["<arm> seed <s> (why)", ...]` of a summary's runs that `stall.stall_check`
    flagged (`summary["stalls"]`: `{seed: check}`)."""
    return [f"{summary.get('arm', '?')} seed {seed} ({'; '.join(check['reasons'])})"
            for seed, check in sorted((summary.get("stalls") or {}).items())
            if check.get("stalled")]


def claim_verdict(arm, baseline, claim, samples=2000):
    """Whether a claim held, from the seeds both arms ran and, where the summaries have
    per-sentence statistics, the test sentences (`claim_tests`): test BLEU against
    `claim.threshold` **holds** (above it), is **contradicted** (below) or
    **inconclusive**, by the combined interval, with the seeds that would settle it; the
    dev cross-entropy gets its own verdict where both arms measure the same kind. The
    claim's tests are one Holm family here; a study adjusts over all its claims'
    (`report.study_report`). sacrebleu's per-seed paired bootstrap p-values
    (`arm["p_test"]`) follow; they decide nothing."""
    if not arm or not baseline:
        return "**not measured yet**"
    tests = claim_tests(arm, baseline, claim, samples)
    adjusted = holm([t["effect"].p_value for t in tests])
    return claim_text(arm, baseline, claim, tests, adjusted, f"family of {len(tests)}")
