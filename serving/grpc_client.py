"""Translate through TF Serving's gRPC API (port 8500).

Needs `pip install tensorflow-serving-api` (the client only; its version
follows TF Serving's: 2.21.0 requires tensorflow>=2.21, so it fits the
project's venv) and `grpcio` (installed with it).

    python serving/grpc_client.py "En el principio creó Dios los cielos y la tierra."
    python serving/grpc_client.py --beam-size 5 --num-hypotheses 3 "Y dijo Dios: Sea la luz."

Without options the request goes to `serving_default`. With options it goes
to `translate` and names only the options given: the SignatureDef records
`[-1]` ("the export's default") for the others, and TF Serving's gRPC Predict
fills them in. Under server-side batching every input must be batched along
the sources, so the options are sent as one value per source. The options, their
dtypes and this script's flags come from `rest_client.py`'s `OPTIONS` (beside it).
"""

import argparse
import importlib.util
import os
import sys

DEFAULT_TARGET = "localhost:8500"
DEFAULT_MODEL = "translator"


def _rest_client():
    """`rest_client.py` (beside this file), whose `OPTIONS` both clients read."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rest_client.py")
    spec = importlib.util.spec_from_file_location("tf_outheads_rest_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rest_client = _rest_client()


def build_request(sources, model_name=DEFAULT_MODEL, **options):
    """A `PredictRequest` for `sources` with the `translate` signature's `options`
    (`rest_client.OPTIONS`; `None`: the export's default, which gRPC leaves out and the
    server fills in from the signature's recorded `-1`).

    Raises:
        TypeError: an option the signature does not have.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    unknown = sorted(set(options) - set(rest_client.OPTIONS))
    if unknown:
        raise TypeError(f"not an option of the translate signature: {unknown}")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    given = {name: value for name, value in options.items() if value not in (None, "")}
    request.model_spec.signature_name = "translate" if given else "serving_default"
    sources = [text.encode("utf-8") if isinstance(text, str) else text for text in sources]
    request.inputs["sources"].CopyFrom(tf.make_tensor_proto(sources, dtype=tf.string))
    for name, value in given.items():
        kind = rest_client.OPTIONS[name][0]
        request.inputs[name].CopyFrom(tf.make_tensor_proto(
            [rest_client.option_value(name, value)] * len(sources),
            dtype=tf.int32 if kind == "bool" else tf.as_dtype(kind), shape=[len(sources)]))
    return request


def parse_response(response):
    """`PredictResponse` → one dict per source (`translations`, `scores`, ...)."""
    import tensorflow as tf

    outputs = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    predictions = []
    for index in range(len(outputs["translations"])):
        predictions.append({
            "translations": [text.decode("utf-8") for text in outputs["translations"][index]],
            "scores": outputs["scores"][index].tolist(),
            "beam_size": int(outputs["beam_size"][index]),
            "truncated": bool(outputs["truncated"][index]),
        })
        if "empty_source" in outputs:  # exports before it had no such output
            predictions[-1]["empty_source"] = bool(outputs["empty_source"][index])
        if "alignments" in outputs:  # nor this one
            predictions[-1]["alignments"] = [
                text.decode("utf-8") for text in outputs["alignments"][index]]
    return predictions


def translate(sources, target=DEFAULT_TARGET, model_name=DEFAULT_MODEL, timeout=60.0,
              **options):
    """Call `PredictionService.Predict` on `target`; returns `parse_response` of the answer."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        response = stub.Predict(build_request(sources, model_name, **options), timeout=timeout)
    return parse_response(response)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", help="sentences (default: one per line on stdin)")
    parser.add_argument("--target", default=DEFAULT_TARGET, help="host:port of the gRPC API")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model name in models.config")
    rest_client.add_option_flags(parser)
    args = parser.parse_args(argv)
    sources = args.sources or sys.stdin.read().splitlines()
    predictions = translate(sources, target=args.target, model_name=args.model,
                            **{name: getattr(args, name) for name in rest_client.OPTIONS})
    for prediction in predictions:
        for text, score in zip(prediction["translations"], prediction["scores"]):
            if text or score != float("-inf"):
                print(f"{score:.3f}\t{text}")


if __name__ == "__main__":
    main()
