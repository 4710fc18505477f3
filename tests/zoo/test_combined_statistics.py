"""Effects over seeds and test sentences (`tf_outheads_zoo.study.combined`): per-sentence
BLEU statistics against sacrebleu's corpus BLEU on real sentences, and `combined_effect`
on synthetic per-sentence `(nll, tokens)` rows whose noises are planted: training noise
(a constant per seed), the test set's (a difference per sentence shared by every seed)
and their interaction; then Holm's correction."""

import math
import subprocess
import sys
import time

import numpy as np
import pytest

from tf_outheads_zoo.study.combined import (
    adjusted_verdict, bleu_from_statistics, combined_effect, cross_entropy_from_statistics,
    holm, sentence_bleu_statistics)
from tf_outheads_zoo.study.stats import seed_effect


@pytest.fixture(scope="module")
def corpus():
    """The embedded corpus's dev split: references, and as systems' translations the KJV
    column and four deterministic perturbations of it (keys 3 to 6), with their
    per-sentence BLEU statistics."""
    from tf_outheads.data import read_tsv
    from tf_outheads_zoo.presets import EMBEDDED_CORPUS

    dev = read_tsv(EMBEDDED_CORPUS, split="dev")
    kjv = list(dev.references["en_kjv"])

    def perturbed(k):  # drop every k-th word, swap the first two words of odd lines
        lines = []
        for i, line in enumerate(kjv):
            words = [w for j, w in enumerate(line.split()) if (i + j + 1) % k]
            if i % 2 and len(words) > 1:
                words[0], words[1] = words[1], words[0]
            lines.append(" ".join(words))
        return lines

    references = list(dev.targets)
    systems = {"kjv": kjv, **{k: perturbed(k) for k in (3, 4, 5, 6)}}
    return references, systems, {name: sentence_bleu_statistics(lines, references)
                                 for name, lines in systems.items()}


def rows(nll, tokens=None):
    """`(nll, tokens)` rows; one token per sentence unless told, so the corpus
    cross-entropy is the mean nll."""
    nll = np.asarray(nll, dtype=np.float64)
    tokens = np.ones_like(nll) if tokens is None else np.asarray(tokens, dtype=np.float64)
    return np.stack([nll, tokens], axis=1)


def planted(seed_deltas, rng, sentences=200, shared=None, interaction=0.0):
    """Baseline and arm `(nll, tokens)` rows per seed, the arm better by exactly
    `seed_deltas[s]` at seed s (cross-entropy, lower is better): the arm's nll per
    sentence is the baseline's minus the seed's delta, minus `shared` (a per-sentence
    difference shared by every seed, mean zero: the test set's noise) and minus a
    mean-zero interaction of sd `interaction` drawn per seed."""
    shared = np.zeros(sentences) if shared is None else shared - shared.mean()
    baselines, arms = [], []
    for delta in seed_deltas:
        base = rng.normal(3.0, 1.0, sentences)
        noise = rng.normal(0.0, interaction, sentences) if interaction else 0.0
        noise = noise - np.mean(noise)
        baselines.append(rows(base))
        arms.append(rows(base - delta - shared - noise))
    return arms, baselines


def ce_effect(arms, baselines, **kwargs):
    return combined_effect(arms, baselines, cross_entropy_from_statistics,
                           lower_is_better=True, **kwargs)


# -- per-sentence statistics ----------------------------------------------------------------

def test_sentence_statistics_reproduce_corpus_bleu_and_its_subsets(corpus):
    from tf_outheads.metrics import corpus_bleu

    references, systems, statistics = corpus
    for name in ("kjv", 4):
        hypotheses, stats = systems[name], statistics[name]
        assert stats.shape == (len(references), 10) and stats.dtype == np.int64
        expected = corpus_bleu(hypotheses, references).score
        assert abs(bleu_from_statistics(stats) - expected) < 1e-9
        assert abs(bleu_from_statistics(stats.sum(axis=0)) - expected) < 1e-9
        subset = np.arange(0, len(references), 3)
        expected = corpus_bleu([hypotheses[i] for i in subset],
                               [references[i] for i in subset]).score
        assert abs(bleu_from_statistics(stats[subset]) - expected) < 1e-9
        assert 5 < bleu_from_statistics(stats) < 60


