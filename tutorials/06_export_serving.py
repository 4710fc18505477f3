# %% [markdown]
# # Export a trained translator and serve it the way TF Serving does
#
# A trained run directory (`tf-outheads train`) holds a Keras model and its
# SentencePiece tokenizers. `tf_outheads.export.export_translator` turns them
# into one SavedModel whose signatures take raw source strings and return
# translations and scores: tokenization, the search (greedy or beam), the output
# layer's cached weight-only tensors, detokenization and `<unk>` replacement all
# run inside the graph. This tutorial exports a run, reloads the SavedModel in a
# separate process that never imports `tf_outheads` (only TensorFlow and
# tensorflow-text, as a model server), sends it the JSON bodies of TF Serving's
# REST API, and checks that it answers exactly what the in-process `Translator`
# says.
#
# Run it as a script (`python tutorials/06_export_serving.py`) or open it as a
# notebook (percent format). It uses `EXPORT_TUTORIAL_RUN_DIR` (default
# `runs/lstm-cpu`) and trains the `lstm-cpu` preset there for 10 minutes if the
# run does not exist yet. `EXPORT_TUTORIAL_TINY=1` trains `lstm-tiny` for two
# steps on 300 verses instead, so the test suite can execute it in about a
# minute; its translations mean nothing then.

# %%
import base64
import gzip
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import tensorflow as tf

from tf_outheads import Translator, data
from tf_outheads.export import export_options, export_translator
from tf_outheads_zoo.presets import EMBEDDED_CORPUS
from tf_outheads_zoo.runs import load_run
from tf_outheads_zoo.train import run_training

TINY = os.environ.get("EXPORT_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("EXPORT_TUTORIAL_RUN_DIR") or "runs/lstm-cpu"
EXPORT_DIR = os.environ.get("EXPORT_TUTORIAL_EXPORT_DIR") or tempfile.mkdtemp(prefix="export-")
SERVING = pathlib.Path(__file__).resolve().parents[1] / "serving"
sys.path.insert(0, str(SERVING))
import rest_client  # noqa: E402  (serving/rest_client.py: builds REST bodies)

# %% [markdown]
# ## 1. A trained run
# `load_run` gives the model (`model.keras`, loaded with `safe_mode=True`), the
# tokenizers and the run's settings (a `RunConfig`). Without a run, train one, as
# `tf-outheads train` does.

# %%
if not os.path.exists(os.path.join(RUN_DIR, "model.keras")):
    if TINY:
        # A 300-verse slice of the embedded corpus keeps the tiny run short.
        keep = {"train": 300, "dev": 8, "test": 8}
        corpus = os.path.join(RUN_DIR, "small.tsv")
        os.makedirs(RUN_DIR, exist_ok=True)
        with gzip.open(EMBEDDED_CORPUS, "rt", encoding="utf-8") as f, \
                open(corpus, "w", encoding="utf-8") as out:
            out.write(next(f))
            for line in f:
                split = line.split("\t")[1]
                if keep[split] > 0:
                    keep[split] -= 1
                    out.write(line)
        run_training("lstm-tiny", RUN_DIR, {
            "data.corpus": corpus, "data.vocab_size": 300, "train.max_steps": 2,
            "train.steps_per_epoch": 2, "decode.max_length_offset": 3})
    else:
        run_training("lstm-cpu", RUN_DIR, {"train.max_minutes": 10})
model, source_tokenizer, target_tokenizer, config = load_run(RUN_DIR)
print(f"run {RUN_DIR}: {type(model).__name__} with a {type(model.head).__name__}, "
      f"decode settings {config.decode.options()}")

# %% [markdown]
# ## 2. Export
# The run's decode settings become the signatures' defaults. `beam_sizes` are
# the widths the graph holds a search for (a request for another width gets the
# largest one below it). The head's `inference_cache()` (for the joint head E' =
# g_out(E)) is computed here, once, and saved as variables. For TF Serving the
# SavedModel goes into a numbered version directory.

# %%
BEAM = 4
path = export_translator(model, source_tokenizer, target_tokenizer,
                         os.path.join(EXPORT_DIR, "translator", "1"),
                         beam_sizes=(1, 2, BEAM) if TINY else (1, 2, 4, 5, 8),
                         **export_options(config.decode.options()))
print("=== SIGNATURES ===")
loaded_here = tf.saved_model.load(path)
for key, function in loaded_here.signatures.items():
    inputs = {name: f"{spec.dtype.name}{spec.shape}"
              for name, spec in function.structured_input_signature[1].items()}
    outputs = {name: f"{spec.dtype.name}{spec.shape}"
               for name, spec in function.structured_outputs.items()}
    print(f"{key}: inputs {inputs} -> outputs {outputs}")
with open(os.path.join(path, "assets.extra", "tf_outheads_export.json")) as f:
    print("defaults:", json.load(f)["defaults"])

# %% [markdown]
# ## 3. REST bodies
# TF Serving's REST API takes `{"instances": [...]}`. Without options
# `rest_client.build_request` addresses `serving_default`; with options the
# `translate` signature, one object per source naming every input (`-1`: the
# export's default). Bytes that are not UTF-8 travel as `{"b64": ...}`.

# %%
test_sources = data.read_tsv(EMBEDDED_CORPUS, split="test").sources[:6]
bodies = {
    "defaults": rest_client.build_request(test_sources),
    "greedy": rest_client.build_request(test_sources, beam_size=1),
    f"beam {BEAM}": rest_client.build_request(test_sources, beam_size=BEAM),
    f"beam {BEAM}, 3-best": rest_client.build_request(test_sources[:2], beam_size=BEAM,
                                                      num_hypotheses=3),
    "bad input": {"instances": ["", "   ", {"b64": base64.b64encode(b"Dios \xff es amor")
                                             .decode("ascii")},
                               " ".join(test_sources * 100)]},
}
print("=== REST ===")
print(json.dumps(bodies[f"beam {BEAM}, 3-best"], ensure_ascii=False)[:300], "...")

# %% [markdown]
# ## 4. A server-like process: TensorFlow and tensorflow-text only
# The child process loads the SavedModel and answers each body as TF Serving's
# REST layer would (`serving/rest_emulator.py`: JSON → tensors of the
# signature's inputs → JSON predictions). It never imports `tf_outheads`.

# %%
SERVER = """
import json, sys
sys.path.insert(0, sys.argv[2])
import tensorflow as tf
import rest_emulator   # imports tensorflow and tensorflow_text only
loaded = tf.saved_model.load(sys.argv[1])
answers = {name: rest_emulator.predict(loaded, body)[1]
           for name, body in json.load(sys.stdin).items()}
answers["tf_outheads imported"] = any(m.split(".")[0] in ("tf_outheads", "tf_outheads_zoo")
                                      for m in sys.modules)
json.dump(answers, sys.stdout)
"""
result = subprocess.run([sys.executable, "-c", SERVER, path, str(SERVING)],
                        input=json.dumps(bodies), capture_output=True, text=True,
                        cwd=tempfile.gettempdir(),  # nothing of the repository importable
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), timeout=600)
assert result.returncode == 0, result.stderr[-3000:]
answers = json.loads(result.stdout)
print("=== SERVER PROCESS ===")
print(f"tf_outheads imported by the server process: {answers['tf_outheads imported']}")
for name in bodies:
    first = answers[name]["predictions"][0]
    shown = [text[:60] for text in first["translations"]]
    print(f"[{name}] {shown} scores {[round(s, 3) for s in first['scores']]} "
          f"beam {first['beam_size']}")

