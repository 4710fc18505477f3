"""Effects over training seeds (`tf_outheads_zoo.study.stats.seed_effect`), on synthetic
per-sentence scores whose structure is known: a true effect, a seed-to-seed spread, and
sentence noise."""

import math

import numpy as np
import pytest
from scipy import stats

from tf_outheads_zoo.study.stats import MAX_SEEDS, detectable_effect, seed_effect


def study(effect, seed_sd, seeds, rng, sentences=400, sentence_sd=12.0):
    """Per-seed corpus scores (means of per-sentence scores) of a baseline and an arm:
    each seed moves both arms' runs by its own training noise, the arm's by `effect`
    plus noise of sd `seed_sd`. Returns the per-seed improvements arm - baseline."""
    base_sentences = rng.normal(30.0, sentence_sd, (seeds, sentences))
    run_noise = rng.normal(0.0, 1.0, (seeds, 1))  # shared by both arms of a seed
    baseline = (base_sentences + run_noise).mean(axis=1)
    arm_sentences = base_sentences + rng.normal(0.0, 4.0, (seeds, sentences))
    arm = (arm_sentences + run_noise + effect + rng.normal(0.0, seed_sd, (seeds, 1))).mean(axis=1)
    return arm - baseline


def test_a_true_effect_with_a_small_spread_over_five_seeds_holds():
    rng = np.random.default_rng(0)
    effect = seed_effect(study(2.0, 0.3, 5, rng))
    assert effect.verdict == "holds" and effect.low > 0 and effect.seeds == 5
    assert effect.low < 2.0 < effect.high
    assert effect.p_value < 0.01 and effect.seeds_needed is None
    assert effect.text().startswith("Δ +") and "over 5 seeds" in effect.text()


@pytest.mark.slow  # 300 simulated studies (about 6 s)
def test_no_effect_never_holds_beyond_the_test_level():
    rng = np.random.default_rng(1)
    verdicts = []
    for _ in range(300):
        effect = seed_effect(study(0.0, 1.0, 5, rng, sentences=50))
        # The verdict is what the interval says.
        assert (effect.verdict == "contradicted") == (effect.high < 0)
        assert (effect.verdict == "holds") == (effect.low > 0)
        verdicts.append(effect.verdict)
    # With no effect an interval above 0 is a 2.5 % event (alpha / 2): 7.5 of 300 expected.
    assert verdicts.count("holds") <= 17
    assert verdicts.count("inconclusive") >= 270


def test_the_spread_of_the_papers_seeds_is_inconclusive_and_says_how_many_seeds():
    # joint-512 vs tied, test BLEU per seed (docs/results.md, issue 39).
    effect = seed_effect([-1.02, -0.94, 1.27])
    assert effect.verdict == "inconclusive"
    assert effect.high - effect.low == pytest.approx(
        2 * stats.t.ppf(0.975, 2) * np.std([-1.02, -0.94, 1.27], ddof=1) / math.sqrt(3))
    # The seeds that would settle it at this spread, if the observed mean were true.
    needed = effect.seeds_needed
    distance = abs(effect.mean)
    assert needed is None or needed > MAX_SEEDS or (
        detectable_effect(needed, effect.sd) <= distance
        < detectable_effect(needed - 1, effect.sd))
    assert "would settle it" in effect.text()


def test_seeds_needed_is_where_the_detectable_effect_reaches_the_observed_one():
    effect = seed_effect([0.9, 0.1, 1.6])  # mean +0.87, sd 0.75: inconclusive at 3 seeds
    assert effect.verdict == "inconclusive"
    needed = effect.seeds_needed
    assert needed is not None and needed > 3
    assert detectable_effect(needed, effect.sd) <= effect.mean
    assert detectable_effect(needed - 1, effect.sd) > effect.mean


def test_a_claimed_effect_is_the_threshold():
    rng = np.random.default_rng(2)
    improvements = study(1.0, 0.2, 8, rng)
    assert seed_effect(improvements).verdict == "holds"
    # The arm is better, but by less than a claimed +3: the claim is contradicted.
    assert seed_effect(improvements, threshold=3.0).verdict == "contradicted"


@pytest.mark.parametrize("seeds", [3, 5, 10])
def test_the_detectable_effect_matches_the_t_test_closed_form(seeds):
    sd = 0.8
    closed = (stats.t.ppf(0.975, seeds - 1) + stats.t.ppf(0.8, seeds - 1)) * sd / math.sqrt(seeds)
    assert detectable_effect(seeds, sd) == pytest.approx(closed, rel=0.10)


@pytest.mark.slow  # 600 simulated studies (about 7 s)
def test_the_detectable_effect_is_found_with_the_stated_power():
    # Studies of 5 seeds whose true effect is the detectable one: 80 % exclude 0.
    rng = np.random.default_rng(3)
    sd = 1.0
    target = detectable_effect(5, sd)
    found = [seed_effect(rng.normal(target, sd, 5)).low > 0 for _ in range(600)]
    assert np.mean(found) == pytest.approx(0.8, abs=0.05)  # 3 sd of 600 draws


def test_one_seed_is_inconclusive_and_no_seed_is_refused():
    effect = seed_effect([1.5])
    assert effect.verdict == "inconclusive" and math.isnan(effect.mde)
    with pytest.raises(ValueError, match="at least one seed"):
        seed_effect([])


def test_seeds_needed_is_also_given_at_the_upper_confidence_bound_of_the_spread():
    # With 2 degrees of freedom the true sd can be several times the observed one: the
    # seeds needed at its 80 % upper confidence bound are given beside the observed ones.
    values = [0.9, 0.1, 1.6]
    effect = seed_effect(values)
    factor = math.sqrt(2 / stats.chi2.ppf(0.2, 2))  # about 2.2
    assert effect.seeds_needed_upper > effect.seeds_needed
    # The same mean with the spread at that bound needs exactly those seeds.
    mean = np.mean(values)
    widened = seed_effect([mean + factor * (v - mean) for v in values])
    assert widened.seeds_needed == effect.seeds_needed_upper
    assert (f"about {effect.seeds_needed} seeds would settle it at the observed spread, "
            f"up to {effect.seeds_needed_upper} if it was underestimated") in effect.text()
