"""`tf-outheads export --format ctranslate2` and `translate --engine ctranslate2` on a tiny
trained Transformer run (issue 57): the same translations and scores as the run's own
`translate`, and one-line refusals."""

import json
import os

import pytest

from tests.corpus import write_corpus_slice
from tf_outheads_zoo import cli

pytest.importorskip("ctranslate2", reason="CTranslate2 is an optional extra: pip install "
                                          "'tf_outheads[ctranslate2]'")

SOURCES = ["Y dijo Dios: Sea la luz.", "", "Jehová es mi pastor; nada me faltará.",
           "En el principio creó Dios los cielos y la tierra."]


@pytest.fixture(scope="module")
def transformer_run(tmp_path_factory):
    """`tf-outheads train` of a 32-wide transformer-cpu for 4 steps on 300 verses."""
    corpus = write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 300, 8, 8)
    run_dir = str(tmp_path_factory.mktemp("run"))
    cli.main(["train", "--preset", "transformer-cpu", "--run-dir", run_dir, "--corpus",
              str(corpus), "--max-steps", "4", "--set", "data.vocab_size=300",
              "--set", "model.model_dim=32", "--set", "model.ffn_dim=64",
              "--set", "model.encoder_layers=1", "--set", "model.decoder_layers=2",
              "--set", "train.steps_per_epoch=4", "--set", "decode.max_length_offset=3",
              "--set", "decode.block_repeats=true"])
    return run_dir


def _translate(tmp_path, name, *flags):
    source_file = tmp_path / "sources.txt"
    source_file.write_text("".join(s + "\n" for s in SOURCES), encoding="utf-8")
    output = tmp_path / f"{name}.txt"
    cli.main(["translate", "--input", str(source_file), "--output", str(output), *flags])
    return output.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow  # CLI train + export + translate end to end
def test_a_ctranslate2_export_translates_like_the_run(transformer_run, tmp_path, capsys):
    output = str(tmp_path / "ct2")
    cli.main(["export", "--run-dir", transformer_run, "--output", output,
              "--format", "ctranslate2"])
    out = capsys.readouterr().out
    assert f"CTranslate2 model written to {output} (weights float32;" in out
    # The run decodes with block_repeats, which CTranslate2 does not take: said, left out.
    assert "left out: block_repeats=True" in out
    with open(os.path.join(output, "tf_outheads_ctranslate2.json")) as f:
        metadata = json.load(f)
    assert metadata["decode"]["max_length_offset"] == 3 and "block_repeats" not in \
        metadata["decode"]
    assert metadata["model"] == "TransformerSeq2Seq" and metadata["exact_scores"] is True

    # Short outputs: a 4-step model's distributions are flat, and over a long output a
    # near tie (float rounding of two engines) may go either way.
    short = ["--max-length-ratio", "0.3", "--max-length-offset", "3"]
    for flags in (short, short + ["--n-best", "2", "--beam-size", "3"]):
        expected = _translate(tmp_path, "tf", "--run-dir", transformer_run, "--with-scores",
                              "--no-block-repeats", *flags)
        got = _translate(tmp_path, "ct2", "--engine", "ctranslate2", "--model", output,
                         "--with-scores", *flags)
        assert [line.rsplit(" ||| ", 1)[0] for line in got] == [
            line.rsplit(" ||| ", 1)[0] for line in expected]
        assert [float(line.rsplit(" ||| ", 1)[1]) for line in got] == pytest.approx(
            [float(line.rsplit(" ||| ", 1)[1]) for line in expected], abs=1e-3)

    cli.main(["export", "--run-dir", transformer_run, "--output", output,
              "--format", "ctranslate2", "--quantize", "int8"])
    assert "weights int8" in capsys.readouterr().out
    assert len(_translate(tmp_path, "int8", "--engine", "ctranslate2", "--model", output)) == 4


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [
    (["export", "--format", "ctranslate2", "--beam-sizes", "1,2"],
     "--beam-sizes: SavedModel options"),
    (["export", "--format", "ctranslate2", "--quantize", "int4"],
     "--quantize int4: CTranslate2 takes one of int8"),
    (["export", "--quantize", "int16"], "a SavedModel takes int8 only"),
    (["translate", "--engine", "ctranslate2", "--model", "{ct2}", "--block-repeats"],
     "does not take `block_repeats`"),
    (["translate", "--engine", "ctranslate2"], "--engine ctranslate2 needs --model DIR"),
    (["translate", "--engine", "ctranslate2", "--model", "{run}"],
     "not a CTranslate2 export of tf_outheads"),
])
def test_ctranslate2_commands_refuse_in_one_line(argv, message, transformer_run, tmp_path,
                                                 capsys):
    ct2 = str(tmp_path / "ct2")
    cli.main(["export", "--run-dir", transformer_run, "--output", ct2, "--format",
              "ctranslate2"])
    capsys.readouterr()
    argv = [a.format(ct2=ct2, run=transformer_run) for a in argv]
    if argv[0] == "export":
        argv += ["--run-dir", transformer_run, "--output", str(tmp_path / "new")]
    else:
        source_file = tmp_path / "s.txt"
        source_file.write_text("Amén.\n", encoding="utf-8")
        argv += ["--input", str(source_file)]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "new").exists()
