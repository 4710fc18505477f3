"""The exported SavedModel, reloaded without tf_outheads, translates as `Translator` does."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.export.conftest import BEAM, HEADS, Server
from tf_outheads.decoding import Scorer, Translator
from tf_outheads.export import MAX_REQUEST_PIECES, MAX_REQUEST_SOURCES, MAX_SOURCE_LENGTH

TEXT_OPS = {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp",
            "SentencepieceIdToStringOp"}
UNK_MARK = "\u2047"  # SentencePiece's rendering of <unk>
INVALID_UTF8 = b"Dios \xff\xfe es amor \xc3"
# Sources with no subword piece: empty, blank, zero-width, control characters,
# invalid bytes only.
NO_PIECE = ["", "   ", "\u200b", "\x01\x02\x1f", b"\xff", b"\x80\xbf", "\ufeff\t\n"]
SAMPLE_SEED = 5
PREFIXES = ["And", "", "The LORD", "", "In the", "Then he said", "", "For"]
SAMPLINGS = {  # per-request sampling options (the export's default width is 1)
    "sample": {"sampling_topk": 0, "seed": SAMPLE_SEED},
    "sample topp": {"sampling_topp": 0.9, "sampling_temperature": 1.5, "seed": 11},
    "sample topk": {"sampling_topk": 3, "seed": 2**40 + 3, "beam_size": 1},
}
# One here (each costs a Translator's trace); tests/export/test_three_hosts.py (slow)
# runs every feature on the tied, joint, ReWE and vMF heads.
SAMPLED = [("tied", "sample")]
BAD_SAMPLINGS = {  # options a sampling request cannot use → the message's start
    "topk -2": ({"sampling_topk": -2}, "`sampling_topk` must be >= 0"),
    "topp 0": ({"sampling_topp": 0.0}, "`sampling_topp` must be in (0, 1]"),
    "topp 1.5": ({"sampling_topp": 1.5}, "`sampling_topp` must be in (0, 1]"),
    "temperature 0": ({"sampling_temperature": 0.0}, "`sampling_temperature` must be finite"),
    "temperature nan": ({"sampling_temperature": float("nan")},
                        "`sampling_temperature` must be finite"),
    "sample with a beam": ({"sampling_topk": 5, "beam_size": BEAM},
                           "Sampling draws one piece at a time"),
}
# Sources of the longest length a source keeps, one more than the piece limit admits.
OVER_PIECES = MAX_REQUEST_PIECES // (MAX_SOURCE_LENGTH - 1) + 1


@pytest.fixture(scope="module")
def long_text(spanish_test_verses):
    """About 75 KB: past both `max_input_bytes` (64 KiB) and 255 pieces."""
    return " ".join(spanish_test_verses * 500)


def _head_calls(server, name, verses):
    """Greedy, beam and n-best calls of one head's export → `{(name, kind): index}`."""
    return {(name, "greedy"): server.call(name, verses),
            (name, "beam"): server.call(name, verses, beam_size=BEAM),
            (name, "nbest"): server.call(name, verses, beam_size=BEAM, num_hypotheses=3)}


# The fast suite serves the tied head (and the <unk> model); the joint and vMF exports
# answer their greedy, beam and n-best calls in the slow set (`served_heads`: loading
# their graphs and their first calls cost ~25 s of the fast suite), where
# tests/export/test_three_hosts.py also runs every other feature on them.
OTHER_HEADS = [name for name in HEADS if name != "tied"]
HEAD_PARAMS = [pytest.param(name, marks=pytest.mark.slow if name in OTHER_HEADS else ())
               for name in HEADS]


def _answers(request, name):
    """The answers of the server that holds `name`'s export (`served` or `served_heads`)."""
    return request.getfixturevalue("served" if name == "tied" else "served_heads")[0]


@pytest.fixture(scope="module")
def served_heads(export_of, spanish_test_verses):
    """The joint and vMF exports' greedy, beam and n-best answers, from one process
    without tf_outheads."""
    server = Server({name: export_of(name) for name in OTHER_HEADS})
    calls = {}
    for name in OTHER_HEADS:
        calls.update(_head_calls(server, name, spanish_test_verses))
    response = server.run()
    return {key: response["calls"][index] for key, index in calls.items()}, response


