"""tf_outheads_zoo.study.stall: stalled runs are flagged, healthy ones are not, and records
from before the guard are "not checked"."""

import json

import numpy as np
import pytest

from tf_outheads_zoo.study.stall import (
    MIN_SOURCE_GAIN, PLATEAU_MARGIN, STALL_SHARE, stall_check, stall_label, unigram_levels)


def _smoothed_loss(p, q, eps):
    """Label-smoothed cross-entropy of predicting `q` for gold pieces drawn from `p`."""
    return float((1 - eps) * -(p * np.log(q)).sum() + eps * -np.log(q).mean())


def test_the_unigram_level_is_the_entropy_without_label_smoothing():
    pieces = [3, 3, 3, 4, 5, 5]
    entropy, loss = unigram_levels(pieces, vocabulary_size=10)
    p = np.array([3, 1, 2]) / 6
    assert entropy == pytest.approx(-(p * np.log(p)).sum())
    assert loss == entropy


def test_the_smoothed_unigram_level_is_the_smoothed_loss_of_the_best_unigram_prediction():
    rng = np.random.default_rng(0)
    vocabulary, eps = 50, 0.1
    pieces = rng.zipf(1.5, 2000) % 30  # 30 of the 50 pieces used, Zipf-like
    _, loss = unigram_levels(pieces.tolist(), vocabulary, eps)
    p = np.bincount(pieces, minlength=vocabulary) / len(pieces)
    best = (1 - eps) * p + eps / vocabulary
    assert loss == pytest.approx(_smoothed_loss(p, best, eps), rel=1e-9)
    # No other unigram prediction does better (it is the minimum).
    for _ in range(20):
        other = best * np.exp(rng.normal(0, 0.05, vocabulary))
        assert _smoothed_loss(p, other / other.sum(), eps) >= loss - 1e-12


def test_unigram_levels_refuses_no_pieces_and_a_too_small_vocabulary():
    with pytest.raises(ValueError, match="at least one piece"):
        unigram_levels([], 10)
    with pytest.raises(ValueError, match="vocabulary_size=2"):
        unigram_levels([1, 2, 3], 2)


def _run(tmp_path, name, dev_losses, scores=None, head_loss=None):
    """A finished run directory with what `stall_check` reads: history.csv (the dev loss
    every 300 steps) and, optionally, cross_entropy.json."""
    run_dir = tmp_path / name
    run_dir.mkdir()
    rows = ["epoch,loss,step,val_bleu,val_loss"]
    rows += [f"{i},5.0,{300 * (i + 1)},1.0,{v}" for i, v in enumerate(dev_losses)]
    (run_dir / "history.csv").write_text("\n".join(rows) + "\n")
    if scores is not None:
        (run_dir / "cross_entropy.json").write_text(json.dumps({"dev": scores}))
    return str(run_dir)


def test_a_run_that_does_not_read_its_source_is_flagged(tmp_path):
    # The language-model plateau: the dev loss fell (the target prefix is read), but the
    # references score almost as well after another sentence's source.
    stalled = _run(tmp_path, "lm", [5.2, 4.8], {
        "cross_entropy": 4.21, "mismatched_source_cross_entropy": 4.80,
        "unigram_loss": 6.4})
    check = stall_check(stalled)
    assert check["stalled"] is True and stall_label(check) == "stalled"
    assert check["source_gain"] == pytest.approx(0.59)
    assert "does not read its source" in check["reasons"][0]
    assert "0.59 nats per token" in check["reasons"][0]
    healthy = _run(tmp_path, "ok", [4.6, 3.9], {
        "cross_entropy": 2.60, "mismatched_source_cross_entropy": 2.60 + 3 * MIN_SOURCE_GAIN,
        "unigram_loss": 6.4})
    check = stall_check(healthy)
    assert check["stalled"] is False and check["reasons"] == [] and stall_label(check) == ""


def test_a_run_on_the_unigram_plateau_at_half_its_budget_is_flagged(tmp_path):
    level = 6.4
    on_plateau = (1 - PLATEAU_MARGIN / 2) * level
    # Evaluations at 300 ... 1,500: the first at or after half the steps is step 900.
    losses = [level, level, on_plateau, 4.0, 3.8]
    check = stall_check(_run(tmp_path, "uni", losses, {"cross_entropy": 3.0,
                                                       "unigram_loss": level}))
    assert STALL_SHARE == 0.5
    assert check["stalled"] is True
    assert check["plateau"]["step"] == 900
    assert "on the unigram plateau at step 900 of 1,500" in check["reasons"][0]
    # Left it by then: not flagged (what happens later is the curve's business).
    losses[2] = (1 - 2 * PLATEAU_MARGIN) * level
    check = stall_check(_run(tmp_path, "left", losses, {"cross_entropy": 3.0,
                                                        "unigram_loss": level}))
    assert check["stalled"] is False


def test_scores_that_are_not_log_probabilities_are_not_read_as_nats(tmp_path):
    run_dir = _run(tmp_path, "cosine", [4.6, 3.9], {
        "cross_entropy": -0.8, "mismatched_source_cross_entropy": -0.7})
    with open(f"{run_dir}/cross_entropy.json") as f:
        scores = json.load(f)
    with open(f"{run_dir}/cross_entropy.json", "w") as f:
        json.dump(dict(scores, log_probabilities=False), f)
    assert stall_check(run_dir)["stalled"] is None


def test_a_record_from_before_the_guard_is_not_checked_never_healthy(tmp_path):
    old = _run(tmp_path, "old", [4.6, 3.9], {"cross_entropy": 2.6})
    check = stall_check(old)
    assert check["stalled"] is None and stall_label(check) == "not checked"
    assert stall_check(_run(tmp_path, "none", [4.6, 3.9]))["stalled"] is None
    assert check["source_gain"] is None and check["plateau"] is None


def test_seeds_added_after_a_study_started_are_logged_recorded_and_named(tmp_path):
    """Issue 53: a study's seeds are fixed when it first starts; seeds a later start adds
    are optional stopping if chosen after looking, so they are said and kept."""
    from tf_outheads_zoo.study.definition import added_seeds
    from tf_outheads_zoo.study.runner import _record_seed_plan

    runs = str(tmp_path / "runs")
    lines = []
    _record_seed_plan(runs, {"tied": (1234, 1, 2), "joint": (1234, 1, 2)}, lines.append)
    _record_seed_plan(runs, {"tied": (1234, 1, 2), "joint": (1234, 1, 2)}, lines.append)
    assert lines == [] and added_seeds(runs) == []
    _record_seed_plan(runs, {"tied": (1234, 1, 2), "joint": (1234, 1, 2, 3, 4)},
                      lines.append)
    (line,) = lines
    assert "seeds 3, 4 of arm joint were not in the study when it started" in line
    assert "optional stopping" in line
    ((entry),) = added_seeds(runs)
    assert (entry["arm"], entry["seeds"]) == ("joint", [3, 4])
    # Said once: the same seeds again add nothing.
    _record_seed_plan(runs, {"joint": (1234, 1, 2, 3, 4)}, lines.append)
    assert len(lines) == 1 and len(added_seeds(runs)) == 1
