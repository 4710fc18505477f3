# %% [markdown]
# # Your own corpus: plain-text files and one run file
#
# A researcher's corpus is usually a pair of line-aligned text files per set
# (`train.de.gz` / `train.en.gz`, `newstest2013.de` / `newstest2013.en`, ...),
# not the embedded Bible TSV. This tutorial writes such files (from the
# embedded corpus, so it runs anywhere), writes a `run.yaml` that names them,
# and then does what a user does from the shell: `tf-outheads train --config`,
# `evaluate`, `translate` and `export` (run here through the CLI's `main`, the
# program the shell command starts). Every command after training needs only
# the run directory.
#
# What happens to the training files (`tf_outheads.data.streaming`):
#
# - one streaming scan checks them (UTF-8, gzip, equal line counts; an error
#   names the file and the line), counts what cleaning drops, and keeps a
#   seeded sample of `data.tokenizer_sample` pairs for SentencePiece;
# - training batches are read from the files with `tf.data`: cleaning and
#   tokenization run in the graph, the shuffle buffer holds
#   `data.shuffle_buffer` examples, and a backup stores file offsets and that
#   buffer, so nothing grows with the corpus.
#
# Run it as a script (`python tutorials/09_own_corpus.py`) or open it as a
# notebook (percent format). By default it trains `lstm-cpu` for 10 minutes
# on the whole embedded corpus written as text files. `OWN_CORPUS_TUTORIAL_TINY=1`
# trains `lstm-tiny` for 6 steps on 600 verses instead (the test suite runs
# that; its translations mean nothing). `OWN_CORPUS_TUTORIAL_DIR` sets the
# working directory (default: a new temporary one).

# %%
import gzip
import json
import os
import subprocess
import sys
import tempfile

import tensorflow as tf

from tf_outheads import data
from tf_outheads_zoo import cli
from tf_outheads_zoo.presets import EMBEDDED_CORPUS

TINY = os.environ.get("OWN_CORPUS_TUTORIAL_TINY") == "1"
WORK = os.environ.get("OWN_CORPUS_TUTORIAL_DIR") or tempfile.mkdtemp(prefix="own-corpus-")
CORPORA = os.path.join(WORK, "corpora")
RUN_DIR = os.path.join(WORK, "runs", "es-en")
os.makedirs(CORPORA, exist_ok=True)


def tf_outheads(*args):
    """Runs `tf-outheads ARGS`: the CLI's `main`, in this process (a shell runs the same
    program; `OWN_CORPUS_TUTORIAL_SUBPROCESS=1` runs it as `python -m tf_outheads_zoo.cli`)."""
    print("$ tf-outheads " + " ".join(args), flush=True)
    if os.environ.get("OWN_CORPUS_TUTORIAL_SUBPROCESS") == "1":
        subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", *args], check=True)
    else:
        cli.main(list(args))
        sys.stdout.flush()


# %% [markdown]
# ## 1. The corpus as text files
# One sentence per line, the two sides line-aligned; `.gz` files are read as
# gzip. The test set also gets a second reference (the King James Version),
# scored as multi-reference BLEU next to the first.

# %%
sizes = {"train": 600, "dev": 30, "test": 30} if TINY else {}
for split in ("train", "dev", "test"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, split=split)
    if split in sizes:
        corpus = corpus.select(range(sizes[split]))
    suffix = ".gz" if split == "train" else ""
    for language, texts in (("es", corpus.sources), ("en", corpus.targets)):
        path = os.path.join(CORPORA, f"{split}.{language}{suffix}")
        with (gzip.open if suffix else open)(path, "wt", encoding="utf-8") as f:
            f.write("".join(text + "\n" for text in texts))
    if split == "test":
        with open(os.path.join(CORPORA, "test.kjv.en"), "w", encoding="utf-8") as f:
            f.write("".join(text + "\n" for text in corpus.references["en_kjv"]))
print("=== FILES ===")
for name in sorted(os.listdir(CORPORA)):
    print(f"{name}: {os.path.getsize(os.path.join(CORPORA, name)):,} bytes")

# %% [markdown]
# ## 2. The run file
# A preset gives the defaults; the file changes only what differs. Relative
# paths are relative to the run file. The preset's other data keys (cleaning,
# vocabulary, batches) apply to these files as to the TSV. `tf-outheads presets`
# lists the presets, `docs/presets.md` every key.

# %%
run_file = os.path.join(WORK, "run.yaml")
if TINY:
    settings = ("preset: lstm-tiny\n"
                "data:\n  vocab_size: 400\n"
                "train: {max_steps: 6, steps_per_epoch: 3}\n"
                "decode: {max_length_offset: 3}\n")
else:
    settings = ("preset: lstm-cpu\n"
                "data:\n  vocab_size: 4000\n"
                "train: {max_minutes: 10}\n")
settings = settings.replace("data:\n", "data:\n"
                            "  train: {source: corpora/train.es.gz, target: corpora/train.en.gz}\n"
                            "  dev: {source: corpora/dev.es, target: corpora/dev.en}\n"
                            "  test: {source: corpora/test.es, target: corpora/test.en,\n"
                            "         references: [corpora/test.kjv.en]}\n"
                            "  shuffle_buffer: 100000\n")
with open(run_file, "w", encoding="utf-8") as f:
    f.write(settings)
print("=== RUN FILE ===")
print(settings)

# %% [markdown]
# ## 3. Train
# The log shows the scan (line counts, what cleaning removed), the tokenizer,
# dev BLEU at every evaluation, and at the end dev and test BLEU with
# sacrebleu's signatures. Running the same command again resumes from the
# last backup.

# %%
print("=== TRAIN ===")
tf_outheads("train", "--config", run_file, "--run-dir", RUN_DIR)
with open(os.path.join(RUN_DIR, "results.json"), encoding="utf-8") as f:
    results = json.load(f)
print(f"steps {results['steps']}, test BLEU {results['test']['bleu[test.en]']['score']:.2f}, "
      f"with the second reference {results['test']['bleu[test.en+test.kjv.en]']['score']:.2f}")

# %% [markdown]
# ## 4. Evaluate, translate, export: from the run directory
# `evaluate --run-dir` scores against the run's own test references (the
# files the run file named, stored with absolute paths in `run.json`);
# `translate` and `export` load the model and its tokenizers from the run.

# %%
print("=== EVALUATE ===")
tf_outheads("evaluate", "--hypotheses", os.path.join(RUN_DIR, "test.hyp"),
            "--run-dir", RUN_DIR, "--split", "test")
print("=== TRANSLATE ===")
translations = os.path.join(WORK, "dev.translated.en")
tf_outheads("translate", "--run-dir", RUN_DIR, "--input", os.path.join(CORPORA, "dev.es"),
            "--output", translations)
with open(translations, encoding="utf-8") as f, \
        open(os.path.join(RUN_DIR, "dev.hyp"), encoding="utf-8") as g:
    print("same as the run's dev translations:", f.read() == g.read())
print("=== EXPORT ===")
export_dir = os.path.join(WORK, "export", "1")
tf_outheads("export", "--run-dir", RUN_DIR, "--output", export_dir)
translator = tf.saved_model.load(export_dir)
source = "En el principio creó Dios los cielos y la tierra."
output = translator.signatures["serving_default"](sources=tf.constant([source]))
print(f"SavedModel: {source!r} -> {output['translations'].numpy()[0][0].decode()!r}")
