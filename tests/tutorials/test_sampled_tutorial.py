"""The sampled-softmax tutorial runs end to end on a tiny setting."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "03_sampled_softmax.py"


@pytest.fixture(scope="module")
def tutorial_output(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("sampled-tutorial")
    env = dict(os.environ, SAMPLED_TUTORIAL_TINY="1", SAMPLED_TUTORIAL_RUN_DIR=str(run_dir),
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_candidate_set_holds_the_batch_and_reaches_k(tutorial_output):
    match = re.search(r"(\d+) target tokens, (\d+) distinct words\n"
                      r"K = ceil\(0\.05 \* 3000\) = (\d+); candidate set: (\d+) words",
                      tutorial_output)
    assert match, tutorial_output[-2000:]
    distinct, k, size = int(match.group(2)), int(match.group(3)), int(match.group(4))
    assert k == 150
    assert size == max(k, distinct)


def test_both_models_train_and_are_scored_on_the_full_softmax(tutorial_output):
    for name in ("full", "sampled 5%"):
        line = re.search(rf"^\[{name}\] (\d+) ms/step, training loss per epoch (\[.*\]), "
                         rf"dev loss \(full softmax\) (\d+\.\d+), BLEU (\d+\.\d+)$",
                         tutorial_output, re.M)
        assert line, name
        losses = eval(line.group(2))
        assert len(losses) == 2 and losses[1] < losses[0]
    assert re.search(r"^speed-up of the sampled model: \d+\.\d+x$", tutorial_output, re.M)
