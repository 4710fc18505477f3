"""What TF Serving's REST API does with a `:predict` body, on a `tf.saved_model.load`ed model.

Not a server to deploy: a stand-in that lets the tests and `tutorials/06_export_serving.py`
check REST bodies and clients where no `tensorflow/serving` container can run. It follows
TF Serving's `json_tensor.cc` for the cases our signatures meet:

- `{"instances": [...]}` (row format): a plain list only for a signature with one input;
  otherwise one object per row naming every input; each input becomes a tensor batched
  along the rows; answer `{"predictions": [...]}`, one object per row when there are
  several outputs;
- `{"inputs": ...}` (columnar format): a plain value for a one-input signature, else an
  object naming every input; answer `{"outputs": {...}}`;
- strings may be `{"b64": "..."}`; NaN and ±Infinity are written as
  `NaN` / `Infinity` / `-Infinity`; errors are `{"error": "..."}` (HTTP 400).

A bad request never drops the connection: a body that is not JSON or not a JSON object
(`"JSON Value: [...] Is not object"`), a value of the wrong JSON type for its input
(`"JSON Value: 1 Type: Number is not of expected type: string"`, the input named), a
missing or invalid `Content-Length`, or an error of the graph (an option it refuses) is
answered with HTTP 400 and `{"error": "..."}`; anything unexpected with HTTP 500 and the
same shape.

A request too large is answered with HTTP 413 and `{"error": "Request too
large: ..."}` (the limit, the count, how to split), before it is decoded: a
body over `--max-body-bytes` (default 8 MiB) from its `Content-Length`,
before the body is read; more sources than the export's
`max_request_sources` (read from `assets.extra/tf_outheads_export.json`,
else 256) once parsed, before any tensor is made; and more subword pieces
than its `max_request_pieces`, which the graph refuses after tokenizing.
The body cap is the stand-in's own (set one in a proxy in front of TF
Serving); TF Serving answers the graph's refusals (sources and pieces) with
HTTP 400 and the same message. A body nesting arrays and objects deeper than
64 levels is refused with HTTP 400 (`"JSON Parse error: arrays and objects
nested 100000 levels deep; this server reads at most 64"`), judged before it
is parsed, so `json.loads` never recurses deeply.

Many clients at once: a (daemon) thread per connection, at most `--max-connections`
(256); more wait in the listen backlog (1024), never reset. At most `--max-queued` (64)
`:predict` requests are read and waiting for or running the model; one more gets HTTP
503 and `{"error": "Server busy: ..."}` (`Retry-After: 1`) at once, as TF Serving answers
a full batching queue. At most `--max-concurrent-calls` (2) parse and call the model at
once (bounded memory). A client silent for `--read-timeout` seconds (5) while sending
its body gets HTTP 408 (in its headers: the connection is closed), holding one thread,
nobody else's. `GET /v1/models/<name>` answers the model's status, as TF Serving does.

Imports only TensorFlow, tensorflow-text and NumPy (which TensorFlow needs): `python
serving/rest_emulator.py --model-dir exports/translator/1 --port 8501`.
"""

import argparse
import base64
import http
import http.server
import json
import os
import re
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the SentencePiece ops)

# 8 MiB: the largest request an export with the default limits can use
# (64 sources of 255 pieces, each up to its 64 KiB `max_input_bytes`: 4 MiB,
# 5.3 MiB as base64) with room for JSON and options.
MAX_BODY_BYTES = 8 << 20
# For a SavedModel that does not record its own (the export's default).
MAX_REQUEST_SOURCES = 256
EXPORT_CONFIG = os.path.join("assets.extra", "tf_outheads_export.json")
TOO_LARGE = "Request too large:"
BUSY = "Server busy:"
# Deeper JSON is refused before parsing (a `:predict` body needs 4 levels).
MAX_JSON_DEPTH = 64
# Connections handled at once (one thread each); more wait in the listen backlog.
MAX_CONNECTIONS = 256
BACKLOG = 1024
# `:predict` requests read and waiting for or running the model; more: HTTP 503.
MAX_QUEUED = 64
# Requests parsing their JSON and calling the model at the same time.
MAX_CONCURRENT_CALLS = 2
# Seconds a client may stay silent while sending its request.
READ_TIMEOUT = 5.0