@pytest.fixture(scope="module")
def served(export_of, spanish_test_verses, english_test_verses, long_text):
    """Every call of this module's fast tests, answered by one process without
    tf_outheads."""
    server = Server({name: export_of(name) for name in ("tied", "unk")})
    calls = _head_calls(server, "tied", spanish_test_verses)
    widths = [1, BEAM] * (len(spanish_test_verses) // 2)
    calls["mixed"] = server.call("tied", spanish_test_verses, beam_size=widths,
                                 num_hypotheses=[1, 2] * (len(spanish_test_verses) // 2))
    calls["penalty"] = server.call("tied", spanish_test_verses, beam_size=BEAM, length_penalty=0.6)
    calls["defaults"] = server.call("tied", spanish_test_verses, beam_size=-1, length_penalty=-1.0,
                                    num_hypotheses=-1, replace_unk=-1)
    calls["width 3"] = server.call("tied", spanish_test_verses[:2], beam_size=3)
    calls["empty batch"] = server.call("tied", [])
    calls["empty batch options"] = server.call("tied", [], beam_size=BEAM, num_hypotheses=2)
    calls["blank"] = server.call("tied", ["", "   ", "\t\n ", spanish_test_verses[0]])
    calls["blank beam"] = server.call("tied", ["", spanish_test_verses[0]], beam_size=BEAM,
                                      num_hypotheses=2)
    # Every source of a beam-width group without a piece (used to fail the request).
    calls["no piece greedy"] = server.call("tied", NO_PIECE)
    calls["no piece beam"] = server.call("tied", NO_PIECE, beam_size=BEAM, num_hypotheses=2)
    calls["no piece options"] = server.call("tied", NO_PIECE, beam_size=[1, BEAM] * 3 + [1],
                                            num_hypotheses=-1, length_penalty=0.6)
    calls["empty at the limit"] = server.call("tied", [""] * MAX_REQUEST_SOURCES)
    over = ["Y dijo Dios: Sea la luz."] * (MAX_REQUEST_SOURCES + 1)
    calls["over sources"] = server.call("tied", over)
    calls["over sources options"] = server.call("tied", over, beam_size=BEAM)
    # About 300 pieces each: every one counts MAX_SOURCE_LENGTH - 1.
    calls["over pieces"] = server.call("tied", [" ".join(spanish_test_verses)] * OVER_PIECES)
    calls["no piece and a verse"] = server.call(
        "tied", NO_PIECE + [spanish_test_verses[0]], beam_size=[1] * len(NO_PIECE) + [BEAM])
    calls["long"] = server.call("tied", [long_text, spanish_test_verses[0]])
    calls["invalid utf-8"] = server.call("tied", [INVALID_UTF8, b"\xff", b"\x00"])
    calls["bad option length"] = server.call("tied", spanish_test_verses[:3], beam_size=[BEAM, BEAM])
    calls["unk"] = server.call("unk", spanish_test_verses[:4])
    calls["unk off"] = server.call("unk", spanish_test_verses[:4], replace_unk=0)
    for name, key in SAMPLED:
        calls[name, key] = server.call(name, spanish_test_verses, **SAMPLINGS[key])
    # Rows 1, 3, 5, 7 sample (a temperature given), the others take the arg-max.
    calls["sample some rows"] = server.call(
        "tied", spanish_test_verses, sampling_temperature=[-1.0, 1.0] * 4, seed=SAMPLE_SEED)
    calls["sample unset seed"] = server.call("tied", spanish_test_verses[:2], sampling_topk=0)
    calls["tied", "score"] = server.call("tied", spanish_test_verses,
                                         targets=english_test_verses)
    calls["tied", "prefix"] = server.call("tied", spanish_test_verses, target_prefix=PREFIXES)

    calls["aligned"] = server.call("tied", spanish_test_verses, beam_size=[1, BEAM] * 4,
                                   num_hypotheses=2, with_alignments=1)
    calls["one prefix"] = server.call("tied", spanish_test_verses[:2], target_prefix="And")
    # +5 ends at once; NaN (not set) and -5 never end early with this model.
    calls["constrained"] = server.call("tied", [spanish_test_verses[i] for i in (0, 1, 1)],
                                       eos_bias=[5.0, float("nan"), -5.0], block_repeats=1)
    calls["prefix too long"] = server.call("tied", ["Sea la luz", "Y"],
                                           target_prefix=["", " ".join(english_test_verses)])
    calls["prefix length"] = server.call("tied", spanish_test_verses[:3],
                                         target_prefix=["a", "b"])
    calls["score mismatch"] = server.call("tied", spanish_test_verses[:3],
                                          targets=english_test_verses[:2])
    calls["score empty"] = server.call("tied", [], targets=[])
    for key, (options, _) in BAD_SAMPLINGS.items():
        calls[key] = server.call("tied", spanish_test_verses[:3], **options)
    response = server.run()
    return {key: response["calls"][index] for key, index in calls.items()}, response


def translations(outputs, column=0):
    return [row[column] for row in outputs["translations"]]


def test_reloaded_without_tf_outheads(served):
    _, response = served
    assert response["modules"] == []  # neither tf_outheads nor zoo was imported


@pytest.mark.parametrize("name", HEAD_PARAMS)
def test_greedy_and_beam_equal_the_translator(request, tiny_models, tokenizer,
                                              spanish_test_verses, name):
    results = _answers(request, name)
    model = tiny_models[name]
    greedy = Translator(model, tokenizer, tokenizer).translate(spanish_test_verses)
    beam = Translator(model, tokenizer, tokenizer, beam_size=BEAM).translate(spanish_test_verses)
    assert translations(results[name, "greedy"]) == greedy
    assert translations(results[name, "beam"]) == beam
    assert len(set(greedy)) == len(greedy) and len(set(beam)) == len(beam)  # non-trivial
    assert results[name, "greedy"]["beam_size"] == [1] * len(spanish_test_verses)
    assert results[name, "beam"]["beam_size"] == [BEAM] * len(spanish_test_verses)


@pytest.mark.parametrize("name", HEAD_PARAMS)
def test_n_best_lists_extend_the_best_hypothesis(request, name):
    results = _answers(request, name)
    nbest, beam = results[name, "nbest"], results[name, "beam"]
    assert translations(nbest) == translations(beam)
    np.testing.assert_allclose(np.array(nbest["scores"])[:, 0], np.array(beam["scores"])[:, 0],
                               rtol=1e-6)
    for texts, scores in zip(nbest["translations"], nbest["scores"]):
        assert len(texts) == len(scores) == 3
        assert scores == sorted(scores, reverse=True)
        assert len(set(texts)) == 3


def test_options_per_row_group_sources_by_width(served, tiny_models, tokenizer, spanish_test_verses):
    results, _ = served
    model = tiny_models["tied"]
    greedy = Translator(model, tokenizer, tokenizer).translate(spanish_test_verses)
    beam = Translator(model, tokenizer, tokenizer, beam_size=BEAM).translate(spanish_test_verses)
    mixed = results["mixed"]
    expected = [g if i % 2 == 0 else b for i, (g, b) in enumerate(zip(greedy, beam))]
    assert translations(mixed) == expected
    assert mixed["beam_size"] == [1, BEAM] * (len(spanish_test_verses) // 2)
    for index, (texts, scores) in enumerate(zip(mixed["translations"], mixed["scores"])):
        if index % 2 == 0:  # asked for one hypothesis: the second column is padding
            assert texts[1] == "" and scores[1] == -math.inf
        else:
            assert texts[1] != "" and scores[1] <= scores[0]


def test_length_penalty_equals_the_translator(served, tiny_models, tokenizer, spanish_test_verses):
    results, _ = served
    expected = Translator(tiny_models["tied"], tokenizer, tokenizer, beam_size=BEAM,
                          length_penalty=0.6).translate(spanish_test_verses)
    assert translations(results["penalty"]) == expected


def _translator_options(options):
    return {key: value for key, value in options.items() if key != "beam_size"}


@pytest.mark.parametrize("name, key", SAMPLED)
def test_a_seeded_sample_equals_the_translator_s(served, tiny_models, tokenizer,
                                                  spanish_test_verses, name, key):
    """The same samples and scores from the SavedModel as from `Translator` (batched
    by length, not in request order) for the same seed: tied, joint, and vMF (its
    posterior over the vocabulary)."""
    results, _ = served
    translator = Translator(tiny_models[name], tokenizer, tokenizer,
                            **_translator_options(SAMPLINGS[key]), batch_size=3)
    expected = translator.translate(spanish_test_verses, with_scores=True)
    assert translations(results[name, key]) == [text for text, _ in expected]
    np.testing.assert_allclose(np.array(results[name, key]["scores"])[:, 0],
                               [score for _, score in expected], rtol=1e-4, atol=1e-4)
    assert results[name, key]["beam_size"] == [1] * len(spanish_test_verses)
    greedy = translations(results[name, "greedy"])
    assert translations(results[name, key]) != greedy  # it did sample
    # A sample's score is the model's log-probability: at most the greedy path's
    # (per step the arg-max is the best).
    assert all(score <= 0 for score in np.array(results[name, key]["scores"])[:, 0])


def test_rows_without_sampling_options_take_the_arg_max(served, tiny_models, tokenizer,
                                                         spanish_test_verses):
    results, _ = served
    sampled = Translator(tiny_models["tied"], tokenizer, tokenizer, sampling_temperature=1.0,
                         seed=SAMPLE_SEED).translate(spanish_test_verses)
    greedy = translations(results["tied", "greedy"])
    expected = [g if i % 2 == 0 else s for i, (g, s) in enumerate(zip(greedy, sampled))]
    assert translations(results["sample some rows"]) == expected
    assert len(translations(results["sample unset seed"])) == 2  # a seed drawn per request


@pytest.mark.parametrize("key", list(BAD_SAMPLINGS))
def test_bad_sampling_options_are_refused_by_name(served, key):
    results, _ = served
    assert results[key]["error"] == "InvalidArgumentError"
    assert BAD_SAMPLINGS[key][1] in results[key]["message"], results[key]["message"]


@pytest.mark.parametrize("name", ["tied"])
def test_the_score_signature_gives_the_scorer_s_numbers(served, tiny_models, tokenizer,
                                                         spanish_test_verses,
                                                         english_test_verses, name):
    """Forced decoding in the SavedModel equals `Scorer` (and, for the vMF head, its
    posterior, the log-probabilities its search adds up)."""
    results, _ = served
    expected = Scorer(tiny_models[name], tokenizer, tokenizer).score(
        spanish_test_verses, english_test_verses, per_token=True)
    outputs = results[name, "score"]
    np.testing.assert_allclose(outputs["log_prob"], [r["log_prob"] for r in expected],
                               rtol=1e-4, atol=1e-3)
    assert outputs["tokens"] == [r["tokens"] for r in expected]
    for row, result in enumerate(expected):
        tokens = result["tokens"]
        np.testing.assert_allclose(outputs["token_log_probs"][row][:tokens],
                                   result["token_log_probs"], rtol=1e-4, atol=1e-4)
        assert outputs["pieces"][row][:tokens] == result["pieces"]
        assert set(outputs["pieces"][row][tokens:]) <= {""}
        assert all(value == 0 for value in outputs["token_log_probs"][row][tokens:])
    assert outputs["truncated"] == [False] * len(expected)
    assert all(value < 0 for value in outputs["log_prob"])


def test_the_score_signature_refuses_unpaired_requests(served):
    results, _ = served
    assert results["score mismatch"]["error"] == "InvalidArgumentError"
    assert ("`targets` must hold one translation per source. Received: 3 sources and 2 "
            "targets") in results["score mismatch"]["message"]
    assert results["score empty"]["log_prob"] == []


@pytest.mark.parametrize("name, key, options", [("tied", "prefix", {})])
def test_a_target_prefix_is_continued_as_by_the_translator(served, tiny_models, tokenizer,
                                                            spanish_test_verses, name, key,
                                                            options):
    results, _ = served
    expected = Translator(tiny_models[name], tokenizer, tokenizer, batch_size=3,
                          **options).translate(spanish_test_verses, with_scores=True,
                                               target_prefix=PREFIXES)
    assert translations(results[name, key]) == [text for text, _ in expected]
    np.testing.assert_allclose(np.array(results[name, key]["scores"])[:, 0],
                               [score for _, score in expected], rtol=1e-4, atol=1e-4)
    for prefix, text in zip(PREFIXES, translations(results[name, key])):
        assert text.startswith(prefix)
    # Sources without a prefix: as in a request without any.
    plain = "greedy" if key == "prefix" else "beam"
    for index, prefix in enumerate(PREFIXES):
        if not prefix:
            assert results[name, key]["translations"][index][0] == \
                translations(results[name, plain])[index]


def test_alignments_equal_the_translator_s(served, tiny_models, tokenizer,
                                           spanish_test_verses):
    results, _ = served
    model = tiny_models["tied"]
    expected = {width: Translator(model, tokenizer, tokenizer, beam_size=width).translate(
        spanish_test_verses, num_hypotheses=min(width, 2), with_alignments=True)
        for width in (1, BEAM)}
    outputs = results["aligned"]
    for row, alignments in enumerate(outputs["alignments"]):
        width = 1 if row % 2 == 0 else BEAM
        wanted = expected[width][row] if width > 1 else [expected[width][row]]
        assert alignments[:len(wanted)] == [alignment for _, alignment in wanted]
        if width == 1:
            assert alignments[1] == ""  # n-best capped at the width: a padding column
        assert alignments[0].split() and alignments[0].split()[0].endswith("-0")
    assert set(sum(results["tied", "greedy"]["alignments"], [])) == {""}  # not asked for


def test_one_prefix_for_a_request_and_refused_prefixes(served):
    results, _ = served
    assert all(text.startswith("And") for text in translations(results["one prefix"]))
    assert results["prefix too long"]["error"] == "InvalidArgumentError"
    assert "`target_prefix` must fit in the output limit of its source" in \
        results["prefix too long"]["message"]
    assert "`target_prefix` must hold one text, or one per source" in \
        results["prefix length"]["message"]


def test_negative_options_mean_the_export_defaults(served):
    results, _ = served
    assert results["defaults"] == results["tied", "greedy"]


def test_an_unexported_width_falls_back_to_the_largest_below(served):
    results, _ = served
    assert results["width 3"]["beam_size"] == [1, 1]
    assert translations(results["width 3"]) == translations(results["tied", "greedy"])[:2]


def test_empty_batch(served):
    results, _ = served
    for key, width in (("empty batch", 1), ("empty batch options", 1)):
        outputs = results[key]
        assert "error" not in outputs, outputs
        assert outputs["translations"] == [] and outputs["scores"] == []
        assert outputs["beam_size"] == [] and outputs["truncated"] == []
        assert outputs["empty_source"] == []


def test_empty_and_whitespace_sources_give_the_empty_translation(served):
    results, _ = served
    outputs = results["blank"]
    assert translations(outputs)[:3] == ["", "", ""]
    assert [row[0] for row in outputs["scores"]][:3] == [0.0, 0.0, 0.0]
    assert translations(outputs)[3] == translations(results["tied", "greedy"])[0]
    assert outputs["empty_source"] == [True, True, True, False]
    beam = results["blank beam"]
    assert beam["translations"][0] == ["", ""] and beam["scores"][0] == [0.0, -math.inf]
    assert beam["translations"][1][0] == translations(results["tied", "beam"])[0]
    assert beam["empty_source"] == [True, False]


@pytest.mark.parametrize("key, width, n", [("no piece greedy", [1], 1),
                                           ("no piece beam", [BEAM], 2),
                                           ("no piece options", [1, BEAM], 1)])
def test_a_group_of_sources_without_a_piece_gives_empty_translations(served, key, width, n):
    results, _ = served
    outputs = results[key]
    assert "error" not in outputs, outputs
    assert outputs["translations"] == [[""] * n] * len(NO_PIECE)
    assert outputs["scores"] == [[0.0] + [-math.inf] * (n - 1)] * len(NO_PIECE)
    assert outputs["empty_source"] == [True] * len(NO_PIECE)
    assert outputs["truncated"] == [False] * len(NO_PIECE)
    assert set(outputs["beam_size"]) == set(width)


def test_many_empty_sources_and_a_verse(served):
    results, _ = served
    outputs = results["empty at the limit"]
    assert "error" not in outputs, outputs
    assert outputs["translations"] == [[""]] * MAX_REQUEST_SOURCES
    assert outputs["scores"] == [[0.0]] * MAX_REQUEST_SOURCES
    assert outputs["empty_source"] == [True] * MAX_REQUEST_SOURCES
    mixed = results["no piece and a verse"]
    assert mixed["empty_source"] == [True] * len(NO_PIECE) + [False]
    assert translations(mixed) == [""] * len(NO_PIECE) + [translations(results["tied", "beam"])[0]]


def test_long_sources_are_truncated_as_by_the_translator(served, tiny_models, tokenizer,
                                                         long_text, spanish_test_verses):
    results, _ = served
    outputs = results["long"]
    assert len(long_text.encode("utf-8")) > 1 << 16
    assert outputs["truncated"] == [True, False]
    expected = Translator(tiny_models["tied"], tokenizer, tokenizer).translate(
        [long_text, spanish_test_verses[0]])
    assert translations(outputs) == expected
    assert math.isfinite(outputs["scores"][0][0])


def test_invalid_utf8_is_replaced_not_refused(served, tiny_models, tokenizer):
    results, _ = served
    outputs = results["invalid utf-8"]
    assert "error" not in outputs, outputs
    # Each invalid byte reads as U+FFFD; the outputs are valid UTF-8 (decoded by the loader).
    replaced = INVALID_UTF8.decode("utf-8", errors="replace")
    expected = Translator(tiny_models["tied"], tokenizer, tokenizer).translate(
        [replaced, "\x00"])
    assert translations(outputs)[0] == expected[0]
    # SentencePiece drops U+FFFD: a lone invalid byte leaves no piece, so "" (score 0).
    assert translations(outputs)[1] == "" and outputs["scores"][1] == [0.0]
    assert translations(outputs)[2] == expected[1]  # NUL is valid UTF-8: <unk>
    assert outputs["empty_source"] == [False, True, False]
    assert all(math.isfinite(row[0]) for row in outputs["scores"])


def test_options_of_a_wrong_length_are_refused(served):
    results, _ = served
    assert results["bad option length"]["error"] == "InvalidArgumentError"


def test_unk_replacement_runs_in_the_graph(served, unk_model, tokenizer, spanish_test_verses):
    results, _ = served
    expected = Translator(unk_model, tokenizer, tokenizer, max_length_offset=0,
                          replace_unk=True).translate(spanish_test_verses[:4])
    assert translations(results["unk"]) == expected
    for source, text in zip(spanish_test_verses, expected):
        assert text and set(text.split()) <= set(source.split())
    assert all(set(text.split()) == {UNK_MARK} for text in translations(results["unk off"]))


@pytest.mark.parametrize("fixture", ["served", pytest.param("served_heads",
                                                             marks=pytest.mark.slow)])
def test_graph_needs_only_sentencepiece_ops_pinned_to_the_cpu(request, fixture):
    _, response = request.getfixturevalue(fixture)
    for name, graph in response["graph"].items():
        assert set(graph["unknown_ops"]) == TEXT_OPS, name
        for op, devices in graph["unknown_ops"].items():
            assert all("CPU" in device.upper() for device in devices), (name, op, devices)
        assert graph["resource_devices"] and all(
            "CPU" in device.upper() for device in graph["resource_devices"]), name


def test_saved_model_cli_lists_both_signatures(export_of):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", export_of("tied"), "--all"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "signature_def['serving_default']" in out and "signature_def['translate']" in out
    serving = out.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['sources'] tensor_info:" in serving and "dtype: DT_STRING" in serving
    assert "shape: (-1)" in serving
    for output in ("translations", "scores", "beam_size", "truncated", "empty_source"):
        assert f"outputs['{output}']" in serving
    assert "shape: (-1, -1)" in serving
    translate = out.split("signature_def['translate']")[1].split("signature_def[")[0]
    for option in ("beam_size", "length_penalty", "num_hypotheses", "replace_unk"):
        assert f"inputs['{option}'] tensor_info:" in translate


@pytest.mark.parametrize("key", ["over sources", "over sources options"])
def test_a_request_over_the_source_limit_is_refused_naming_it(served, key):
    results, _ = served
    outputs = results[key]
    assert outputs.get("error") == "InvalidArgumentError", outputs
    assert (f"Request too large: it holds {MAX_REQUEST_SOURCES + 1} sources; this export "
            f"translates at most {MAX_REQUEST_SOURCES} per request (max_request_sources). "
            f"Split it into requests of at most {MAX_REQUEST_SOURCES} sources."
            in outputs["message"]), outputs["message"]


def test_a_request_over_the_piece_limit_is_refused_naming_it(served):
    results, _ = served
    outputs = results["over pieces"]
    assert outputs.get("error") == "InvalidArgumentError", outputs
    total = OVER_PIECES * (MAX_SOURCE_LENGTH - 1)
    assert (f"Request too large: its sources hold {total} subword pieces (each source counted "
            f"up to {MAX_SOURCE_LENGTH - 1}); this export translates at most "
            f"{MAX_REQUEST_PIECES} per request (max_request_pieces)"
            in outputs["message"]), outputs["message"]


def test_export_records_its_options(export_of):
    with open(os.path.join(export_of("tied"), "assets.extra", "tf_outheads_export.json")) as f:
        config = json.load(f)
    assert config["beam_sizes"] == [1, BEAM]
    assert config["defaults"] == {"beam_size": 1, "length_penalty": 0.0, "num_hypotheses": 1,
                                  "replace_unk": False, "sampling_topk": None,
                                  "sampling_topp": None, "sampling_temperature": None,
                                  "seed": None, "with_alignments": False, "eos_bias": 0.0,
                                  "block_repeats": False}
    assert (config["max_source_length"], config["max_length_ratio"],
            config["max_length_offset"], config["quantize"]) == (256, 1.5, 10, None)
    assert config["head_cache"] == ["output_bias", "output_kernel"]
    for signature in ("serving_default", "translate"):
        assert config["signatures"][signature]["outputs"] == [
            "translations", "scores", "alignments", "beam_size", "truncated", "empty_source"]
    assert config["max_length_penalty"] == 10.0
    assert config["max_request_sources"] == MAX_REQUEST_SOURCES == 256
    assert config["max_request_pieces"] == MAX_REQUEST_PIECES == 16_384


def test_translate_options_have_recorded_defaults(served):
    """`SignatureDef.defaults`: a gRPC request may leave the options out."""
    _, response = served
    defaults = response["graph"]["tied"]["defaults"]
    # NaN: `eos_bias` not set (a negative bias is a real one).
    assert math.isnan(defaults["translate"].pop("eos_bias")[0])
    assert defaults["translate"] == {"beam_size": [-1], "length_penalty": [-1.0],
                                     "num_hypotheses": [-1], "replace_unk": [-1],
                                     "sampling_topk": [-1], "sampling_topp": [-1.0],
                                     "sampling_temperature": [-1.0], "seed": [-1],
                                     "with_alignments": [-1], "block_repeats": [-1],
                                     "target_prefix": [""]}
    assert defaults["serving_default"] == {}


def test_per_request_constraints_reach_the_saved_model_s_search(served):
    """An EOS bias and blocked repeats per request, read without tf_outheads
    (tests/export/test_export_options.py compares them with `Translator`'s)."""
    results, _ = served
    outputs = results["constrained"]
    texts = translations(outputs)
    assert texts[0] == "" and -100 < outputs["scores"][0][0] < 0  # the model's score
    assert texts[1] == texts[2] != ""  # one source, its output limit either way
    # The tied model repeats pieces: blocked, its output differs from the plain one.
    assert texts[1] != translations(results["tied", "greedy"])[1]
