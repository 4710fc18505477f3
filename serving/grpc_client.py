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
the sources, so the options are sent as one value per source.
"""

import argparse
import sys

DEFAULT_TARGET = "localhost:8500"
DEFAULT_MODEL = "translator"


def build_request(sources, model_name=DEFAULT_MODEL, beam_size=None, length_penalty=None,
                  num_hypotheses=None, replace_unk=None, sampling_topk=None,
                  sampling_topp=None, sampling_temperature=None, seed=None,
                  with_alignments=None, target_prefix=None, eos_bias=None, block_repeats=None):
    """A `PredictRequest` for `sources` (options `None`: the export's default; gRPC
    leaves them out and the server fills in the signature's recorded `-1`)."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    options = {"beam_size": (beam_size, tf.int32),
               "length_penalty": (length_penalty, tf.float32),
               "num_hypotheses": (num_hypotheses, tf.int32),
               "replace_unk": (None if replace_unk is None else int(bool(replace_unk)), tf.int32),
               "sampling_topk": (sampling_topk, tf.int32),
               "sampling_topp": (sampling_topp, tf.float32),
               "sampling_temperature": (sampling_temperature, tf.float32),
               "seed": (seed, tf.int64),
               "with_alignments": (None if with_alignments is None
                                   else int(bool(with_alignments)), tf.int32),
               "eos_bias": (eos_bias, tf.float32),
               "block_repeats": (None if block_repeats is None
                                 else int(bool(block_repeats)), tf.int32),
               "target_prefix": (target_prefix or None, tf.string)}
    given = {name: value for name, value in options.items() if value[0] is not None}
    request.model_spec.signature_name = "translate" if given else "serving_default"
    sources = [text.encode("utf-8") if isinstance(text, str) else text for text in sources]
    request.inputs["sources"].CopyFrom(tf.make_tensor_proto(sources, dtype=tf.string))
    for name, (value, dtype) in given.items():
        request.inputs[name].CopyFrom(
            tf.make_tensor_proto([value] * len(sources), dtype=dtype, shape=[len(sources)]))
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
    parser.add_argument("--beam-size", type=int)
    parser.add_argument("--length-penalty", type=float)
    parser.add_argument("--num-hypotheses", type=int)
    parser.add_argument("--replace-unk", type=int, choices=(0, 1))
    parser.add_argument("--sampling-topk", type=int, help="sample from the k best (0: all)")
    parser.add_argument("--sampling-topp", type=float, help="sample from the nucleus p")
    parser.add_argument("--sampling-temperature", type=float)
    parser.add_argument("--seed", type=int, help="sampling seed (reproducible requests)")
    parser.add_argument("--target-prefix", help="text every translation starts with")
    parser.add_argument("--with-alignments", type=int, choices=(0, 1))
    parser.add_argument("--eos-bias", type=float,
                        help="added to EOS's score at every step (< 0: longer outputs)")
    parser.add_argument("--block-repeats", type=int, choices=(0, 1),
                        help="1: no piece right after itself")
    args = parser.parse_args(argv)
    sources = args.sources or sys.stdin.read().splitlines()
    names = ("beam_size", "length_penalty", "num_hypotheses", "replace_unk", "sampling_topk",
             "sampling_topp", "sampling_temperature", "seed", "with_alignments",
             "target_prefix", "eos_bias", "block_repeats")
    predictions = translate(sources, target=args.target, model_name=args.model,
                            **{name: getattr(args, name) for name in names})
    for prediction in predictions:
        for text, score in zip(prediction["translations"], prediction["scores"]):
            if text or score != float("-inf"):
                print(f"{score:.3f}\t{text}")


if __name__ == "__main__":
    main()
