"""The head-study tutorial (three heads on the user's text files: study file, study,
verdicts, exported winner) runs end to end on a tiny setting."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "10_head_study.py"


def test_head_study_tutorial_compares_three_heads_and_serves_the_winner(tmp_path):
    env = dict(os.environ, HEAD_STUDY_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               HEAD_STUDY_TUTORIAL_DIR=str(tmp_path), TF_OUTHEADS_QUIET="1")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "train.es" in section(out, "=== FILES ===")
    study = section(out, "=== STUDY ===")
    for number, arm in enumerate(("untied", "tied", "joint"), 1):
        # 4 steps do not teach a model to read its source: the stall check says so.
        assert re.search(rf"run {number}/3 {arm} seed 1: step 4/4, dev BLEU [0-9.]+ STALLED "
                         r"\(does not read its source.*\) in ", study)
    results = section(out, "=== RESULTS ===")
    rows = [line for line in results.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| untied", "| tied", "| joint"]
    assert "corpora/train.es" not in rows[2]  # the shared data is said once, above
    assert "- joint beats tied (paper: +0.5 to +1.2 BLEU (Table 2)): **inconclusive**" in results
    assert results.count("cross-entropy by forced decoding, no label smoothing)") == 3
    numbers = json.loads((tmp_path / "runs" / "results.json").read_text(encoding="utf-8"))
    winner = section(out, "=== WINNER ===")
    assert f"winner: {numbers['winner']['arm']} seed 1 by dev_bleu" in winner
    assert re.search(r"SavedModel: 'En el principio .*' -> '.*'", winner)
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()
