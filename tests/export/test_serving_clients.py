"""`serving/rest_client.py` against the REST stand-in on loopback (no TF Serving here)."""

import math
import subprocess
import sys

import pytest

from tests.export.conftest import BEAM, SERVING, load_script, start_rest_emulator
from tf_outheads.decoding import Translator

SOURCES = ["Y dijo Dios: Sea la luz.", "Jehová es mi pastor; nada me faltará.", ""]


rest_client = load_script("rest_client")


def test_request_bodies_follow_the_signatures():
    assert rest_client.build_request(["a", "b"]) == {"instances": ["a", "b"]}
    body = rest_client.build_request(["a", "b"], beam_size=4, replace_unk=True)
    assert body["signature_name"] == "translate"
    assert body["instances"][1] == {"sources": "b", "beam_size": 4, "length_penalty": -1.0,
                                    "num_hypotheses": -1, "replace_unk": 1,
                                    "sampling_topk": -1, "sampling_topp": -1.0,
                                    "sampling_temperature": -1.0, "seed": -1,
                                    "with_alignments": -1, "block_repeats": -1,
                                    "target_prefix": "", "eos_bias": body["instances"][1]
                                    ["eos_bias"]}
    assert math.isnan(body["instances"][1]["eos_bias"])  # not set: a bias may be -1
    body = rest_client.build_request(["a"], sampling_topp=0.9, seed=3)
    assert body["instances"][0]["sampling_topp"] == 0.9 and body["instances"][0]["seed"] == 3
    body = rest_client.build_request(["a"], eos_bias=-1, block_repeats=True)
    assert body["instances"][0]["eos_bias"] == -1.0 and body["instances"][0]["block_repeats"] == 1
    with pytest.raises(TypeError, match="sampling_top_k"):
        rest_client.build_request(["a"], sampling_top_k=3)


def test_the_clients_options_are_the_signature_s(monkeypatch):
    """`rest_client.OPTIONS` (both clients' one table: they run without tf_outheads) holds
    every per-request option of `DecodeOptions`, in its order, with its dtype (a bool
    option: an int32 flag) and its "not set" value; the flags follow it."""
    import dataclasses

    from tf_outheads.decoding.options import DecodeOptions

    def comparable(value):  # NaN equal to NaN
        return "NaN" if isinstance(value, float) and math.isnan(value) else value

    defaults = {field.name: field.default for field in dataclasses.fields(DecodeOptions)}
    expected = [(name, "bool" if isinstance(defaults[name], bool) else request.dtype.name,
                 comparable(request.not_set)) for name, request in DecodeOptions.request_inputs()]
    table = [(name, kind, comparable(not_set))
             for name, (kind, not_set, _) in rest_client.OPTIONS.items()]
    assert table == expected + [("target_prefix", "string", "")]
    parsed = {}
    monkeypatch.setattr(rest_client, "translate", lambda sources, **options: parsed.update(
        options) or [])
    rest_client.main(["--eos-bias", "-2", "--block-repeats", "1", "x"])
    assert set(rest_client.OPTIONS) <= set(parsed)
    assert parsed["eos_bias"] == -2.0 and parsed["block_repeats"] == 1


def test_many_sources_go_in_requests_within_the_export_limit(monkeypatch):
    bodies = []

    def post(body, url, timeout):
        bodies.append(body)
        return [{"source": row["sources"] if isinstance(row, dict) else row}
                for row in body["instances"]]

    monkeypatch.setattr(rest_client, "post", post)
    sources = [f"verse {index}" for index in range(600)]
    predictions = rest_client.translate(sources)
    assert [len(body["instances"]) for body in bodies] == [256, 256, 88]
    assert [p["source"] for p in predictions] == sources
    bodies.clear()
    predictions = rest_client.translate(sources[:5], max_sources=2, beam_size=4)
    assert [len(body["instances"]) for body in bodies] == [2, 2, 1]
    assert all(body["signature_name"] == "translate" for body in bodies)
    assert [p["source"] for p in predictions] == sources[:5]


@pytest.fixture(scope="module")
def rest_url(export_of, tmp_path_factory):
    """The REST stand-in serving the tied export on 127.0.0.1; stopped when the module's
    tests are done, however many of them ran (the fast suite runs one of the two)."""
    port_file = tmp_path_factory.mktemp("rest") / "port"
    process, port = start_rest_emulator(export_of("tied"), port_file)
    yield f"http://127.0.0.1:{port}/v1/models/translator"
    process.terminate()
    try:
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow  # ~12 s: in the slow set, for the fast suite's 10-minute budget
def test_rest_client_translates_like_the_translator(rest_url, tiny_models, tokenizer):
    model = tiny_models["tied"]
    greedy = Translator(model, tokenizer, tokenizer).translate(SOURCES[:2])
    beam = Translator(model, tokenizer, tokenizer, beam_size=BEAM).translate(SOURCES[:2])

    predictions = rest_client.translate(SOURCES, url=rest_url, timeout=120)
    assert [p["translations"] for p in predictions] == [[greedy[0]], [greedy[1]], [""]]
    assert predictions[2]["scores"] == [0.0] and predictions[0]["truncated"] is False
    assert [p["empty_source"] for p in predictions] == [False, False, True]

    predictions = rest_client.translate(SOURCES, url=rest_url, timeout=120, beam_size=BEAM,
                                        num_hypotheses=2)
    assert [p["translations"][0] for p in predictions] == beam + [""]
    assert all(p["beam_size"] == BEAM for p in predictions)
    assert predictions[2]["scores"] == [0.0, float("-inf")]  # -Infinity in the JSON


def test_rest_client_command_line_and_errors(rest_url, tiny_models, tokenizer):
    expected = Translator(tiny_models["tied"], tokenizer, tokenizer).translate(SOURCES[:1])
    result = subprocess.run([sys.executable, str(SERVING / "rest_client.py"), "--url", rest_url,
                             SOURCES[0]], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    score, text = result.stdout.rstrip("\n").split("\t")
    assert text == expected[0] and float(score) < 0
    # TF Serving's REST API refuses an empty "instances" list (HTTP 400).
    with pytest.raises(RuntimeError, match="No values in 'instances' array"):
        rest_client.translate([], url=rest_url, timeout=120)