def _value(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        if not isinstance(value["b64"], str):
            raise ValueError(f"JSON Value: {_json_text(value)} 'b64' is not a string")
        return base64.b64decode(value["b64"], validate=True)
    if isinstance(value, list):
        return [_value(item) for item in value]
    return value


def _json_type(value):
    """The JSON type name TF Serving's `json_tensor.cc` reports for a value."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, (int, float)):
        return "Number"
    if isinstance(value, (str, bytes)):
        return "String"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, dict):
        return "Object"
    return "Null"


def _json_text(value, limit=200):
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _check_types(name, values, dtype):
    """Refuse a JSON value that TF Serving would not read as `dtype` (ValueError)."""
    if isinstance(values, list):
        for item in values:
            _check_types(name, item, dtype)
        return
    if dtype == tf.string:
        expected = isinstance(values, (str, bytes))
    elif dtype.is_integer:
        # As rapidjson's IsInt() for int32: a number out of the type's range
        # is refused, never wrapped around.
        expected = (isinstance(values, int) and not isinstance(values, bool)
                    and dtype.min <= values <= dtype.max)
    else:
        expected = isinstance(values, (int, float)) and not isinstance(values, bool)
    if not expected:
        raise ValueError(f"JSON Value: {_json_text(values)} Type: {_json_type(values)} is not "
                         f"of expected type: {dtype.name} (input '{name}')")


def _tensor(name, values, spec):
    _check_types(name, values, spec.dtype)
    try:
        tensor = tf.constant(values, spec.dtype)
    except (TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"Failed to read input '{name}' as {spec.dtype.name}: {error}") from None
    if not spec.shape.is_compatible_with(tensor.shape):
        raise ValueError(f"Input '{name}' must have shape {spec.shape.as_list()} (None: any "
                         f"size). Received: shape {tensor.shape.as_list()}")
    return tensor


def request_inputs(body, specs):
    """A `:predict` JSON body → `(signature_name, {input name: tensor}, row_format)`.

    Args:
        body: dict, the parsed JSON body.
        specs: dict input name → `tf.TensorSpec` of the signature.

    Raises:
        ValueError: what TF Serving answers with HTTP 400.
    """
    if ("instances" in body) == ("inputs" in body):
        raise ValueError("Missing 'inputs' or 'instances' key, or both given")
    names = sorted(specs)
    if "instances" in body:
        rows = body["instances"]
        if not isinstance(rows, list) or not rows:
            raise ValueError("No values in 'instances' array")
        if all(isinstance(row, dict) and set(row) != {"b64"} for row in rows):
            columns = {}
            for index, row in enumerate(rows):
                if set(row) != set(names):
                    raise ValueError(f"Failed to process element: {index} of 'instances' list. "
                                     f"JSON object keys must be equal to: {','.join(names)}")
                for name in names:
                    columns.setdefault(name, []).append(_value(row[name]))
        elif len(names) == 1:
            columns = {names[0]: [_value(row) for row in rows]}
        else:
            raise ValueError("instances is a plain list, but expecting list of objects as "
                             "multiple input tensors required as per tensorinfo_map")
        row_format = True
    else:
        value = body["inputs"]
        if isinstance(value, dict) and set(value) != {"b64"}:
            missing = [name for name in names if name not in value]
            if missing:
                raise ValueError(f"Missing named input: {missing[0]} in 'inputs' object.")
            columns = {name: _value(value[name]) for name in names}
        elif len(names) == 1:
            columns = {names[0]: _value(value)}
        else:
            raise ValueError("inputs is a plain value/list, but expecting an object as "
                             "multiple input tensors required as per tensorinfo_map")
        row_format = False
    tensors = {name: _tensor(name, columns[name], specs[name]) for name in names}
    return tensors, row_format


def _json_value(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    return value


def response_body(outputs, row_format):
    """Signature outputs → `{"predictions": [...]}` (row) or `{"outputs": ...}` (columnar)."""
    columns = {name: _json_value(tensor.numpy().tolist()) for name, tensor in outputs.items()}
    if not row_format:
        if len(columns) == 1:
            return {"outputs": next(iter(columns.values()))}
        return {"outputs": columns}
    sizes = {len(column) for column in columns.values()}
    if len(sizes) != 1:
        raise ValueError("outputs have inconsistent batch sizes")
    (size,) = sizes
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    return {"predictions": [{name: column[index] for name, column in sorted(columns.items())}
                            for index in range(size)]}


def _source_count(body):
    """How many sources a `:predict` body holds (rows, or the `sources` column)."""
    if isinstance(body.get("instances"), list):
        return len(body["instances"])
    value = body.get("inputs")
    if isinstance(value, dict) and set(value) != {"b64"}:
        value = value.get("sources")
    return len(value) if isinstance(value, list) else 1


def max_request_sources(model_dir):
    """The export's `max_request_sources` (its config file), else `MAX_REQUEST_SOURCES`."""
    try:
        with open(os.path.join(model_dir, EXPORT_CONFIG), encoding="utf-8") as stream:
            return int(json.load(stream)["max_request_sources"])
    except (OSError, ValueError, KeyError, TypeError):
        return MAX_REQUEST_SOURCES


def predict(loaded, body, max_sources=None):
    """Answer a `:predict` body as TF Serving would: `(HTTP status, response dict)`.

    Args:
        loaded: the `tf.saved_model.load`ed model.
        body: the parsed JSON body (any JSON value).
        max_sources: int or `None`. More sources are refused (HTTP 413)
            before any tensor is made. Defaults to `None` (no limit here).

    Returns:
        `(200, {"predictions" | "outputs": ...})`, `(400, {"error": "..."})`
        for a request TF Serving refuses, or `(413, {"error": "Request too
        large: ..."})` (see the module docstring).
    """
    if not isinstance(body, dict):
        return 400, {"error": f"JSON Value: {_json_text(body)} Is not object"}
    signature = body.get("signature_name", "serving_default")
    if not isinstance(signature, str):
        return 400, {"error": f"JSON Value: {_json_text(signature)} 'signature_name' "
                              "is not a string"}
    if signature not in loaded.signatures:
        return 400, {"error": f'Serving signature name: "{signature}" not found in signature def'}
    count = _source_count(body)
    if max_sources is not None and count > max_sources:
        return 413, {"error": f"{TOO_LARGE} it holds {count} sources; this model translates "
                              f"at most {max_sources} per request (max_request_sources). Split "
                              f"it into requests of at most {max_sources} sources."}
    function = loaded.signatures[signature]
    try:
        inputs, row_format = request_inputs(body, function.structured_input_signature[1])
        return 200, response_body(function(**inputs), row_format)
    except (ValueError, TypeError, tf.errors.OpError) as error:
        message = getattr(error, "message", str(error))
        if TOO_LARGE in message:
            # The graph's own limits (its pieces): 413 like ours (TF Serving: 400), with
            # the assertion's message alone, not the graph's trace around it.
            start = message.index(TOO_LARGE)
            end = message.find("]", start)
            return 413, {"error": message[start:end if end >= 0 else None]}
        return 400, {"error": message}


# +1 for the bytes that open an array or object, -1 for those that close one.
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1
_BRACKET_OR_QUOTE = _BRACKET_STEP != 0
_BRACKET_OR_QUOTE[ord('"')] = True


def json_depth(data):
    """How deep JSON text nests arrays and objects, judged unparsed (`json.loads` recurses
    that deep): the largest count of brackets open at once, those in strings skipped.

    Vectorized, linear in `len(data)` whatever the nesting. Exact for valid JSON, and up
    to where invalid JSON stops being valid (where `json.loads` stops).

    Args:
        data: bytes, JSON text (possibly invalid) in the UTF `json.loads` detects.
    """
    encoding = json.detect_encoding(data)
    if encoding.startswith(("utf-16", "utf-32")):
        # A byte of a UTF-16/32 code unit may look like a bracket: scan it as UTF-8.
        try:
            data = data.decode(encoding, "surrogatepass").encode("utf-8", "surrogatepass")
        except UnicodeError:
            return 0  # json.loads refuses it before parsing
    # In UTF-8 no byte of a multibyte character is ASCII; without its escaped
    # backslashes and quotes, a string is whatever lies between two quotes.
    codes = np.frombuffer(data.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)
    codes = codes[_BRACKET_OR_QUOTE[codes]]  # all that matters here, often little
    outside = np.cumsum(codes == ord('"'), dtype=np.uint8) % 2 == 0  # parity: uint8 is enough
    return int(np.cumsum(_BRACKET_STEP[codes] * outside, dtype=np.int32).max(initial=0))


def _content_length(headers):
    """The request's `Content-Length` as an int >= 0, or `ValueError`."""
    value = headers.get("Content-Length")
    if value is None:
        raise ValueError("Missing Content-Length header")
    if not value.strip().isdigit():
        raise ValueError(f"Invalid Content-Length header: {value!r}")
    return int(value)


class _Stalled(Exception):
    """The client sent `received` bytes of its body, then nothing (or closed)."""

    def __init__(self, received):
        super().__init__(received)
        self.received = received


class _Handler(http.server.BaseHTTPRequestHandler):
    """One connection (one request: HTTP/1.0), on its own thread; `self.server` a `Server`."""

    def setup(self):
        self.timeout = self.server.read_timeout  # every read and write of the socket
        super().setup()

    def do_GET(self):  # noqa: N802 (http.server's name)
        # TF Serving's model status: `GET /v1/models/<name>[/versions/<version>]`.
        match = _STATUS_PATH.fullmatch(self.path.partition("?")[0])
        if match is None:
            return self._answer(404, {"error": f"unknown path {self.path}"})
        version = self.server.version
        if match["version"] not in (None, version):
            return self._answer(404, {"error": "Servable not found for request: "
                                               f"Specific({match['name']}, {match['version']})"})
        self._answer(200, {"model_version_status": [{
            "version": version, "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""}}]})

    def do_POST(self):  # noqa: N802 (http.server's name)
        server = self.server
        try:
            length = _content_length(self.headers)
        except ValueError as error:
            # The body's end is unknown: answer, then close the connection.
            self.close_connection = True
            return self._answer(400, {"error": str(error)})
        if length > server.max_body_bytes:
            # Never read: answer, then close the connection.
            self.close_connection = True
            return self._answer(413, {"error": (
                f"{TOO_LARGE} its body has {length} bytes; this server takes at most "
                f"{server.max_body_bytes} (--max-body-bytes). Split it into smaller requests.")})
        if not server.queued.acquire(blocking=False):
            # Busy: the body is read and dropped (closing on unread bytes would reset
            # the connection before the client reads the answer).
            self.close_connection = True
            try:
                self._read_body(length, keep=False)
            except _Stalled:
                pass
            return self._answer(503, {"error": (
                f"{BUSY} {server.max_queued} requests are queued or running on the model "
                "(--max-queued). Retry later.")}, {"Retry-After": "1"})
        try:
            try:
                data = self._read_body(length)
            except _Stalled as stalled:
                self.close_connection = True
                return self._answer(408, {"error": (
                    f"Request timeout: the body stopped after {stalled.received} of the "
                    f"{length} bytes of its Content-Length (nothing more for "
                    f"{server.read_timeout:g} s, --read-timeout, or the client closed)")})
            status, answer = self._predict(data)
        finally:
            server.queued.release()
        self._answer(status, answer)

    def _read_body(self, length, keep=True):
        """The `length` bytes of the body (`keep=False`: read and dropped), or `_Stalled`."""
        parts, received = [], 0
        while received < length:
            try:
                chunk = self.rfile.read1(min(length - received, 1 << 16))
            except (TimeoutError, ConnectionError):
                chunk = b""
            if not chunk:
                raise _Stalled(received)
            received += len(chunk)
            if keep:
                parts.append(chunk)
        return b"".join(parts)

    def _predict(self, data):
        if not self.path.endswith(":predict"):
            return 404, {"error": f"unknown path {self.path}"}
        with self.server.calls:  # also bounds the scan's memory (at most ~12 bytes a byte)
            depth = json_depth(data)
            if depth > MAX_JSON_DEPTH:
                return 400, {"error": f"JSON Parse error: arrays and objects nested {depth} "
                                      f"levels deep; this server reads at most {MAX_JSON_DEPTH}"}
            try:
                body = json.loads(data)
            except (ValueError, RecursionError) as error:  # also invalid UTF-8
                return 400, {"error": f"JSON Parse error: {error}"}
            try:
                return predict(self.server.loaded, body, self.server.max_sources)
            except Exception as error:  # pylint: disable=broad-except
                # Never a dropped connection: say what went wrong.
                return 500, {"error": f"{type(error).__name__}: {error}"}

    def _answer(self, status, answer, headers=None):
        data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client left (or stopped reading): nobody to tell
            self.close_connection = True

    def send_error(self, code, message=None, explain=None):
        # http.server's own refusals (unknown method, bad request line, ...): JSON too.
        self.close_connection = True
        self._answer(code, {"error": message or explain or http.HTTPStatus(code).phrase})

    def log_message(self, *args):
        pass


_STATUS_PATH = re.compile(r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[0-9]+))?/?")


class Server(http.server.ThreadingHTTPServer):
    """The REST stand-in: a thread per connection, bounded as the module docstring says.

    Args:
        address: `(host, port)`, port 0 for any free port.
        loaded: the `tf.saved_model.load`ed model (anything with its `signatures`).
        max_sources: int or `None`, see `predict`.
        version: str, the version `GET /v1/models/<name>` reports.
        Others: see `serve`.
    """

    daemon_threads = True
    block_on_close = False  # closing never waits for a client

    def __init__(self, address, loaded, max_sources=None, version="1", *,
                 max_body_bytes=MAX_BODY_BYTES, max_connections=MAX_CONNECTIONS,
                 max_queued=MAX_QUEUED, max_concurrent_calls=MAX_CONCURRENT_CALLS,
                 read_timeout=READ_TIMEOUT, backlog=BACKLOG):
        self.loaded, self.max_sources, self.version = loaded, max_sources, version
        self.max_body_bytes, self.max_queued, self.read_timeout = (
            max_body_bytes, max_queued, read_timeout)
        self.request_queue_size = backlog  # listen()'s backlog, set in __init__
        self.connections = threading.BoundedSemaphore(max_connections)
        self.queued = threading.BoundedSemaphore(max_queued)
        self.calls = threading.BoundedSemaphore(max_concurrent_calls)
        self._active = 0
        self._idle = threading.Condition()
        self._closing = False
        super().__init__(address, _Handler)

    def process_request(self, request, client_address):
        # A free thread slot first: meanwhile newer connections wait in the backlog.
        while not self.connections.acquire(timeout=0.5):
            if self._closing:
                self.shutdown_request(request)
                return
        with self._idle:
            self._active += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done()
            self.shutdown_request(request)
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done()

    def _done(self):
        self.connections.release()
        with self._idle:
            self._active -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout=None):
        """Wait until no connection is being handled; returns whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout)

    def shutdown(self):
        self._closing = True
        super().shutdown()

    def handle_error(self, request, client_address):
        # One line, not a traceback (stderr may be a pipe nobody reads until the end).
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            print(f"rest_emulator: {type(error).__name__}: {error}", file=sys.stderr)


def serve(model_dir, port=8501, host="127.0.0.1", max_requests=None, ready=None,
          max_body_bytes=MAX_BODY_BYTES, max_sources=None, **limits):
    """Serve `POST /v1/models/<name>:predict` on `host:port` (loopback by default).

    Args:
        model_dir: a SavedModel directory.
        port: int, 0 for any free port.
        max_requests: stop after this many connections, once they are answered
            (`None`: never).
        ready: optional callable `(port)`, called once listening.
        max_body_bytes: int. A larger `Content-Length` is refused (HTTP 413)
            before the body is read. Defaults to 8 MiB.
        max_sources: int or `None`. More sources per request are refused
            (HTTP 413); `None`: the export's `max_request_sources`.
        **limits: `max_connections` (256), `max_queued` (64),
            `max_concurrent_calls` (2), `read_timeout` (5 s), `backlog` (1024):
            see the module docstring.
    """
    loaded = tf.saved_model.load(model_dir)
    if max_sources is None:
        max_sources = max_request_sources(model_dir)
    version = os.path.basename(os.path.normpath(model_dir))
    with Server((host, port), loaded, max_sources, version if version.isdigit() else "1",
                max_body_bytes=max_body_bytes, **limits) as server:
        if ready is not None:
            ready(server.server_address[1])
        if max_requests is None:
            server.serve_forever()
        else:
            for _ in range(max_requests):
                server.handle_request()
            server.wait_idle()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True, help="SavedModel directory")
    parser.add_argument("--port", type=int, default=8501, help="0: any free port")
    parser.add_argument("--port-file", help="write the port here once listening")
    parser.add_argument("--max-requests", type=int, help="exit after this many requests")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                        help="refuse (HTTP 413) a larger body, unread (default 8 MiB)")
    parser.add_argument("--max-request-sources", type=int,
                        help="refuse (HTTP 413) more sources per request (default: the "
                             "export's max_request_sources, else 256)")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                        help="connections handled at once, a thread each; more wait in the "
                             f"listen backlog ({BACKLOG}) (default {MAX_CONNECTIONS})")
    parser.add_argument("--max-queued", type=int, default=MAX_QUEUED,
                        help=":predict requests waiting for or running the model; more are "
                             f"answered HTTP 503 (default {MAX_QUEUED})")
    parser.add_argument("--max-concurrent-calls", type=int, default=MAX_CONCURRENT_CALLS,
                        help="requests parsing and running the model at the same time "
                             f"(default {MAX_CONCURRENT_CALLS})")
    parser.add_argument("--read-timeout", type=float, default=READ_TIMEOUT,
                        help="seconds a client may stay silent mid-request (body: HTTP 408; "
                             f"default {READ_TIMEOUT:g})")
    args = parser.parse_args()

    def ready(port):
        print(f"listening on 127.0.0.1:{port}", flush=True)
        if args.port_file:
            with open(args.port_file + ".tmp", "w") as stream:
                stream.write(str(port))
            os.replace(args.port_file + ".tmp", args.port_file)

    serve(args.model_dir, args.port, max_requests=args.max_requests, ready=ready,
          max_body_bytes=args.max_body_bytes, max_sources=args.max_request_sources,
          max_connections=args.max_connections, max_queued=args.max_queued,
          max_concurrent_calls=args.max_concurrent_calls, read_timeout=args.read_timeout)


if __name__ == "__main__":
    main()
