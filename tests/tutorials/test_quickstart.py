"""The quickstart tutorial runs end to end on a tiny setting."""

import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "01_quickstart.py"


def test_quickstart_runs_and_loss_falls(tmp_path):
    env = dict(os.environ, QUICKSTART_TINY="1", QUICKSTART_RUN_DIR=str(tmp_path),
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    losses = eval(out.split("loss per epoch:")[1].splitlines()[0])
    assert losses[-1] < losses[0]
    assert "nrefs:2" in out and "BLEU = " in out
    assert (tmp_path / "tokenizer.json").exists()
