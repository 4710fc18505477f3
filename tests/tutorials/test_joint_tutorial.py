"""The joint-head tutorial runs end to end on a tiny setting."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "02_joint_head.py"


@pytest.fixture(scope="module")
def tutorial_output(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("joint-tutorial")
    env = dict(os.environ, JOINT_TUTORIAL_TINY="1", JOINT_TUTORIAL_RUN_DIR=str(run_dir),
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, run_dir


def test_parameter_tables_show_both_capacities(tutorial_output):
    out, _ = tutorial_output
    tied = section(out, "=== PARAMETERS [tied] ===")
    joint = section(out, "=== PARAMETERS [joint(64)] ===")
    for table in (tied, joint):
        assert re.search(r"^group\s+parameters\s+trainable\s+share$", table, re.M)
        assert re.search(r"^output_layer\s+[\d,]+", table, re.M)
        assert re.search(r"^total\s+[\d,]+", table, re.M)
    # Tying adds the bias only (Eq. 9); the joint head d·d_j + d_j·d_h + |V| (Eq. 16).
    assert re.search(r"output-layer capacity \(Eq\. 9, .*\): 500 = bias 500", tied)
    capacity = re.search(r"output-layer capacity \(Eq\. 16, .*\): ([\d,]+) =", joint)
    assert capacity and int(capacity.group(1).replace(",", "")) == 500 + 2 * (32 * 64 + 64)


def test_both_models_are_trained_and_scored_with_bleu(tutorial_output):
    out, run_dir = tutorial_output
    for name in ("tied", r"joint\(64\)"):
        losses = re.search(rf"^loss per epoch \[{name}\]: (\[.*\])$", out, re.M)
        assert losses and len(eval(losses.group(1))) == 2
        assert re.search(rf"^BLEU \[{name}\]: BLEU = \d+\.\d+ .*\| nrefs:1\|", out, re.M)
    assert (run_dir / "tokenizer.json").exists()


def test_nearest_neighbour_table_has_five_per_representation(tutorial_output):
    out, _ = tutorial_output
    table = section(out, "=== NEAREST NEIGHBOURS [joint(64)]")
    lines = table.splitlines()
    assert re.match(r"query\s+\| input representation \(E\)\s+\| output representation \(E'\)",
                    lines[1])
    rows = [line for line in lines[3:] if line.strip()]
    assert len(rows) >= 3
    for row in rows:
        query, inputs, outputs = row.split(" | ")
        assert query.strip().startswith("▁")
        assert len(inputs.split()) == 5 and len(outputs.split()) == 5
        assert query.strip() not in inputs.split() + outputs.split()
