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


def _value(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_value(item) for item in value]
    return value


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
    tensors = {name: tf.constant(columns[name], specs[name].dtype) for name in names}
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


def predict(loaded, body):
    """Answer a `:predict` body as TF Serving would: `(HTTP status, response dict)`."""
    signature = body.get("signature_name", "serving_default")
    if signature not in loaded.signatures:
        return 400, {"error": f'Serving signature name: "{signature}" not found in signature def'}
    function = loaded.signatures[signature]
    try:
        inputs, row_format = request_inputs(body, function.structured_input_signature[1])
        return 200, response_body(function(**inputs), row_format)
    except (ValueError, tf.errors.OpError) as error:
        return 400, {"error": getattr(error, "message", str(error))}


def serve(model_dir, port=8501, host="127.0.0.1", max_requests=None, ready=None):
    """Serve `POST /v1/models/<name>:predict` on `host:port` (loopback by default).

    Args:
        model_dir: a SavedModel directory.
        port: int, 0 for any free port.
        max_requests: stop after this many requests (`None`: never).
        ready: optional callable `(port)`, called once listening.
    """
    loaded = tf.saved_model.load(model_dir)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            if not self.path.endswith(":predict"):
                status, answer = 404, {"error": f"unknown path {self.path}"}
            else:
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    status, answer = predict(loaded, body)
                except ValueError as error:
                    status, answer = 400, {"error": f"JSON Parse error: {error}"}
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
    args = parser.parse_args()

    def ready(port):
        print(f"listening on 127.0.0.1:{port}", flush=True)
        if args.port_file:
            with open(args.port_file + ".tmp", "w") as stream:
                stream.write(str(port))
            os.replace(args.port_file + ".tmp", args.port_file)

    serve(args.model_dir, args.port, max_requests=args.max_requests, ready=ready)


if __name__ == "__main__":
    main()
