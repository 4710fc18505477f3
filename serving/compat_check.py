"""Does a SavedModel exported by our TensorFlow load and translate the same in another?

Used by `serving/check_compat.sh`; three commands:

    python serving/compat_check.py export DIR        # project venv: tiny model → DIR/1
    python serving/compat_check.py translate DIR OUT # any venv with tensorflow + tensorflow_text
    python serving/compat_check.py compare A.json B.json
    python serving/compat_check.py grpc DIR          # with tensorflow-serving-api installed

`translate` imports only `tensorflow` and `tensorflow_text` (never
`tf_outheads`): it lists the graph's op types, which of them this TensorFlow
does not know before tensorflow-text is imported (the tensorflow-text ops) and
after (ops the server would refuse), loads the SavedModel and runs both
signatures on Bible verses, greedy, beam, n-best and with `<unk>` replacement.
`compare` checks that two `translate` outputs hold the same strings (and
scores to 1e-4 relative). `grpc` runs `serving/grpc_client.py` against a
loopback gRPC `PredictionService` that answers `Predict` as TF Serving does
(inputs a request leaves out get the SignatureDef's defaults) and checks its
answers against the signatures called directly.
"""

import json
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SOURCES = [
    "En el principio creó Dios los cielos y la tierra.",
    "Y dijo Dios: Sea la luz: y fué la luz.",
    "Jehová es mi pastor; nada me faltará.",
    "",
    "Bienaventurados los pobres en espíritu: porque de ellos es el reino de los cielos.",
]


def export(directory):
    """A tiny random-weight model (joint head) on a small Bible tokenizer, exported."""
    import keras

    from tf_outheads import data
    from tf_outheads.export import export_translator
    from tf_outheads_zoo import LSTMSeq2Seq
    from tf_outheads_zoo.presets import EMBEDDED_CORPUS

    corpus = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(2000))
    tokenizer, _ = data.build_tokenizers(corpus.sources, corpus.targets,
                                         os.path.join(directory, "tokenizer"), vocab_size=800)
    keras.utils.set_random_seed(11)
    model = LSTMSeq2Seq(tokenizer.vocab_size, tokenizer.vocab_size, embedding_dim=32,
                        hidden_dim=32, num_layers=1, dropout=0.0, uniform_init=0.5,
                        head={"class_name": "joint", "config": {"joint_dim": 32}})
    bias = model.head.bias.numpy()
    bias[data.UNK_ID] += 6.0  # some <unk> outputs, so that replacement has work to do
    model.head.bias.assign(bias)
    path = export_translator(model, tokenizer, tokenizer, os.path.join(directory, "1"),
                             beam_sizes=(1, 4), replace_unk=True)
    print(f"exported {path}")


