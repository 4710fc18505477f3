"""The domain-adaptation tutorial (a model of the Old Testament, adapted to the New with
and without its pieces merged in, against one trained from scratch) runs end to end on a
tiny setting."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "12_domain_adaptation.py"


def test_domain_adaptation_tutorial_adapts_with_and_without_new_pieces(tmp_path):
    env = dict(os.environ, DOMAIN_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               DOMAIN_TUTORIAL_DIR=str(tmp_path), TF_OUTHEADS_QUIET="1")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    files = section(out, "=== FILES ===")
    for name in ("new.train: 300", "old.train: 300", "new.dev: 20", "old.dev: 20"):
        assert name + " verses" in files
    # The new domain is the New Testament: its training file starts at Matthew 1:1.
    first = (tmp_path / "corpora" / "new.train.en").read_text("utf-8").splitlines()[0]
    assert "genealogy of Jesus Christ" in first, first
    runs = tmp_path / "runs"
    for name, mode in (("adapted", None), ("merged", "merge")):
        record = json.loads((runs / name / "init_from.json").read_text("utf-8"))
        assert record["run_dir"] == str(runs / "old") and record["update_vocab"] == mode
    assert not (runs / "scratch" / "init_from.json").exists()
    merged = json.loads((runs / "merged" / "tokenizer.json").read_text("utf-8"))
    assert merged["update_vocab"] == "merge"
    rows = section(out, "=== RESULTS ===").splitlines()
    for label, name in (("from scratch", "scratch"), ("adapted", "adapted"),
                        ("adapted, merged pieces", "merged")):
        row = next(line for line in rows if line.startswith(label + " ") and
                   (label != "adapted" or "merged" not in line))
        steps = json.loads((runs / name / "results.json").read_text("utf-8"))["steps"]
        assert row[len(label):].split()[0] == str(steps) == "3"
    before = next(line for line in rows if line.startswith("first model (before)"))
    assert before.split()[3] == "0"
