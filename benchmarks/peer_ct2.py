"""CTranslate2, the inference engine OpenNMT-py and OpenNMT-tf export to, as the speed
reference of issue 42 (`peer_opennmt.py --ct2`): the peer's checkpoint converted and
translated in the peer's virtual environment, each call a whole process. Issue 57 adds
our own run exported to CTranslate2 (`tf-outheads export --format ctranslate2`, float32
and int8) and translated with `tf-outheads translate --engine ctranslate2`, also each
call a whole process, and a steady-state comparison of the two int8 models
(`ct2_steady_state`: each in a process of its own, the same piece batches after a
warm-up, the processes alternated)."""

import json
import os
import statistics
import subprocess
import sys
import time

CT2_CONVERT = """
import sys, torch, ctranslate2
checkpoint, output, quantization, fixed = sys.argv[1:5]
# OpenNMT-py 3.5.1 checkpoints under torch >= 2.6: pickled options (weights_only=False),
# and an attention name the converter does not know ("scaled-dot-flash" is scaled-dot).
load = torch.load
torch.load = lambda *args, **kwargs: load(*args, **{**kwargs, "weights_only": False})
model = torch.load(checkpoint, map_location="cpu")
if getattr(model["opt"], "self_attn_type", None) == "scaled-dot-flash":
    model["opt"].self_attn_type = "scaled-dot"
torch.save(model, fixed)
ctranslate2.converters.OpenNMTPyConverter(fixed).convert(
    output, quantization=None if quantization == "float32" else quantization, force=True)
"""

CT2_TRANSLATE = """
import sys, ctranslate2
model_dir, source, output, compute_type, batch_size, threads = sys.argv[1:7]
translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type,
                                    inter_threads=1, intra_threads=int(threads))
with open(source, encoding="utf-8") as f:
    lines = [line.split() for line in f.read().split("\\n")[:-1]]
batch_size = int(batch_size)
# Batches of similar lengths (as ours are), so that the batch's limit, OpenNMT-py's
# 1.25 x source + 5 for its longest source, is about each sentence's own.
order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
outputs = [None] * len(lines)
for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    limit = int(1.25 * max(len(lines[i]) for i in rows) + 5)
    results = translator.translate_batch([lines[i] for i in rows], beam_size=1,
                                         max_decoding_length=limit)
    for i, result in zip(rows, results):
        outputs[i] = " ".join(result.hypotheses[0])
with open(output, "w", encoding="utf-8") as f:
    f.write("".join(line + "\\n" for line in outputs))
"""


CT2_STEADY = """
import json, statistics, sys, time, ctranslate2
source, batch_size, repeats, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
models = json.loads(sys.argv[5])
with open(source, encoding="utf-8") as f:
    lines = [line.split() for line in f.read().split("\\n")[:-1]]
lines.sort(key=len)
batches = [lines[i:i + batch_size] for i in range(0, len(lines), batch_size)]
translators = {name: ctranslate2.Translator(path, device="cpu", inter_threads=1,
                                            intra_threads=threads)
               for name, path in models.items()}
def run(translator):
    start, pieces = time.perf_counter(), 0
    for batch in batches:
        limit = int(1.25 * max(len(line) for line in batch) + 5)
        for result in translator.translate_batch(batch, beam_size=1, max_decoding_length=limit):
            pieces += len(result.hypotheses[0]) + 1
    return pieces, time.perf_counter() - start
for translator in translators.values():
    run(translator)  # warm-up
seconds = {name: [] for name in translators}
pieces = {}
for repeat in range(repeats):
    names = list(translators)[::-1 if repeat % 2 else 1]
    for name in names:
        pieces[name], elapsed = run(translators[name])
        seconds[name].append(elapsed)
print(json.dumps({name: {"pieces": pieces[name], "seconds": seconds[name],
                         "pieces_per_second": pieces[name] / statistics.median(seconds[name])}
                  for name in translators}))
"""


def ct2_convert(peer_python, checkpoint, output_dir, quantization, env):
    """The peer's checkpoint as a CTranslate2 model (`quantization`: float32 or int8),
    converted in the peer's environment (`env`)."""
    subprocess.run([peer_python, "-c", CT2_CONVERT, checkpoint, output_dir, quantization,
                    output_dir + ".fixed.pt"], stdout=subprocess.DEVNULL, env=env, check=True)
    return output_dir


def ct2_translate(peer_python, model_dir, source_pieces, output, compute_type, env,
                  batch_size=64, threads=2):
    """Greedy decoding of a piece file with CTranslate2 on the CPU, as a whole process
    (the output: one line of pieces per source); returns its wall seconds."""
    start = time.perf_counter()
    subprocess.run([peer_python, "-c", CT2_TRANSLATE, model_dir, source_pieces, output,
                    compute_type, str(batch_size), str(threads)],
                   stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def ours_ct2_export(run_dir, output_dir, quantization):
    """Our run as a CTranslate2 model (`tf-outheads export --format ctranslate2`)."""
    subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", "export", "--run-dir", run_dir,
                    "--output", output_dir, "--format", "ctranslate2",
                    *([] if quantization == "float32" else ["--quantize", quantization])],
                   stdout=subprocess.DEVNULL, check=True,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return output_dir


