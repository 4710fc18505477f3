"""Load exported SavedModels the way a server does: TensorFlow + tensorflow-text only.

Run as a separate process by the export tests (never imported by them):

    python load_and_translate.py < request.json > response.json

`request.json`: `{"exports": {name: path}, "calls": [{"export": name,
"signature": "serving_default" | "translate", "inputs": {"sources": [base64
bytes, ...], "beam_size": [4], ...}}]}`. The response holds, per call, the
outputs as lists (strings decoded as UTF-8, which also checks they are valid)
or the error, plus what the process imported and which ops of each graph plain
TensorFlow does not know (the tensorflow-text ops, listed before importing it)
with the devices they are pinned to.
"""

import base64
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402


def meta_graph_of(path):
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as stream:
        saved_model.ParseFromString(stream.read())
    (meta_graph,) = saved_model.meta_graphs
    return meta_graph


def signature_defaults(path):
    """`SignatureDef.defaults`: what TF Serving feeds for an input a request leaves out."""
    return {key: {name: tf.make_ndarray(proto) for name, proto in signature.defaults.items()}
            for key, signature in meta_graph_of(path).signature_def.items()}


def graph_nodes(path):
    """`(function name or "", node)` for the SavedModel's graph and its function library."""
    meta_graph = meta_graph_of(path)
    nodes = [("", node) for node in meta_graph.graph_def.node]
    for function in meta_graph.graph_def.library.function:
        nodes.extend((function.signature.name, node) for node in function.node_def)
    resources = [node.resource.device for node in meta_graph.object_graph_def.nodes
                 if node.WhichOneof("kind") == "resource"]
    return nodes, resources


def unknown_ops(path):
    """Op types of the graph that TensorFlow alone has not registered, with their devices.

    A resource's `_creator` function is left out of the devices: loaders call
    it under the device its `SavedResource` records (listed separately).
    """
    nodes, resources = graph_nodes(path)
    ops = {}
    for function, node in nodes:
        if op_def_registry.get(node.op) is None:
            devices = ops.setdefault(node.op, set())
            if "_creator_" not in function:
                devices.add(node.device)
    return {op: sorted(devices) for op, devices in sorted(ops.items())}, resources


def to_json(value):
    value = value.numpy()
    if value.dtype == object:
        return [[text.decode("utf-8") for text in row] if hasattr(row, "__len__")
                else row.decode("utf-8") for row in value.tolist()]
    return value.tolist()


def main():
    request = json.load(sys.stdin)
    response = {"graph": {}, "calls": []}
    defaults = {}
    for name, path in request["exports"].items():
        ops, resources = unknown_ops(path)
        defaults[name] = signature_defaults(path)
        response["graph"][name] = {
            "unknown_ops": ops, "resource_devices": resources,
            "defaults": {key: {input_name: [item.decode() if isinstance(item, bytes) else item
                                            for item in value.tolist()]
                               for input_name, value in values.items()}
                         for key, values in defaults[name].items()}}
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    loaded = {name: tf.saved_model.load(path) for name, path in request["exports"].items()}
    for call in request["calls"]:
        # Inputs a call leaves out get the signature's recorded default, as in TF Serving.
        inputs = dict(defaults[call["export"]][call["signature"]], **call["inputs"])
        if "target_prefix" in inputs:
            inputs["target_prefix"] = tf.constant(inputs["target_prefix"], tf.string)
        for key in ("sources", "targets"):
            if key in inputs:
                inputs[key] = tf.constant([base64.b64decode(text) for text in inputs[key]],
                                          tf.string)
        dtypes = {"length_penalty": tf.float32, "sampling_topp": tf.float32,
                  "sampling_temperature": tf.float32, "seed": tf.int64, "eos_bias": tf.float32}
        for key in ("beam_size", "num_hypotheses", "replace_unk", "length_penalty",
                    "sampling_topk", "sampling_topp", "sampling_temperature", "seed",
                    "with_alignments", "eos_bias", "block_repeats"):
            if key in inputs:
                inputs[key] = tf.constant(inputs[key], dtypes.get(key, tf.int32))
        function = loaded[call["export"]].signatures[call["signature"]]
        try:
            outputs = function(**inputs)
        except tf.errors.OpError as error:
            response["calls"].append({"error": type(error).__name__, "message": error.message})
            continue
        response["calls"].append({key: to_json(value) for key, value in outputs.items()})
    response["modules"] = sorted(name for name in sys.modules
                                 if name.split(".")[0] in ("tf_outheads", "tf_outheads_zoo"))
    json.dump(response, sys.stdout)


if __name__ == "__main__":
    main()
