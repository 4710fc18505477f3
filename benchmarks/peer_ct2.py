"""CTranslate2, the inference engine OpenNMT-py and OpenNMT-tf export to, as the speed
reference of issue 42 (`peer_opennmt.py --ct2`): the peer's checkpoint converted and
translated in the peer's virtual environment, each call a whole process."""

import subprocess
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


def ct2_result(medians, times, outputs, log=print):
    """The JSON fields of `--ct2` from each side's median seconds, all its seconds and
    its output pieces (+ EOS): pieces/s and `ct2_int8_ratio`, ours int8 / CTranslate2
    int8 per output piece (> 1: ours is faster), and the same for ours in float32."""
    speed = {side: outputs[side] / medians[side] for side in outputs}
    result = {"ct2_seconds": dict(medians), "ct2_seconds_each": times,
              "output_tokens": outputs, "output_tokens_per_second": speed,
              "ct2_int8_ratio": speed["ours_int8"] / speed["ct2_int8"],
              "ct2_int8_ratio_float32": speed["ours"] / speed["ct2_int8"]}
    log("[decode] output pieces/s: " + ", ".join(f"{side} {value:.0f}"
                                                 for side, value in speed.items())
        + f"; ours int8 / CTranslate2 int8 {result['ct2_int8_ratio']:.2f}")
    return result
