"""Fingerprints of the graphs a `Translator` traces: the deterministic half of a
before/after speed check (`before_after.py` runs this in each version's worktree).

A decoding pass spends 97–99 % of its time inside the traced search graph (cProfile of
the untrained `lstm-cpu`, 200 verses, 2026-11-30: 0.025 s of Python in a 0.79 s greedy
pass, 0.023–0.033 s in a 4 s beam-5 pass). Two versions whose
graphs are the same op for op, with the same attributes, run the same kernels; what
differs between their timings is then the Python around the graph and the machine, which
timing alone cannot separate from a real change of a few per cent.

    PYTHONPATH=TREE:TREE/benchmarks python benchmarks/graph_fingerprint.py --beams 1,5 [decode.py's args]

prints JSON: for each beam width, each traced function's op count and SHA-1. Node names
and the numbers TensorFlow appends to function names (`while_body_1431`) are left out,
so tracing order does not change a fingerprint; op types, attribute values (dtypes,
shapes, constants) and the bodies of loops and conditionals do.
"""

import hashlib
import json
import os
import re
import sys

NUMBERED = re.compile(r"_\d+\b")


def _node_text(node):
    attrs = sorted((key, NUMBERED.sub("", str(value))) for key, value in node.attr.items())
    return f"{node.op}:{attrs}"


def graph_fingerprint(graph_def):
    """`{"ops": int, "sha1": str}` of a `GraphDef`: its nodes in order and its library's
    functions (sorted by content), names left out."""
    top = [_node_text(node) for node in graph_def.node]
    library = sorted("\n".join(_node_text(node) for node in function.node_def)
                     for function in graph_def.library.function)
    ops = len(top) + sum(len(function.node_def) for function in graph_def.library.function)
    text = "\n".join(top) + "\n#library\n" + "\n#function\n".join(library)
    return {"ops": ops, "sha1": hashlib.sha1(text.encode("utf-8")).hexdigest()}


def traced_functions(obj, depth=4, seen=None):
    """The `tf.function`s reachable from `obj`'s attributes (not inside Keras or
    TensorFlow objects), depth-first to `depth` levels."""
    from tensorflow.python.eager.polymorphic_function.polymorphic_function import Function

    seen = set() if seen is None else seen
    if id(obj) in seen or depth < 0:
        return []
    seen.add(id(obj))
    if isinstance(obj, Function):
        return [obj]
    if isinstance(obj, dict):
        values = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        values = list(obj)
    elif hasattr(obj, "__dict__") and not type(obj).__module__.startswith(("keras", "tensorflow")):
        values = list(vars(obj).values())
    else:
        return []
    return [f for value in values for f in traced_functions(value, depth - 1, seen)]


def fingerprints(translator):
    """`{function name: [fingerprint of each concrete function]}` of what `translator`
    traced so far."""
    out = {}
    for function in traced_functions(translator):
        out.setdefault(function.__name__, []).extend(
            graph_fingerprint(concrete.graph.as_graph_def())
            for concrete in function._list_all_concrete_functions())
    return out


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # decode.py of the version on PYTHONPATH (before_after.py puts TREE/benchmarks there)
    # builds the model and the split; this script's own directory only as a fallback.
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import decode
    from tf_outheads.decoding import Translator

    args = decode.parse_args(argv)
    model, source_tokenizer, target_tokenizer, config, _, corpus = (
        decode.load_model_and_split(args))
    decode_config = getattr(config, "decode", None)
    options = {key: (getattr(decode_config, key) if decode_config is not None
                     else config["decode"][key])  # older versions: a preset dict
               for key in ("max_length_ratio", "max_length_offset", "length_penalty")}
    sentences = list(corpus.sources[:args.batch_size])
    result = {}
    for beam in args.beam_list:
        translator = Translator(model, source_tokenizer, target_tokenizer, beam_size=beam,
                                batch_size=args.batch_size, **options)
        translator.translate(sentences)
        result[str(beam)] = fingerprints(translator)
    print(json.dumps(result, sort_keys=True))
    return result


if __name__ == "__main__":
    main()
