"""The ReWE tutorial runs end to end on a tiny setting of the real Bible corpus."""

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "05_rewe.py"
TINY_SIZE, TINY_UNITS, TINY_VECTOR_DIM = 32, 16, 32


@pytest.fixture(scope="module")
def tutorial_output(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("rewe-tutorial")
    env = dict(os.environ, REWE_TUTORIAL_TINY="1", REWE_TUTORIAL_RUN_DIR=str(run_dir),
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, run_dir


def test_two_outputs_in_training_logits_at_inference(tutorial_output):
    out, _ = tutorial_output
    outputs = section(out, "=== OUTPUTS ===")
    match = re.search(r"^training step: \['hidden'\] \(1, 3, \d+\); heads \['logits', 'rewe'\] "
                      r"with shapes \[\(1, 3, (\d+)\), \(1, 3, (\d+)\)\]$", outputs, re.M)
    assert match, outputs
    vocab, m = int(match.group(1)), int(match.group(2))
    assert m == TINY_SIZE
    assert re.search(rf"^model\(x\) / predict / decoding: logits \(1, 3, {vocab}\)$", outputs, re.M)


def test_inference_parameters_unchanged_rewe_counted_apart(tutorial_output):
    out, _ = tutorial_output
    params = section(out, "=== PARAMETERS ===")
    assert re.search(r"^inference parameters equal: True$", params, re.M), params
    plain = re.search(r"^\[plain\] (.*)$", params, re.M).group(1)
    rewe = re.search(r"^\[ReWE\] (.*)$", params, re.M).group(1)
    assert rewe.startswith(plain + ", rewe ")
    count = int(rewe.rsplit("rewe ", 1)[1].replace(",", ""))
    d_h, u, m = TINY_SIZE, TINY_UNITS, TINY_SIZE
    assert count == d_h * u + u + u * m + m
    assert f"ReWE head: {count:,} = d_h·u + u + u·m + m" in params


def test_fit_logs_nll_and_rewe_loss_separately(tutorial_output):
    out, _ = tutorial_output
    training = section(out, "=== TRAINING ===")
    histories = {name: ast.literal_eval(match)
                 for name, match in re.findall(r"^\[(\w+)\] history: (\{.*\})$", training, re.M)}
    assert set(histories) == {"plain", "ReWE"}
    assert set(histories["plain"]) == {"loss", "val_loss"}
    rewe = histories["ReWE"]
    assert set(rewe) == {"loss", "logits_loss", "rewe_loss", "val_loss", "val_logits_loss",
                         "val_rewe_loss"}
    assert all(len(values) == 2 for values in rewe.values())
    assert all(0.0 < value <= 2.0 for value in rewe["rewe_loss"] + rewe["val_rewe_loss"])
    assert rewe["rewe_loss"][1] < rewe["rewe_loss"][0]
    assert histories["plain"]["loss"][1] < histories["plain"]["loss"][0]
    # NLL and 20·ReWE are of the same order: loss is about their sum, far above the NLL.
    assert rewe["loss"][0] > rewe["logits_loss"][0] + 10.0 * rewe["rewe_loss"][0]


def test_both_models_translate_and_are_compared(tutorial_output):
    out, _ = tutorial_output
    results = section(out, "=== RESULTS ===")
    for name in ("plain", "ReWE"):
        assert re.search(rf"^\[{name}\] \d+ ms/step, NLL per epoch \[.*\], dev BLEU \d+\.\d+$",
                         results, re.M), name
    assert re.search(r"^\[ReWE\] ReWE loss per epoch \[.*\], val \[.*\]$", results, re.M)
    assert re.search(r"^time per step, ReWE / plain: \d+\.\d+x$", results, re.M)


def test_pretrained_targets_and_saved_model(tutorial_output):
    out, run_dir = tutorial_output
    pretrained = section(out, "=== PRETRAINED TARGETS ===")
    match = re.search(r"^table \((\d+), (\d+)\), trainable: False; ReWE loss after \d+ steps "
                      r"(\d+\.\d+), NLL (\d+\.\d+)$", pretrained, re.M)
    assert match, pretrained
    assert int(match.group(2)) == TINY_VECTOR_DIM and 0.0 < float(match.group(3)) <= 2.0
    assert (run_dir / "target_vectors.vec").exists()
    saved = section(out, "=== SAVED MODEL ===")
    assert re.search(r"^reloaded: ReWE head ReWEHead \(input_embedding\), compiled losses "
                     r"\['logits', 'rewe'\], same logits: True$", saved, re.M), saved