def test_sentence_statistics_refuse_unpaired_lists():
    with pytest.raises(ValueError, match="3 hypotheses, 2 references"):
        sentence_bleu_statistics(["a b", "c", "d"], ["a b", "c"])


def test_cross_entropy_weighs_tokens_not_sentences():
    stats = rows([2.0, 10.0], tokens=[1, 10])  # per-sentence means 2.0 and 1.0
    assert cross_entropy_from_statistics(stats) == pytest.approx(12.0 / 11.0)
    assert cross_entropy_from_statistics(stats) != pytest.approx((2.0 + 1.0) / 2)


def test_the_module_imports_no_tensorflow():
    code = ("import sys, tf_outheads_zoo.study.combined; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- the combined interval ------------------------------------------------------------------

def test_seeds_that_agree_on_a_noisy_test_set_settle_nothing():
    """Every seed gains 0.2 give or take 0.01, but per sentence the difference has sd 5:
    the seeds alone say "holds", the test set's noise says it could be chance."""
    rng = np.random.default_rng(0)
    deltas = 0.2 + np.array([0.01, -0.01, 0.005, -0.005])
    arms, baselines = planted(deltas, rng, shared=rng.normal(0.0, 5.0, 200))
    effect = ce_effect(arms, baselines)
    assert effect.mean == pytest.approx(0.2) and effect.sd < 0.02
    assert seed_effect(deltas).verdict == "holds" and effect.t_verdict == "holds"
    assert effect.verdict == "inconclusive" and effect.low < 0 < effect.high
    assert 0.25 < effect.se_sentences < 0.45 and effect.se_sentences > 20 * effect.se_seeds
    assert effect.p_value > 0.05 and effect.t_p_value < 0.001
    assert effect.test_noise_limited and effect.seeds_needed is None
    assert "a larger test set would" in effect.text(unit="nats")


def test_a_test_set_effect_that_seeds_disagree_on_settles_nothing():
    """Within each seed the arm's difference is the same on every sentence (its own
    paired bootstrap is decisive), but the seeds disagree in sign."""
    rng = np.random.default_rng(1)
    deltas = [1.5, -0.8, 1.2, -0.5]
    arms, baselines = planted(deltas, rng, interaction=0.1)
    for arm, baseline, delta in zip(arms, baselines, deltas):
        alone = ce_effect([arm], [baseline], samples=500)
        assert alone.levels == "sentences only" and math.isinf(alone.dof)
        # Its sentences alone clear 0, but one seed leaves the training noise unmeasured:
        # the interval is shown, and no verdict or p-value is drawn from it.
        assert alone.low > 0 if delta > 0 else alone.high < 0
        assert alone.verdict == "inconclusive" and math.isnan(alone.p_value)
        assert "one seed" in alone.text() and "so no verdict" in alone.text()
    effect = ce_effect(arms, baselines)
    assert effect.verdict == "inconclusive" and effect.levels == "seeds and sentences"
    assert effect.se_sentences < 0.05 * effect.se_seeds
    assert effect.high - effect.low >= effect.t_high - effect.t_low - 1e-12
    assert effect.p_value >= effect.t_p_value - 1e-12
    assert effect.mean == pytest.approx(np.mean(deltas))


def test_an_effect_beyond_both_noises_holds_and_its_negation_is_contradicted():
    rng = np.random.default_rng(2)
    shared = rng.normal(0.0, 1.0, 300)
    arms, baselines = planted([2.1, 1.8, 2.0, 2.2, 1.9], rng, 300, shared, 0.5)
    effect = ce_effect(arms, baselines)
    assert effect.verdict == "holds" and effect.low > 0 and effect.p_value < 1e-4
    assert effect.se_sentences > 0 and effect.dof > 4 and effect.seeds_needed is None
    negated = ce_effect(baselines, arms)
    assert negated.verdict == "contradicted" and negated.high < 0
    assert negated.mean == pytest.approx(-effect.mean)
    assert negated.se_sentences == pytest.approx(effect.se_sentences)
    raised = combined_effect(arms, baselines, cross_entropy_from_statistics)
    assert raised.verdict == "contradicted" and raised.mean == pytest.approx(-effect.mean)


def test_a_margin_threshold_judges_within_one_point():
    """An arm 0.3 worse is contradicted against 0 but holds "within 1"; 1.5 worse
    is contradicted within 1."""
    rng = np.random.default_rng(3)
    shared = rng.normal(0.0, 0.5, 200)
    for drop, threshold, verdict in [(-0.3, 0.0, "contradicted"), (-0.3, -1.0, "holds"),
                                     (-1.5, -1.0, "contradicted")]:
        arms, baselines = planted(drop + np.array([0.05, -0.05, 0.02, -0.02]), rng,
                                  shared=shared, interaction=0.2)
        effect = ce_effect(arms, baselines, threshold=threshold)
        assert effect.verdict == verdict, (drop, threshold)
        assert effect.threshold == threshold
        assert effect.mean == pytest.approx(drop)


def test_the_sentence_bootstrap_resamples_both_arms_alike():
    """The arm loses 0.1 nats on every token of every sentence: each resample moves both
    arms' cross-entropy alike, so their difference never moves (independent resamples of
    the two arms would move it by about the per-token spread over the sentences)."""
    rng = np.random.default_rng(4)
    tokens = rng.integers(5, 40, 150).astype(np.float64)
    baselines = [rows(rng.normal(3.0, 1.5, 150) * tokens, tokens) for _ in range(3)]
    arms = [rows(base[:, 0] + 0.1 * tokens, tokens) for base in baselines]
    effect = combined_effect(arms, baselines, cross_entropy_from_statistics, samples=500)
    assert effect.mean == pytest.approx(0.1) and effect.se_sentences < 1e-9
    draws = np.random.default_rng(5).integers(0, 150, (2, 500, 150))
    unpaired = [cross_entropy_from_statistics(arms[0][a]) - cross_entropy_from_statistics(
        baselines[0][b]) for a, b in zip(*draws)]
    assert np.std(unpaired) > 0.05


@pytest.mark.slow  # a simulation over many bootstrap resamples (~6 s)
def test_a_null_effect_holds_at_the_test_level_where_the_seeds_alone_do_not():
    """No true effect; each simulated study draws its own test set, whose sentences
    favour one arm by chance, shared by its seeds, and seeds' noise ten times smaller
    in variance. The seeds-alone t interval calls that draw an effect; the combined
    interval keeps to the 5 % level."""
    rng = np.random.default_rng(6)
    seeds, combined, alone, simulations = 3, 0, 0, 300
    for _ in range(simulations):
        test_set = rng.normal(0.0, 2.0, 100)  # its mean: sd 0.2 across studies
        deltas = rng.normal(test_set.mean(), math.sqrt(0.004 * seeds), seeds)
        arms, baselines = planted(deltas, rng, 100, test_set, interaction=0.3)
        effect = ce_effect(arms, baselines, samples=200, seed=int(rng.integers(1 << 30)))
        combined += effect.verdict != "inconclusive"
        alone += effect.t_verdict != "inconclusive"
    assert combined / simulations <= 0.08
    assert alone / simulations > 0.15


def test_seeds_needed_falls_as_the_effect_grows_and_stops_at_the_test_sets_noise():
    rng = np.random.default_rng(7)
    spread = np.array([0.3, -0.3, 0.2, -0.2])
    needed = []
    for mean in (0.15, 0.25, 0.35):
        effect = ce_effect(*planted(mean + spread, np.random.default_rng(8),
                                    interaction=0.2))
        assert effect.verdict == "inconclusive" and not effect.test_noise_limited
        assert effect.seeds_needed_upper is None or \
            effect.seeds_needed_upper >= effect.seeds_needed
        assert effect.seeds_needed >= seed_effect(mean + spread).seeds_needed
        assert f"about {effect.seeds_needed} seeds" in effect.text()
        needed.append(effect.seeds_needed)
    assert needed[0] > needed[1] > needed[2] > 4
    assert ce_effect(*planted(0.35 + spread, np.random.default_rng(8),
                              interaction=0.2)).seeds_needed_upper > needed[2]
    noisy = ce_effect(*planted(0.05 + spread / 10, rng, shared=rng.normal(0, 3, 200)))
    assert 2.8 * noisy.se_sentences > abs(noisy.mean) and noisy.test_noise_limited
    assert noisy.seeds_needed is None and noisy.seeds_needed_upper is None


def test_bleu_units_on_real_sentences(corpus):
    """Three "seeds" of two systems on the 1,068 dev sentences: the mean is the mean
    of the corpus BLEU differences, and 2,000 sentence resamples take well under the
    time of a rescoring."""
    from tf_outheads.metrics import corpus_bleu

    references, systems, stats = corpus
    bleu = {k: corpus_bleu(systems[k], references).score for k in (3, 4, 5, 6)}
    pairs = [(5, 3), (6, 4), (4, 3)]
    arms, baselines = [stats[a] for a, _ in pairs], [stats[b] for _, b in pairs]
    started = time.perf_counter()
    effect = combined_effect(arms, baselines, bleu_from_statistics, samples=2000)
    assert time.perf_counter() - started < 10.0
    assert effect.mean == pytest.approx(np.mean([bleu[a] - bleu[b] for a, b in pairs]),
                                        abs=1e-9)
    assert effect.sentences == 1068 and 0.02 < effect.se_sentences < 1.0
    assert effect.text().startswith(f"Δ {effect.mean:+.2f} BLEU [")
    assert "over 3 seeds × 1,068 sentences" in effect.text()
    again = [combined_effect(arms, baselines, bleu_from_statistics, samples=200, seed=seed)
             for seed in (1, 1, 2)]
    assert again[0] == again[1] and again[0].se_sentences != again[2].se_sentences


def test_combined_effect_refuses_unpaired_units():
    unit = rows([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="2 arm and 1 baseline"):
        ce_effect([unit, unit], [unit])
    with pytest.raises(ValueError, match="shape"):
        ce_effect([unit, unit], [unit, unit[:2]])


# -- multiplicity ---------------------------------------------------------------------------

def test_holm_adjusts_the_textbook_family():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_holm_is_monotone_and_passes_missing_tests_through():
    raw = list(np.random.default_rng(9).uniform(0, 0.2, 12))
    adjusted = holm(raw)
    order = np.argsort(raw)
    assert all(np.diff(np.array(adjusted)[order]) >= 0)
    assert all(a >= p for a, p in zip(adjusted, raw)) and max(adjusted) <= 1.0
    assert holm([0.01, None, 0.04, float("nan")]) == pytest.approx([0.02, None, 0.04, None])


def test_holm_changes_a_verdict_in_the_pappas_family():
    """Three claims x two metrics: a raw p = 0.033 holds alone, not in its family."""
    raw = [0.033, 0.21, 0.47, 0.08, 0.65, 0.9]
    adjusted = holm(raw)
    assert adjusted[0] == pytest.approx(6 * 0.033) and adjusted[0] >= 0.05
    assert adjusted_verdict(0.4, 0.0, raw[0]) == "holds"
    assert adjusted_verdict(0.4, 0.0, adjusted[0]) == "inconclusive"
    assert adjusted_verdict(-0.4, 0.0, 0.001) == "contradicted"
    assert adjusted_verdict(0.4, 0.0, None) == "inconclusive"
