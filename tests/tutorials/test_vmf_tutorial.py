"""The continuous-outputs (vMF) tutorial runs end to end on a tiny setting."""

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

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "04_continuous_outputs.py"
TINY_DIM = 32  # m and d_h of the tiny setting


@pytest.fixture(scope="module")
def tutorial_output(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("vmf-tutorial")
    env = dict(os.environ, VMF_TUTORIAL_TINY="1", VMF_TUTORIAL_RUN_DIR=str(run_dir),
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, run_dir


def vocabulary_size(out):
    match = re.search(r"^(\d+) target ids, dim (\d+): (\d+) pieces with a vector, (\d+) without "
                      r"\(given the <unk> vector\), 4 special$", out, re.M)
    assert match, out[:3000]
    vocab, dim, with_vector, without = (int(g) for g in match.groups())
    assert dim == TINY_DIM and with_vector + without + 4 == vocab
    return vocab


def test_target_vectors_are_trained_and_laid_out(tutorial_output):
    out, run_dir = tutorial_output
    table = section(out, "=== TARGET TABLE ===")
    vocab = vocabulary_size(table)
    assert re.search(r"^  <pad>: zeros", table, re.M)
    assert re.search(r"^  <unk>: seeded random unit vector orthogonal to the vocabulary mean", table, re.M)
    assert re.search(r"^  </s>: seeded random unit vector", table, re.M)
    counts = ast.literal_eval(re.search(r"^counts: (\{.*\})$", table, re.M).group(1))
    assert counts["vocabulary"] == vocab and counts["special"] == 4
    assert (run_dir / "target_vectors.vec").exists()

    neighbours = section(out, "=== NEAREST NEIGHBOURS").splitlines()[1:]
    rows = [line for line in neighbours if " | " in line]
    assert len(rows) >= 3
    assert rows[0].startswith("▁God ")
    for row in rows:
        query, found = row.split(" | ")
        assert len(found.split()) == 5 and query.strip() not in found.split()


def test_vmf_output_layer_is_d_h_m_plus_m(tutorial_output):
    out, _ = tutorial_output
    vocab = vocabulary_size(out)
    layers = section(out, "=== OUTPUT LAYERS ===")
    match = re.search(r"^vMF output layer: ([\d,]+) trainable = d_h·m \+ m = (\d+)·(\d+) \+ (\d+) ",
                      layers, re.M)
    assert match, layers
    trainable, d_h, m, m_again = (int(g.replace(",", "")) for g in match.groups())
    assert d_h == m == m_again == TINY_DIM
    assert trainable == d_h * m + m
    vmf = re.search(r"^\[vMF\] [\d,]+ parameters in all; output layer: ([\d,]+) trainable, "
                    r"([\d,]+) frozen", layers, re.M)
    assert int(vmf.group(1).replace(",", "")) == d_h * m + m
    assert int(vmf.group(2).replace(",", "")) == vocab * m  # the frozen target table
    softmax = re.search(r"^\[softmax\] [\d,]+ parameters in all; output layer: ([\d,]+) "
                        r"trainable, 0 frozen", layers, re.M)
    assert int(softmax.group(1).replace(",", "")) == vocab  # tied: the bias only


def test_both_models_train_and_are_scored_four_ways(tutorial_output):
    out, _ = tutorial_output
    results = section(out, "=== RESULTS ===")
    for name in ("vMF", "softmax"):
        line = re.search(rf"^\[{name}\] (\d+) ms/step, training loss per epoch (\[.*\]), "
                         rf"output layer ([\d,]+) trainable parameters$", results, re.M)
        assert line, name
        losses = ast.literal_eval(line.group(2))
        assert len(losses) == 2 and losses[1] < losses[0], (name, losses)
        for decoding in ("greedy", "beam 4"):
            assert re.search(rf"^\[{name}\] {decoding} BLEU \d+\.\d+$", results, re.M), \
                (name, decoding)
    assert re.search(r"^time per step, softmax / vMF: \d+\.\d+x", results, re.M)
