"""`prepare_target_vectors`: the run's table from `data.target_vectors`, its record."""

import json
import os

import numpy as np
import pytest

from tf_outheads.data import EOS_ID
from tf_outheads_zoo.components import prepare_target_vectors
from tf_outheads_zoo.config import RunConfig


def _data(section):
    """The `DataConfig` with these `data` keys (checked)."""
    return RunConfig().updated({"data": section}).data


def test_the_table_follows_the_options_and_is_recorded_with_its_hubness(
        bible_slice, bible_tokenizer, tmp_path):
    options = {"dim": 16, "epochs": 1, "path": None, "center": True, "remove_components": 2,
               "eos": "file"}
    logged = []
    table = prepare_target_vectors(_data({"target_vectors": options}), bible_slice,
                                   bible_tokenizer,
                                   str(tmp_path), seed=3, log=logged.append)
    vec = tmp_path / "target_vectors.vec"
    assert vec.exists() and "</s> " in vec.read_text(encoding="utf-8")  # eos: file
    assert "2 principal component(s) removed" in table.postprocessing
    assert "vector file's </s> row" in table.special["</s>"]
    record = json.loads((tmp_path / "target_table.json").read_text(encoding="utf-8"))
    assert record["options"] == {**options, "model": "fasttext"}
    assert record["counts"] == table.counts
    hubness = record["hubness"]
    assert hubness["k"] == 10 and hubness["candidates"] == table.counts["with_vector"]
    assert all(isinstance(piece, str) for piece, _ in hubness["top"])
    assert any("hubness (k = 10): skewness" in line for line in logged)
    # The trained vectors are reused; the table is made again the same way.
    modified = os.path.getmtime(vec)
    again = prepare_target_vectors(_data({"target_vectors": options}), bible_slice,
                                   bible_tokenizer,
                                   str(tmp_path), seed=3, log=logged.append)
    assert os.path.getmtime(vec) == modified
    np.testing.assert_array_equal(again.vectors, table.vectors)
    # Without options: the tables of every run before them (no </s> in training).
    plain = prepare_target_vectors(_data({"target_vectors": {"dim": 16, "epochs": 1}}),
                                   bible_slice,
                                   bible_tokenizer, str(tmp_path / "plain"), seed=3,
                                   log=logged.append)
    assert plain.postprocessing == "L2-normalised"
    assert "</s> " not in (tmp_path / "plain" / "target_vectors.vec").read_text(encoding="utf-8")
    assert "seeded random unit vector" in plain.special["</s>"]
    assert not np.allclose(plain.vectors[EOS_ID], table.vectors[EOS_ID])


def test_a_large_table_s_hubness_is_estimated_from_a_sample_of_queries(
        bible_slice, bible_tokenizer, tmp_path):
    from tf_outheads_zoo.components import table_hubness

    table = prepare_target_vectors(_data({"target_vectors": {"dim": 16, "epochs": 1}}),
                                   bible_slice,
                                   bible_tokenizer, str(tmp_path), seed=3, log=lambda *_: None)
    whole = table_hubness(table, bible_tokenizer)
    sampled = table_hubness(table, bible_tokenizer, queries=100)
    assert whole["queries"] == table.counts["with_vector"] > 100
    assert sampled["queries"] == 100 and sampled["candidates"] == whole["candidates"]
    assert sum(count for _, count in sampled["top"]) <= 100 * 10


def test_a_vmf_run_from_before_the_table_options_resumes_with_its_plain_table(tmp_path):
    # The first Kumar study's seed-1 vMF run (code 4555569): its preset.json (what run
    # directories stored before run.json) has no
    # center / remove_components / eos, and lstm-cpu-vmf now sets them (issue 41).
    from tf_outheads_zoo.schema import TARGET_VECTOR_DEFAULTS
    from tf_outheads_zoo.runs import resolve_run_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stored = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                          "stored_preset_vmf_before_table_options.json")
    (run_dir / "preset.json").write_bytes(open(stored, "rb").read())
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")  # a run, not a failed start
    name, config = resolve_run_config(None, str(run_dir), {})
    assert name == "lstm-cpu-vmf"
    assert config.data.target_vectors == {"dim": 300, "epochs": 5, "path": None}
    # What prepare_target_vectors fills in: the plain table that run trained with.
    assert {key: TARGET_VECTOR_DEFAULTS[key] for key in ("center", "remove_components", "eos")} \
        == {"center": False, "remove_components": 0, "eos": "far"}
    with pytest.raises(ValueError, match="data.target_vectors"):
        resolve_run_config("lstm-cpu-vmf", str(run_dir), {})