def ours_ct2_translate(model_dir, source_text, output, batch_size=64):
    """`tf-outheads translate --engine ctranslate2`, greedy, as a whole process; returns
    its wall seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", "translate", "--engine",
                    "ctranslate2", "--model", model_dir, "--input", source_text, "--output",
                    output, "--batch-size", str(batch_size), "--beam-size", "1"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return time.perf_counter() - start


def ct2_sides(peer_python, checkpoint, ours_dir, peer_dir, text, pieces, env, our_translate):
    """The `--ct2` sides, each `() -> wall seconds`: the peer's checkpoint converted
    (`ct2_float32`, `ct2_int8`), ours in int8 through TensorFlow (`ours_int8`), and our
    run exported to CTranslate2 (`ours_ct2_float32`, `ours_ct2_int8`); and the output
    file of each."""
    sides, outputs = {}, {}
    outputs["ours_int8"] = os.path.join(ours_dir, "decode_output_int8.txt")
    sides["ours_int8"] = lambda: our_translate(ours_dir, text, outputs["ours_int8"],
                                               quantize="int8")
    for kind in ("float32", "int8"):
        model_dir = ct2_convert(peer_python, checkpoint, os.path.join(peer_dir, f"ct2-{kind}"),
                                kind, env)
        outputs[f"ct2_{kind}"] = os.path.join(peer_dir, f"decode_ct2_{kind}.sp")
        sides[f"ct2_{kind}"] = lambda kind=kind, model_dir=model_dir: ct2_translate(
            peer_python, model_dir, pieces, outputs[f"ct2_{kind}"], kind, env)
        ours = ours_ct2_export(ours_dir, os.path.join(ours_dir, f"ct2-{kind}"), kind)
        outputs[f"ours_ct2_{kind}"] = os.path.join(ours_dir, f"decode_output_ct2_{kind}.txt")
        sides[f"ours_ct2_{kind}"] = lambda kind=kind, ours=ours: ours_ct2_translate(
            ours, text, outputs[f"ours_ct2_{kind}"])
    return sides, outputs


def ct2_steady_state(peer_python, models, source_pieces, env, repeats=3, passes=2,
                     batch_size=64, threads=2, log=print):
    """Greedy pieces/s of CTranslate2 models (`{name: directory}`) without process
    start-up (ours imports TensorFlow, the peer's does not): each model in a process of
    its own, loaded once, a warm-up pass, then `passes` timed passes over the same sorted
    piece batches; `repeats` such processes per model, the models in turns (reversed
    every other round). One process per model because two CTranslate2 translators in
    one process slow each other (2026-11-30: the peer's float32 model 9,701 pieces/s
    alone, 5,072 beside its int8 model)."""
    seconds, pieces = {name: [] for name in models}, {}
    for repeat in range(repeats):
        for name in list(models)[::-1 if repeat % 2 else 1]:
            completed = subprocess.run(
                [peer_python, "-c", CT2_STEADY, source_pieces, str(batch_size), str(passes),
                 str(threads), json.dumps({name: models[name]})],
                env=env, check=True, capture_output=True, text=True)
            entry = json.loads(completed.stdout.strip().splitlines()[-1])[name]
            seconds[name] += entry["seconds"]
            pieces[name] = entry["pieces"]
    result = {name: {"pieces": pieces[name], "seconds": seconds[name],
                     "pieces_per_second": pieces[name] / statistics.median(seconds[name])}
              for name in models}
    log("[decode] steady state, output pieces/s: " + ", ".join(
        f"{name} {entry['pieces_per_second']:.0f}" for name, entry in result.items()))
    return result


def _lines(path, count):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:count]


def ct2_parity(graph_output, outputs, references, log=print):
    """Issue 57's parity on the first copy of dev: the share of lines our CTranslate2
    float32 export writes exactly as our float32 graph does, and the BLEU of the graph
    and of our float32 and int8 exports (sacrebleu, as the zoo scores)."""
    import sacrebleu

    count = len(references)
    graph = _lines(graph_output, count)
    texts = {"graph": graph, **{kind: _lines(outputs[f"ours_ct2_{kind}"], count)
                                for kind in ("float32", "int8")}}
    identical = sum(a == b for a, b in zip(graph, texts["float32"])) / count
    bleu = {name: sacrebleu.corpus_bleu(lines, [references]).score
            for name, lines in texts.items()}
    log(f"[parity] our CTranslate2 float32 export = our graph on {identical:.1%} of "
        f"{count} dev lines; BLEU " + ", ".join(f"{k} {v:.2f}" for k, v in bleu.items()))
    return {"identical_lines": identical, "lines": count, "bleu": bleu}


def ct2_result(medians, times, outputs, log=print):
    """The JSON fields of `--ct2` from each side's median seconds, all its seconds and
    its output pieces (+ EOS): pieces/s and `ct2_int8_ratio`, ours int8 / CTranslate2
    int8 per output piece (> 1: ours is faster), and the same for ours in float32."""
    speed = {side: outputs[side] / medians[side] for side in outputs}
    result = {"ct2_seconds": dict(medians), "ct2_seconds_each": times,
              "output_tokens": outputs, "output_tokens_per_second": speed,
              "ct2_int8_ratio": speed["ours_int8"] / speed["ct2_int8"],
              "ct2_int8_ratio_float32": speed["ours"] / speed["ct2_int8"]}
    if "ours_ct2_int8" in speed:  # issue 57: our export against the peer's, and our graph
        result["ours_ct2_int8_vs_peer_ct2_int8"] = speed["ours_ct2_int8"] / speed["ct2_int8"]
        result["ours_ct2_int8_vs_ours"] = speed["ours_ct2_int8"] / speed["ours"]
    log("[decode] output pieces/s: " + ", ".join(f"{side} {value:.0f}"
                                                 for side, value in speed.items())
        + f"; ours int8 / CTranslate2 int8 {result['ct2_int8_ratio']:.2f}"
        + (f"; our CTranslate2 int8 / the peer's {result['ours_ct2_int8_vs_peer_ct2_int8']:.2f},"
           f" / our float32 graph {result['ours_ct2_int8_vs_ours']:.2f}"
           if "ours_ct2_int8" in speed else ""))
    return result
