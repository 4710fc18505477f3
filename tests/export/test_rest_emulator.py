"""The REST stand-in answers each bad request with HTTP 400 and `{"error": ...}`, and a
request too large with HTTP 413 before decoding it (loopback)."""

import http.client
import json
import socket

import pytest

from tests.export.conftest import start_rest_emulator
from tf_outheads.export import MAX_REQUEST_PIECES, MAX_REQUEST_SOURCES, MAX_SOURCE_LENGTH

PATH = "/v1/models/translator:predict"
OPTIONS = {"beam_size": -1, "length_penalty": -1.0, "num_hypotheses": -1, "replace_unk": -1,
           "sampling_topk": -1, "sampling_topp": -1.0, "sampling_temperature": -1.0, "seed": -1,
           "with_alignments": -1, "eos_bias": float("nan"), "block_repeats": -1,
           "target_prefix": ""}


@pytest.fixture(scope="module")
def emulator(export_of, tmp_path_factory):
    """`(process, (host, port))` of the REST stand-in serving the tied export on 127.0.0.1."""
    port_file = tmp_path_factory.mktemp("rest_emulator") / "port"
    process, port = start_rest_emulator(export_of("tied"), port_file)
    yield process, ("127.0.0.1", port)
    process.terminate()
    try:
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.fixture(scope="module")
def address(emulator):
    return emulator[1]