def _saved_model(path):
    """The `SavedModel` proto of the export at `path`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as stream:
        saved_model.ParseFromString(stream.read())
    return saved_model


def graph_op_types(path):
    graph = _saved_model(path).meta_graphs[0].graph_def
    types = {node.op for node in graph.node}
    for function in graph.library.function:
        types.update(node.op for node in function.node_def)
    return sorted(types)


def signature_inputs(path, name, sources, **given):
    """Every input of the signature `name` as a tensor: `sources`, the values `given`,
    and for the others the SignatureDef's recorded defaults (what TF Serving feeds for
    an input a request leaves out): whatever options the export has."""
    import tensorflow as tf

    defaults = _saved_model(path).meta_graphs[0].signature_def[name].defaults
    inputs = {key: tf.constant(tf.make_ndarray(proto)) for key, proto in defaults.items()}
    inputs.update({key: tf.constant([value], inputs[key].dtype) for key, value in given.items()})
    return dict(inputs, sources=tf.constant(sources))


def translate(directory, output):
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    path = os.path.join(directory, "1")
    types = graph_op_types(path)
    not_core = [op for op in types if op_def_registry.get(op) is None]
    import tensorflow_text

    unknown = [op for op in types if op_def_registry.get(op) is None]
    loaded = tf.saved_model.load(path)
    sources = tf.constant(SOURCES)
    runs = {"serving_default": loaded.signatures["serving_default"](sources=sources)}
    for name, beam, n, replace in (("greedy", 1, 1, 0), ("beam4", 4, 1, 0),
                                   ("beam4_nbest3", 4, 3, 0), ("beam4_unk", 4, 1, 1)):
        runs[name] = loaded.signatures["translate"](**signature_inputs(
            path, "translate", SOURCES, beam_size=beam, length_penalty=0.6, num_hypotheses=n,
            replace_unk=replace))
    result = {
        "tensorflow": tf.__version__,
        "tensorflow_text": tensorflow_text.__version__,
        "op_types": types,
        "ops_not_in_tensorflow": not_core,
        "ops_unknown_with_tensorflow_text": unknown,
        "loaded_modules": sorted(name for name in sys.modules
                                 if name.split(".")[0] in ("tf_outheads", "tf_outheads_zoo")),
        "runs": {name: {"translations": [[text.decode("utf-8") for text in row]
                                         for row in outputs["translations"].numpy()],
                        "scores": outputs["scores"].numpy().tolist()}
                 for name, outputs in runs.items()},
    }
    with open(output, "w", encoding="utf-8") as stream:
        json.dump(result, stream, indent=1)
    print(f"TensorFlow {result['tensorflow']}, tensorflow-text {result['tensorflow_text']}: "
          f"{len(types)} op types; not in TensorFlow: {', '.join(not_core)}; "
          f"unknown after importing tensorflow_text: {unknown or 'none'}")


def compare(first, second):
    with open(first, encoding="utf-8") as stream:
        a = json.load(stream)
    with open(second, encoding="utf-8") as stream:
        b = json.load(stream)
    problems = []
    for result in (a, b):
        if result["ops_unknown_with_tensorflow_text"]:
            problems.append(f"TF {result['tensorflow']}: unknown ops "
                            f"{result['ops_unknown_with_tensorflow_text']}")
        if result["loaded_modules"]:
            problems.append(f"TF {result['tensorflow']}: imported {result['loaded_modules']}")
    for name, run in a["runs"].items():
        other = b["runs"][name]
        if run["translations"] != other["translations"]:
            problems.append(f"{name}: translations differ")
        for row, other_row in zip(run["scores"], other["scores"]):
            for x, y in zip(row, other_row):
                if not (x == y or math.isclose(x, y, rel_tol=1e-4)):
                    problems.append(f"{name}: scores differ ({x} vs {y})")
    runs = len(a["runs"])
    print(f"TF {a['tensorflow']} vs TF {b['tensorflow']}: {runs} runs of {len(SOURCES)} sources")
    print(f"op types of the graph ({len(a['op_types'])}): {' '.join(a['op_types'])}")
    print(f"tensorflow-text ops the graph needs: {', '.join(a['ops_not_in_tensorflow'])}")
    replaced = sum(x != y for x, y in zip(a["runs"]["beam4"]["translations"],
                                          a["runs"]["beam4_unk"]["translations"]))
    print(f"<unk> replacement changed {replaced} of {len(SOURCES)} beam-4 translations")
    for problem in problems:
        print(f"DIFFERENT: {problem}")
    if problems:
        sys.exit(1)
    print("IDENTICAL: same translations, scores within 1e-4, no unknown op")


def grpc_check(directory):
    """`grpc_client.py` against a loopback PredictionService backed by the SavedModel."""
    from concurrent import futures

    import grpc
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import grpc_client

    path = os.path.join(directory, "1")
    signature_defs = _saved_model(path).meta_graphs[0].signature_def
    loaded = tf.saved_model.load(path)

    class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):  # noqa: N802 (gRPC's name)
            name = request.model_spec.signature_name or "serving_default"
            inputs = dict(signature_defs[name].defaults)  # as TF Serving's GetInputValues
            inputs.update(request.inputs)
            outputs = loaded.signatures[name](
                **{key: tf.constant(tf.make_ndarray(proto)) for key, proto in inputs.items()})
            response = predict_pb2.PredictResponse()
            for key, value in outputs.items():
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value.numpy()))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        problems = []
        for options in ({}, {"beam_size": 4, "num_hypotheses": 2}, {"replace_unk": True}):
            got = grpc_client.translate(SOURCES, target=f"127.0.0.1:{port}", timeout=120,
                                        **options)
            direct = loaded.signatures["translate"](**signature_inputs(
                path, "translate", SOURCES, **{key: int(value) for key, value in options.items()}))
            expected = [[text.decode("utf-8") for text in row]
                        for row in direct["translations"].numpy()]
            if [prediction["translations"] for prediction in got] != expected:
                problems.append(f"gRPC {options or 'serving_default'}: translations differ")
            print(f"gRPC Predict {options or '(serving_default)'}: "
                  f"{got[0]['translations']!r} (beam {got[0]['beam_size']})")
    finally:
        server.stop(None)
    for problem in problems:
        print(f"DIFFERENT: {problem}")
    if problems:
        sys.exit(1)
    print("gRPC client OK: options left out got the SignatureDef's defaults")


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"export": export, "translate": translate, "compare": compare,
     "grpc": grpc_check}[command](*arguments)
