"""The own-corpus tutorial (text files, a run file, train/evaluate/translate/export) runs
end to end on a tiny setting."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "09_own_corpus.py"


def test_own_corpus_tutorial_trains_from_text_files_and_serves(tmp_path):
    env = dict(os.environ, OWN_CORPUS_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               OWN_CORPUS_TUTORIAL_DIR=str(tmp_path), TF_OUTHEADS_QUIET="1")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "train.en.gz" in section(out, "=== FILES ===")
    train = section(out, "=== TRAIN ===")
    assert re.search(r"train \(streamed from text files\): .*train\.es\.gz -> .*train\.en\.gz "
                     r"\(600 lines\)", train)
    assert "cleaning of train: kept" in train and "steps 6, test BLEU" in train
    assert re.search(r"^bleu\[test\.en\] +[0-9.]+  nrefs:1", section(out, "=== EVALUATE ==="), re.M)
    assert "same as the run's dev translations: True" in section(out, "=== TRANSLATE ===")
    assert re.search(r"SavedModel: 'En el principio .*' -> '.*'", section(out, "=== EXPORT ==="))
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()
