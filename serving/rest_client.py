"""Translate through TF Serving's REST API (port 8501), with the standard library only.

    python serving/rest_client.py "En el principio creó Dios los cielos y la tierra."
    python serving/rest_client.py --beam-size 5 --num-hypotheses 3 --length-penalty 0.6 \\
        "Jehová es mi pastor; nada me faltará." "Y dijo Dios: Sea la luz."
    python serving/rest_client.py --url http://host:8501/v1/models/translator < sources.txt
    python serving/rest_client.py --sampling-topk 10 --seed 7 "Y dijo Dios: Sea la luz."
    python serving/rest_client.py --eos-bias -1.5 --block-repeats 1 "Y dijo Dios: Sea la luz."

Without options the request goes to the `serving_default` signature
(`{"instances": ["...", ...]}`: the export's defaults). With any option it goes
to the `translate` signature in the row format, one object per source with
every input named (TF Serving's REST API does not fill in a signature's
defaults; `-1` means "the export's default"):

    {"signature_name": "translate",
     "instances": [{"sources": "...", "beam_size": 5, "length_penalty": 0.6,
                    "num_hypotheses": 3, "replace_unk": -1, "sampling_topk": -1,
                    "sampling_topp": -1, "sampling_temperature": -1, "seed": -1,
                    "with_alignments": -1, "eos_bias": NaN, "block_repeats": -1,
                    "target_prefix": ""}, ...]}

`eos_bias` is not set with `NaN` (TF Serving's REST JSON reads it; a negative bias is
a real value, so `-1` cannot mean "not set").

(Exports made before an option have only the options of their time: TF Serving
answers a request naming the others with `JSON object keys must be equal
to: ...`, listing the inputs that export has; use the client of that version.)

The row format keeps every input batched along the sources, which is what
server-side batching (`--enable_batching`) needs. The answer holds one
prediction per source: `{"translations": [n strings], "scores": [n floats],
"beam_size": int, "truncated": bool, "empty_source": bool}`; unused n-best
columns are `""` with score `-Infinity` (which Python's `json` reads as
`-inf`). A refused request (HTTP 400, e.g. a NaN length penalty) raises
`RuntimeError` with the server's `error` message.

An export refuses a request of more than its `max_request_sources` sources
(default 256; `serving/README.md`), so more sources go in several requests
of at most `--max-sources` (default 256), one after the other.
"""

import argparse
import json
import sys
import urllib.request

DEFAULT_URL = "http://localhost:8501/v1/models/translator"
# The `translate` signature's options, name → (type, "not set" value, help): one row per
# `RequestInput` of `tf_outheads.decoding.options.DecodeOptions`, in its order
# (tests/export/test_serving_clients.py checks that they agree), then the prefix. The
# request bodies, this script's flags and `grpc_client.py`'s requests and flags are all
# made from it. A type is the input's dtype; "bool": an int32 flag (-1 not set, 0
# off, 1 on). `eos_bias` is not set with NaN (a negative bias is a real value).
OPTIONS = {
    "beam_size": ("int32", -1, "beam width (1: greedy)"),
    "length_penalty": ("float32", -1.0, "GNMT alpha"),
    "num_hypotheses": ("int32", -1, "n-best size (at most the beam width)"),
    "replace_unk": ("bool", -1, "1: the most-attended source word over each <unk>"),
    "sampling_topk": ("int32", -1, "sample from the k best (0: all)"),
    "sampling_topp": ("float32", -1.0, "sample from the nucleus p"),
    "sampling_temperature": ("float32", -1.0, "sampling temperature"),
    "seed": ("int64", -1, "sampling seed (reproducible requests)"),
    "with_alignments": ("bool", -1, "1: 'i-j' alignments of each translation's pieces"),
    "eos_bias": ("float32", float("nan"),
                 "added to EOS's score at every step (< 0: longer outputs)"),
    "block_repeats": ("bool", -1, "1: no piece right after itself"),
    "target_prefix": ("string", "", "text every translation starts with"),
}
MAX_SOURCES = 256  # an export's default `max_request_sources`