# %% [markdown]
# ## 5. Same strings as the in-process `Translator`
# The exported graph runs the same search with the same weights, so the
# translations are identical: with the export's defaults (the run's decode
# settings), greedy, and beam. An n-best list starts with the beam's best.

# %%
print("=== SAME AS TRANSLATOR ===")
for name, beam_size in (("defaults", config.decode.beam_size), ("greedy", 1),
                        (f"beam {BEAM}", BEAM)):
    options = dict(config.decode.options(), beam_size=beam_size)  # what the run decodes with
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          **options).translate(test_sources)
    served = [p["translations"][0] for p in answers[name]["predictions"]]
    print(f"same strings as Translator ({name}): {served == expected}")
nbest = answers[f"beam {BEAM}, 3-best"]["predictions"]
print(f"3-best lists start with the beam-{BEAM} translation: "
      f"{[p['translations'][0] for p in nbest] == served[:2]}")

# %% [markdown]
# ## 6. Bad input gives defined answers
# Empty and whitespace-only sources give `""` with score 0, invalid UTF-8 bytes
# become U+FFFD (SentencePiece drops it), and a source longer than 255 subword
# pieces is translated from its first 255 and flagged `truncated`. Sources with no
# piece at all are flagged `empty_source`, even when a whole request is made of them.

# %%
print("=== BAD INPUT ===")
for source, prediction in zip(["''", "'   '", "b'Dios \\xff es amor'", "75 KB of verses"],
                              answers["bad input"]["predictions"]):
    print(f"{source}: {prediction['translations'][0]!r} score {prediction['scores'][0]:.3f} "
          f"truncated {prediction['truncated']} empty_source {prediction['empty_source']}")

# %% [markdown]
# ## 7. The real server
# With Docker, the same SavedModel under TF Serving (REST 8501, gRPC 8500), then
# `serving/rest_client.py` or `serving/grpc_client.py` (`serving/README.md`):
#
# ```bash
# docker run --rm -p 8500:8500 -p 8501:8501 \
#   -v "$EXPORT_DIR/translator:/models/translator:ro" -v "$PWD/serving:/serving:ro" \
#   tensorflow/serving:2.21.0 --model_config_file=/serving/models.config \
#   --enable_batching=true --batching_parameters_file=/serving/batching_parameters.txt
# python serving/rest_client.py --beam-size 4 "Y dijo Dios: Sea la luz."
# ```

# %%
print(f"export: {path}")