def post(address, body, headers=None):
    """POST raw bytes; returns `(status, parsed JSON answer)`."""
    connection = http.client.HTTPConnection(*address, timeout=120)
    try:
        connection.request("POST", PATH, body=body,
                           headers=headers or {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def post_raw(address, request):
    """Send a hand-written HTTP request; returns `(status, parsed JSON answer)`."""
    with socket.create_connection(address, timeout=120) as stream:
        stream.sendall(request)
        stream.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := stream.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def translate_row(**fields):
    return {"sources": "Y dijo Dios: Sea la luz.", **OPTIONS, **fields}


BAD_BODIES = {
    "list": ([{"instances": ["a"]}], "Is not object"),
    "string": ("Y dijo Dios", "Is not object"),
    "number": (3, "Is not object"),
    "null": (None, "Is not object"),
    "int sources": ({"instances": [1, 2]},
                    "Type: Number is not of expected type: string (input 'sources')"),
    "int sources, columnar": ({"inputs": [1]}, "is not of expected type: string"),
    "nested sources": ({"instances": [["a", "b"]]}, "Input 'sources' must have shape [None]"),
    "string beam_size": ({"signature_name": "translate",
                          "instances": [translate_row(beam_size="4")]},
                         "Type: String is not of expected type: int32 (input 'beam_size')"),
    "bool replace_unk": ({"signature_name": "translate",
                          "instances": [translate_row(replace_unk=True)]},
                         "(input 'replace_unk')"),
    "huge beam_size": ({"signature_name": "translate",
                        "instances": [translate_row(beam_size=2 ** 40)]},
                       "Type: Number is not of expected type: int32 (input 'beam_size')"),
    "NaN length_penalty": ({"signature_name": "translate",
                            "instances": [translate_row(length_penalty=float("nan"))]},
                           "`length_penalty` must be finite"),
    "Infinity length_penalty": ({"signature_name": "translate",
                                 "inputs": {"sources": ["a", "b"], "beam_size": [4],
                                            "length_penalty": [float("inf")],
                                            "num_hypotheses": [-1], "replace_unk": [-1],
                                            "sampling_topk": [-1], "sampling_topp": [-1],
                                            "sampling_temperature": [-1], "seed": [-1],
                                            "with_alignments": [-1], "eos_bias": [-1.0],
                                            "block_repeats": [-1], "target_prefix": [""]}},
                                "Received: length_penalty="),
    "bad b64": ({"instances": [{"b64": "%%%"}]}, ""),
    "number signature_name": ({"signature_name": 7, "instances": ["a"]}, "signature_name"),
    "unknown signature": ({"signature_name": "nope", "instances": ["a"]}, "not found"),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_bad_body_gets_http_400_with_a_json_error(address, name):
    body, message = BAD_BODIES[name]
    status, answer = post(address, json.dumps(body).encode("utf-8"))
    assert status == 400, answer
    assert set(answer) == {"error"} and message in answer["error"], answer


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b""], ids=["syntax", "bytes", "empty"])
def test_a_body_that_is_not_json_gets_http_400(address, body):
    status, answer = post(address, body)
    assert status == 400 and answer["error"].startswith("JSON Parse error"), answer


@pytest.mark.parametrize("length", [None, "abc", "-5"], ids=["missing", "text", "negative"])
def test_a_missing_or_bad_content_length_gets_http_400(address, length):
    header = b"" if length is None else f"Content-Length: {length}\r\n".encode("ascii")
    request = (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode("ascii") + header
               + b"Content-Type: application/json\r\n\r\n" + b'{"instances": ["a"]}')
    status, answer = post_raw(address, request)
    assert status == 400 and "Content-Length" in answer["error"], answer


def test_the_server_still_answers_after_bad_requests(address):
    post(address, b"[1, 2]")
    status, answer = post(address, json.dumps({"instances": ["Y dijo Dios", "", "\u200b"]})
                          .encode("utf-8"))
    assert status == 200, answer
    predictions = answer["predictions"]
    assert [p["empty_source"] for p in predictions] == [False, True, True]
    assert [p["translations"] for p in predictions][1:] == [[""], [""]]
    assert predictions[1]["scores"] == [0.0]


def peak_rss_bytes(pid):
    """The process's peak resident set size so far (`VmHWM`), in bytes."""
    with open(f"/proc/{pid}/status") as stream:
        for line in stream:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_request_over_the_source_limit_gets_413_before_decoding(emulator):
    # The request: 40,000 short sentences (0.9 MB of JSON), which the
    # stand-in used to decode as one batch. Refused once parsed, before any
    # tensor is made: the peak RSS barely moves.
    process, address = emulator
    post(address, json.dumps({"instances": ["Y dijo Dios"]}).encode("utf-8"))  # warm
    before = peak_rss_bytes(process.pid)
    for body in ({"instances": ["Y dijo Dios: Sea la luz."] * 40_000},
                 {"signature_name": "translate",
                  "instances": [translate_row()] * (MAX_REQUEST_SOURCES + 1)}):
        status, answer = post(address, json.dumps(body).encode("utf-8"))
        assert status == 413, answer
        assert set(answer) == {"error"}, answer
        count = len(body["instances"])
        assert answer["error"].startswith(
            f"Request too large: it holds {count} sources; this model translates at most "
            f"{MAX_REQUEST_SOURCES} per request (max_request_sources). Split it into requests "
            f"of at most {MAX_REQUEST_SOURCES} sources."), answer
    assert peak_rss_bytes(process.pid) - before < 100 << 20


def test_a_request_over_the_piece_limit_gets_413(address):
    long_source = "Y dijo Dios: Sea la luz; y fue la luz. " * 40  # > 255 pieces
    count = MAX_REQUEST_PIECES // (MAX_SOURCE_LENGTH - 1) + 1
    status, answer = post(address, json.dumps({"instances": [long_source] * count})
                          .encode("utf-8"))
    assert status == 413, answer
    assert answer["error"].startswith("Request too large: its sources hold"), answer
    assert f"at most {MAX_REQUEST_PIECES} per request (max_request_pieces)" in answer["error"]


def test_a_body_over_the_size_limit_gets_413_unread(address):
    # Only the headers are sent: the answer comes from `Content-Length` alone.
    request = (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {1 << 30}\r\n"
               "Content-Type: application/json\r\n\r\n").encode("ascii")
    status, answer = post_raw(address, request)
    assert status == 413, answer
    assert answer["error"] == (
        f"Request too large: its body has {1 << 30} bytes; this server takes at most "
        f"{8 << 20} (--max-body-bytes). Split it into smaller requests.")