def option_value(name, value):
    """`value` of option `name` as its input takes it (`OPTIONS`); `None` (or `""` for
    the prefix): not set."""
    kind, not_set, _ = OPTIONS[name]
    if value is None or value == "":
        return not_set
    if kind == "bool":
        return int(bool(value))
    return {"float32": float, "string": str}.get(kind, int)(value)


def add_option_flags(parser):
    """One flag per option (`--beam-size` for `beam_size`), from `OPTIONS`."""
    for name, (kind, _, text) in OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        if kind == "bool":
            parser.add_argument(flag, type=int, choices=(0, 1), help=text)
        else:
            parser.add_argument(flag, type={"float32": float, "string": str}.get(kind, int),
                                help=text)


def build_request(sources, **options):
    """The JSON body (a dict) of a `:predict` request for `sources`.

    Args:
        sources: list of str.
        **options: the `translate` signature's options (`OPTIONS`), each a
            number or `None` (not set: the export's default); `replace_unk`,
            `with_alignments` and `block_repeats` bools; `target_prefix` a
            str every translation starts with (`""`: none). With `seed`, the
            source at position i of this request draws its sample with
            `row_seeds(seed, i)`.

    Returns:
        dict: `{"instances": sources}` when no option is given, else the
        `translate` signature's row format with every option named.

    Raises:
        TypeError: an option the signature does not have.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"not an option of the translate signature: {unknown}")
    if all(options.get(name) is None for name in OPTIONS):
        return {"instances": list(sources)}
    values = {name: option_value(name, options.get(name)) for name in OPTIONS}
    return {"signature_name": "translate",
            "instances": [dict(sources=source, **values) for source in sources]}


def parse_response(body):
    """`{"predictions": [...]}` → one dict per source (`translations`, `scores`, ...)."""
    if "error" in body:
        raise RuntimeError(f"TF Serving: {body['error']}")
    return body["predictions"]


def translate(sources, url=DEFAULT_URL, timeout=60.0, max_sources=MAX_SOURCES, **options):
    """POST `sources` to `url + ":predict"`, at most `max_sources` per request (an empty
    list in one); returns the predictions of every source, in order."""
    sources = list(sources)
    parts = [sources[start:start + max_sources]
             for start in range(0, len(sources), max_sources)]
    predictions = []
    for part in parts or [sources]:
        predictions += post(build_request(part, **options), url, timeout)
    return predictions


def post(body, url=DEFAULT_URL, timeout=60.0):
    """POST one `:predict` body (a dict); returns `parse_response` of the answer."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url + ":predict", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return parse_response(json.load(response))
    except urllib.error.HTTPError as error:  # TF Serving explains a 400 in its body
        raise RuntimeError(f"TF Serving: HTTP {error.code}: "
                           f"{error.read().decode('utf-8', 'replace')}") from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", help="sentences (default: one per line on stdin)")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"model URL (default {DEFAULT_URL})")
    add_option_flags(parser)
    parser.add_argument("--max-sources", type=int, default=MAX_SOURCES,
                        help=f"sources per request (default {MAX_SOURCES}, the export's limit)")
    parser.add_argument("--json", action="store_true", help="print the predictions as JSON")
    args = parser.parse_args(argv)
    sources = args.sources or sys.stdin.read().splitlines()
    predictions = translate(sources, url=args.url, max_sources=args.max_sources,
                            **{name: getattr(args, name) for name in OPTIONS})
    if args.json:
        json.dump(predictions, sys.stdout, ensure_ascii=False, indent=1)
        print()
        return
    for prediction in predictions:
        for text, score in zip(prediction["translations"], prediction["scores"]):
            if text or score != float("-inf"):
                print(f"{score:.3f}\t{text}")


if __name__ == "__main__":
    main()
