"""What TF Serving's REST API does with a `:predict` body, on a `tf.saved_model.load`ed model.

Not a server to deploy: a stand-in that lets the tests and
`tutorials/06_export_serving.py` check REST bodies and clients where no
`tensorflow/serving` container can run. It follows TF Serving's
`json_tensor.cc` for the cases our signatures meet:

- `{"instances": [...]}` (row format): a plain list only for a signature
  with one input; otherwise one object per row naming every input; each
  input becomes a tensor batched along the rows; answer
  `{"predictions": [...]}`, one object per row when there are several
  outputs;
- `{"inputs": ...}` (columnar format): a plain value for a one-input
  signature, else an object naming every input; answer `{"outputs": {...}}`;
- strings may be `{"b64": "..."}`; NaN and ±Infinity are written as
  `NaN` / `Infinity` / `-Infinity`; errors are `{"error": "..."}` (HTTP 400).

A bad request never drops the connection: a body that is not JSON or not a
JSON object (`"JSON Value: [...] Is not object"`), a value of the wrong JSON
type for its input (`"JSON Value: 1 Type: Number is not of expected type:
string"`, the input named), a missing or invalid `Content-Length`, or an error
of the graph (an option it refuses) is answered with HTTP 400 and
`{"error": "..."}`; anything unexpected with HTTP 500 and the same shape.

A request too large is answered with HTTP 413 and `{"error": "Request too
large: ..."}` (the limit, the count, how to split), before it is decoded: a
body over `--max-body-bytes` (default 8 MiB) from its `Content-Length`,
before the body is read; more sources than the export's
`max_request_sources` (read from `assets.extra/tf_outheads_export.json`,
else 256) once parsed, before any tensor is made; and more subword pieces
than its `max_request_pieces`, which the graph refuses after tokenizing.
The body cap is the stand-in's own (set one in a proxy in front of TF
Serving); TF Serving answers the graph's refusals (sources and pieces) with
HTTP 400 and the same message.

Imports only TensorFlow and tensorflow-text:

    python serving/rest_emulator.py --model-dir exports/translator/1 --port 8501
"""

import argparse
import base64
import http.server
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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


def _content_length(headers):
    """The request's `Content-Length` as an int >= 0, or `ValueError`."""
    value = headers.get("Content-Length")
    if value is None:
        raise ValueError("Missing Content-Length header")
    if not value.strip().isdigit():
        raise ValueError(f"Invalid Content-Length header: {value!r}")
    return int(value)


def serve(model_dir, port=8501, host="127.0.0.1", max_requests=None, ready=None,
          max_body_bytes=MAX_BODY_BYTES, max_sources=None):
    """Serve `POST /v1/models/<name>:predict` on `host:port` (loopback by default).

    Args:
        model_dir: a SavedModel directory.
        port: int, 0 for any free port.
        max_requests: stop after this many requests (`None`: never).
        ready: optional callable `(port)`, called once listening.
        max_body_bytes: int. A larger `Content-Length` is refused (HTTP 413)
            before the body is read. Defaults to 8 MiB.
        max_sources: int or `None`. More sources per request are refused
            (HTTP 413); `None`: the export's `max_request_sources`.
    """
    loaded = tf.saved_model.load(model_dir)
    if max_sources is None:
        max_sources = max_request_sources(model_dir)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            try:
                length = _content_length(self.headers)
            except ValueError as error:
                # The body's end is unknown: answer, then close the connection.
                status, answer = 400, {"error": str(error)}
                self.close_connection = True
            else:
                if length > max_body_bytes:
                    # Never read: answer, then close the connection.
                    status, answer = 413, {"error": (
                        f"{TOO_LARGE} its body has {length} bytes; this server takes at most "
                        f"{max_body_bytes} (--max-body-bytes). Split it into smaller requests.")}
                    self.close_connection = True
                else:
                    status, answer = self._predict(self.rfile.read(length))
            self._answer(status, answer)

        def _predict(self, data):
            if not self.path.endswith(":predict"):
                return 404, {"error": f"unknown path {self.path}"}
            try:
                body = json.loads(data)
            except ValueError as error:  # also invalid UTF-8
                return 400, {"error": f"JSON Parse error: {error}"}
            try:
                return predict(loaded, body, max_sources)
            except Exception as error:  # pylint: disable=broad-except
                # Never a dropped connection: say what went wrong.
                return 500, {"error": f"{type(error).__name__}: {error}"}

        def _answer(self, status, answer):
            data = json.dumps(answer, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    with http.server.HTTPServer((host, port), Handler) as server:
        if ready is not None:
            ready(server.server_address[1])
        handled = 0
        while max_requests is None or handled < max_requests:
            server.handle_request()
            handled += 1


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
    args = parser.parse_args()

    def ready(port):
        print(f"listening on 127.0.0.1:{port}", flush=True)
        if args.port_file:
            with open(args.port_file + ".tmp", "w") as stream:
                stream.write(str(port))
            os.replace(args.port_file + ".tmp", args.port_file)

    serve(args.model_dir, args.port, max_requests=args.max_requests, ready=ready,
          max_body_bytes=args.max_body_bytes, max_sources=args.max_request_sources)


if __name__ == "__main__":
    main()
