"""The export-and-serve tutorial runs end to end on a tiny trained run."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "06_export_serving.py"


def test_export_tutorial_serves_what_the_translator_says(tmp_path):
    env = dict(os.environ, EXPORT_TUTORIAL_TINY="1", TF_CPP_MIN_LOG_LEVEL="2",
               EXPORT_TUTORIAL_RUN_DIR=str(tmp_path / "run"),
               EXPORT_TUTORIAL_EXPORT_DIR=str(tmp_path / "exports"))
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout

    signatures = section(out, "=== SIGNATURES ===")
    assert re.search(r"^serving_default: inputs \{'sources': 'string\(None,\)'\}", signatures,
                     re.M)
    assert re.search(r"^translate: inputs \{.*'beam_size': 'int32\(None,\)'", signatures, re.M)
    assert "'translations': 'string(None, None)'" in signatures

    server = section(out, "=== SERVER PROCESS ===")
    assert "tf_outheads imported by the server process: False" in server
    same = section(out, "=== SAME AS TRANSLATOR ===")
    for name in ("defaults", "greedy", "beam 4"):
        assert f"same strings as Translator ({name}): True" in same
    assert "3-best lists start with the beam-4 translation: True" in same

    bad = section(out, "=== BAD INPUT ===").strip().splitlines()
    assert bad[0] == "'': '' score 0.000 truncated False empty_source True"
    assert bad[1] == "'   ': '' score 0.000 truncated False empty_source True"
    assert bad[3].endswith("truncated True empty_source False")
    assert (tmp_path / "exports" / "translator" / "1" / "saved_model.pb").exists()
