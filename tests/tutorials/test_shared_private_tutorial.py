"""The shared-private tutorial runs end to end on a tiny setting."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "07_shared_private.py"


def test_shared_private_tutorial(tmp_path):
    pytest.importorskip("eflomal")
    env = dict(os.environ, SP_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               SP_TUTORIAL_RUN_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout

    pairs = section(out, "=== PAIRS ===")
    counts = re.search(r"WordPairs: lm ([\d,]+) / wf ([\d,]+) / ur ([\d,]+)", pairs)
    lm, wf, ur = (int(c.replace(",", "")) for c in counts.groups())
    assert lm > 200 and wf >= 4 and ur > 0
    assert "▁Dios → ('▁God', 'lm')" in pairs
    assert (tmp_path / "word_pairs.tsv").exists()

    parameters = section(out, "=== PARAMETERS ===")
    assert "lm/wf/ur = (21172, 11, 8817): vanilla 46.1M, decoder WT 30.7M, shared-private 18.7M" \
        in parameters
    assert "lm/wf/ur = (4869, 309, 24822): vanilla 46.1M, decoder WT 30.7M, shared-private 22.0M" \
        in parameters

    results = section(out, "=== RESULTS ===")
    embeddings = dict(re.findall(r"\[(.+?)\] loss per epoch .*embedding parameters ([\d,]+)",
                                 results))
    assert set(embeddings) == {"decoder WT", "shared-private"}
    assert int(embeddings["shared-private"].replace(",", "")) < int(
        embeddings["decoder WT"].replace(",", ""))

    shared = section(out, "=== SHARED FEATURES ===")
    assert "▁Dios is paired with '▁God' on 29 of 32 features" in shared
    assert "shared slice equal: True, private slices equal: False" in shared
    assert (tmp_path / "pca_shared-private.svg").exists()
    assert (tmp_path / "pca_decoder_WT.svg").exists()

    saved = section(out, "=== SAVED MODEL ===")
    assert "same logits after reloading: True" in saved
