"""tf_outheads_zoo.compare: reading the per-step losses of plain and ReWE runs."""

import json

import pytest

from tf_outheads_zoo.compare import compare_runs, moving_average, nll_curve


def test_moving_average_uses_fewer_values_at_the_start():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert moving_average([2.0, 4.0], 1) == [2.0, 4.0]
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0], 0)


def test_nll_curve_reads_the_nll_column_of_either_layout(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "loss_curves.csv").write_text("step,epoch,loss\n1,1,6.5\n2,1,6.0\n")
    rewe = tmp_path / "rewe"
    rewe.mkdir()
    (rewe / "loss_curves.csv").write_text(
        "step,epoch,loss,logits_loss,rewe_loss,weighted_rewe_loss\n"
        "1,1,26.5,6.5,1.0,20.0\n2,1,21.0,6.0,0.75,15.0\n")
    assert nll_curve(str(plain)) == ([1, 2], [6.5, 6.0])
    assert nll_curve(str(rewe)) == ([1, 2], [6.5, 6.0])  # not the Eq. 7 total


def test_missing_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="loss_curves.csv"):
        nll_curve(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="results.json"):
        compare_runs([str(tmp_path)], str(tmp_path / "out"))
    (tmp_path / "loss_curves.csv").write_text("step,epoch,accuracy\n1,1,0.5\n")
    with pytest.raises(ValueError, match="loss"):
        nll_curve(str(tmp_path))


# -- paired significance (sacrebleu) ------------------------------------------------------
def _fake_run(path, corpus, hypotheses_by_split):
    """A run directory with what `significance_table` reads: run.json and *.hyp."""
    from tf_outheads_zoo.presets import get_preset

    path.mkdir()
    preset = get_preset("lstm-tiny", {"data.corpus": corpus})
    (path / "run.json").write_text(json.dumps({"preset": "lstm-tiny", **preset}))
    for split, lines in hypotheses_by_split.items():
        (path / f"{split}.hyp").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def verse_runs(tmp_path_factory):
    """Three 'systems' on 80 real dev and test verses: the Spanish source copied
    (weak), the KJV translation (strong: another English Bible), and the weak
    system with two verses replaced by their KJV translation (nearly the same)."""
    from tests.corpus import write_corpus_slice
    from tf_outheads import data as tfo_data

    root = tmp_path_factory.mktemp("significance")
    corpus = write_corpus_slice(root / "verses.tsv", 1, 80, 80)
    runs = {"weak": {}, "strong": {}, "near": {}}
    for split in ("dev", "test"):
        verses = tfo_data.read_tsv(corpus, source="es", target="en_web",
                                   references=("en_kjv",), split=split)
        kjv = verses.references["en_kjv"]
        runs["weak"][split] = list(verses.sources)
        runs["strong"][split] = list(kjv)
        runs["near"][split] = list(kjv[:2]) + list(verses.sources[2:])
    return {name: _fake_run(root / name, corpus, hyps) for name, hyps in runs.items()}


def test_significance_table_separates_a_real_difference_from_noise(verse_runs):
    from tf_outheads_zoo.compare import significance_table

    results = significance_table([verse_runs["weak"], verse_runs["strong"], verse_runs["near"]],
                                 ["weak", "strong", "near"], "test", samples=300)
    weak, strong, near = results
    assert weak.p_value is None  # the baseline
    assert strong.score > weak.score + 10
    assert strong.p_value < 0.01
    assert strong.mean - strong.ci > weak.mean + weak.ci  # the 95 % intervals do not meet
    assert near.p_value > 0.05  # two verses of 80 changed: not significant
    assert all("bs:300" in r.signature and "seed:12345" in r.signature for r in results)
    # Approximate randomization agrees on the clear case.
    ar = significance_table([verse_runs["weak"], verse_runs["strong"]], ["weak", "strong"],
                            "dev", test="ar", samples=200)
    assert ar[1].p_value < 0.01 and "ar:200" in ar[1].signature


def test_significance_table_refuses_missing_or_mismatched_runs(verse_runs, tmp_path):
    from tf_outheads_zoo.compare import significance_table

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="run.json"):
        significance_table([verse_runs["weak"], str(empty)], ["a", "b"], "test")
    short = _fake_run(tmp_path / "short", json.load(open(
        verse_runs["weak"] + "/run.json"))["data"]["corpus"], {"test": ["one line"]})
    with pytest.raises(ValueError, match="has 1 lines but the baseline"):
        significance_table([verse_runs["weak"], short], ["a", "b"], "test")
    with pytest.raises(FileNotFoundError, match="dev.hyp"):
        significance_table([verse_runs["weak"], short], ["a", "b"], "dev")
