"""The back-translation tutorial (a reverse model samples synthetic sources for target-side
text; two forward models, with and without them) runs end to end on a tiny setting."""

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

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "11_back_translation.py"


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_back_translation_tutorial_samples_sources_and_trains_on_them(tmp_path):
    env = dict(os.environ, BACK_TRANSLATION_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               BACK_TRANSLATION_TUTORIAL_DIR=str(tmp_path), TF_OUTHEADS_QUIET="1")
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "real pairs: 300; English lines without their Spanish: 200" in section(
        out, "=== FILES ===")
    corpora = tmp_path / "corpora"
    # The reverse model translates English into Spanish: its run's source side is English.
    reverse = json.loads((tmp_path / "runs" / "en-es" / "results.json").read_text("utf-8"))
    assert reverse["steps"] == 4 and "bleu[dev.es]" in reverse["dev"]
    assert re.search(r"real\.en -> .*real\.es \(300 lines\)", section(out, "=== REVERSE ==="))

    back = section(out, "=== BACK-TRANSLATE ===")
    assert "the same seed gives the same sample: True" in back
    mono, synthetic = _lines(corpora / "mono.en"), _lines(corpora / "mono.bt.es")
    assert len(synthetic) == len(mono) == 200
    # Sampled, not the arg-max: greedy decoding of the same lines differs somewhere.
    from tf_outheads_zoo import cli
    greedy = tmp_path / "greedy.es"
    cli.main(["translate", "--run-dir", str(tmp_path / "runs" / "en-es"),
              "--input", str(corpora / "mono.en"), "--output", str(greedy)])
    assert _lines(greedy) != synthetic

    # The back-translated model trained on the real pairs followed by the synthetic ones.
    assert _lines(corpora / "real+bt.es") == _lines(corpora / "real.es") + synthetic
    assert _lines(corpora / "real+bt.en") == _lines(corpora / "real.en") + mono
    assert re.search(r"real\+bt\.es -> .*real\+bt\.en \(500 lines\)",
                     section(out, "=== FORWARD (back-translation) ==="))
    assert re.search(r"real\.es -> .*real\.en \(300 lines\)",
                     section(out, "=== FORWARD (baseline) ==="))
    rows = section(out, "=== RESULTS ===").splitlines()
    for name, pairs in (("baseline", 300), ("back-translation", 500)):
        row = next(line for line in rows if line.startswith(name + " "))
        numbers = json.loads((tmp_path / "runs" / f"es-en-{name}" / "results.json")
                             .read_text("utf-8"))
        assert row.split()[1:] == [str(pairs), "4", f"{numbers['dev']['bleu[dev.en]']['score']:.2f}",
                                   f"{numbers['test']['bleu[test.en]']['score']:.2f}"]
