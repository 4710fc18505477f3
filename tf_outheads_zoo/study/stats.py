"""The statistics of a study: each run's BLEU, the paired tests of an arm's seeds against
a baseline's runs of the same seeds, and whether a paper's claim held (`claim_verdict`).

An arm's *summary*, as `report.study_report` builds it and `claim_verdict` reads it, is a
dict: `seeds` (sorted), `dev` and `test` (BLEU per seed, in that order), and against a
baseline `deltas` (test BLEU minus the baseline run's of the same seed) and `p_test`
(the paired bootstrap p-value of each of those seeds).
"""

import json
import os
import statistics

ALPHA = 0.05


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
