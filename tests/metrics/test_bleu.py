"""Tests for `tf_outheads.metrics.bleu`: checked against sacrebleu itself."""

import csv
import gzip
import pathlib

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.metrics import CHRF

from tf_outheads.metrics import Score
from tf_outheads.metrics import corpus_bleu
from tf_outheads.metrics import corpus_chrf
from tf_outheads.metrics import evaluate_translations
from tf_outheads.metrics import format_report
from tf_outheads.metrics import read_lines

BIBLE_TSV = (
    pathlib.Path(__file__).resolve().parents[2]
    / "tf_outheads_zoo"
    / "data"
    / "bible-es-en.tsv.gz"
)

HYPOTHESES = [
    "The cat sat on the mat.",
    "There is a dog in the garden today.",
    "He read the book quickly.",
]
REFERENCES = [
    "The cat is sitting on the mat.",
    "A dog is in the garden today.",
    "He read the book very quickly.",
]
SECOND_REFERENCES = [
    "The cat sat on the rug.",
    "There is a dog in the yard today.",
    "He quickly read the book.",
]


def bible_lines(count=8):
    """The first `count` dev verses: (en_web, en_kjv) lists."""
    with gzip.open(BIBLE_TSV, "rt", encoding="utf-8") as stream:
        reader = csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE)
        rows = [row for row in reader if row["split"] == "dev"][:count]
    return [row["en_web"] for row in rows], [row["en_kjv"] for row in rows]


def test_bleu_equals_sacrebleu():
    score = corpus_bleu(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert isinstance(score, Score)
    assert score.name == "BLEU"
    assert score.score == expected.score
    assert 0.0 < score.score < 100.0
    assert score.text == str(expected)


def test_bleu_signature_is_sacrebleus():
    metric = BLEU()
    metric.corpus_score(HYPOTHESES, [REFERENCES])
    score = corpus_bleu(HYPOTHESES, REFERENCES)
    assert score.signature == str(metric.get_signature())
    assert "nrefs:1" in score.signature
    assert "tok:13a" in score.signature


def test_chrf_equals_sacrebleu():
    score = corpus_chrf(HYPOTHESES, REFERENCES)
    expected = CHRF().corpus_score(HYPOTHESES, [REFERENCES])
    assert score.name == "chrF2"
    assert score.score == expected.score
    assert "nc:6" in score.signature


def test_one_stream_list_equals_list_of_one_stream():
    assert corpus_bleu(HYPOTHESES, REFERENCES) == corpus_bleu(
        HYPOTHESES, [REFERENCES]
    )


@pytest.mark.parametrize(
    "metric", [corpus_bleu, corpus_chrf], ids=["bleu", "chrf"]
)
def test_perfect_match_is_100(metric):
    assert metric(REFERENCES, REFERENCES).score == pytest.approx(100.0)


def test_mismatched_line_count_raises():
    with pytest.raises(
        ValueError,
        match=r"Reference stream 0 has 2 lines but there are 3 hypotheses",
    ):
        corpus_bleu(HYPOTHESES, REFERENCES[:2])


def test_mismatched_second_stream_is_named():
    with pytest.raises(
        ValueError,
        match=r"Reference stream 1 has 4 lines but there are 3 hypotheses",
    ):
        corpus_chrf(HYPOTHESES, [REFERENCES, SECOND_REFERENCES + ["extra"]])


def test_evaluate_names_the_mismatched_stream():
    with pytest.raises(ValueError, match=r"'en_kjv' has 2 lines .* 3 hyp"):
        evaluate_translations(
            HYPOTHESES,
            {"en_web": REFERENCES, "en_kjv": SECOND_REFERENCES[:2]},
        )


def test_multi_reference_equals_sacrebleu_and_helps():
    single = corpus_bleu(HYPOTHESES, REFERENCES)
    multi = corpus_bleu(HYPOTHESES, [REFERENCES, SECOND_REFERENCES])
    expected = sacrebleu.corpus_bleu(
        HYPOTHESES, [REFERENCES, SECOND_REFERENCES]
    )
    assert multi.score == expected.score
    assert multi.score > single.score
    assert "nrefs:2" in multi.signature


def test_bible_multi_reference():
    en_web, en_kjv = bible_lines()
    # Translations worded like the KJV: the second reference helps.
    results = evaluate_translations(
        en_kjv, {"en_web": en_web, "en_kjv": en_kjv}, primary="en_web"
    )
    assert list(results) == [
        "bleu[en_web]",
        "chrf[en_web]",
        "bleu[en_web+en_kjv]",
    ]
    single = results["bleu[en_web]"]
    multi = results["bleu[en_web+en_kjv]"]
    assert single.score == sacrebleu.corpus_bleu(en_kjv, [en_web]).score
    assert multi.score == sacrebleu.corpus_bleu(en_kjv, [en_web, en_kjv]).score
    assert multi.score >= single.score
    assert multi.score == pytest.approx(100.0)
    assert "nrefs:1" in single.signature
    assert "nrefs:2" in multi.signature
    assert results["chrf[en_web]"].score == (
        CHRF().corpus_score(en_kjv, [en_web]).score
    )


def test_evaluate_with_one_stream_has_no_multi_reference_key():
    results = evaluate_translations(HYPOTHESES, {"en_web": REFERENCES})
    assert list(results) == ["bleu[en_web]", "chrf[en_web]"]


def test_evaluate_unknown_primary_raises():
    with pytest.raises(ValueError, match="primary='en_bbe'"):
        evaluate_translations(HYPOTHESES, {"en_web": REFERENCES}, "en_bbe")


def test_format_report_lists_scores_and_signatures():
    results = evaluate_translations(
        HYPOTHESES, {"en_web": REFERENCES, "en_kjv": SECOND_REFERENCES}
    )
    report = format_report(results)
    lines = report.splitlines()
    assert len(lines) == 2 + len(results)
    for line, (key, score) in zip(lines[2:], results.items()):
        assert line.startswith(key)
        assert f"{score.score:.2f}" in line
        assert line.endswith(score.signature)


def test_references_as_single_string_raise():
    with pytest.raises(TypeError, match="not a single string"):
        corpus_bleu(HYPOTHESES, "The cat sat on the mat.")


def test_read_lines(tmp_path):
    path = tmp_path / "hyp.en"
    path.write_bytes("God saw the light.\r\nViña\n\n  spaced  \n".encode())
    assert read_lines(path) == ["God saw the light.", "Viña", "", "  spaced  "]


def test_read_lines_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "ref.en"
    path.write_bytes(b"first line\nsecond \xff line\nthird\n")
    with pytest.raises(ValueError) as info:
        read_lines(path)
    message = str(info.value)
    assert str(path) in message
    assert "line 2" in message
    assert "byte 7" in message
