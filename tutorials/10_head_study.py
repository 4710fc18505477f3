# %% [markdown]
# # Which head is better on my data? A study of three heads on your own text files
#
# A single pair of trained models says little: two seeds of the same model differ by
# about a BLEU point here, as much as the effects the papers report. A *study* trains
# every head (an *arm*) for the same budget over several seeds, on the same pieces,
# and judges each difference by the spread between seeds. This tutorial does what a
# researcher does from the shell:
#
# 1. writes line-aligned text files (from the embedded corpus, so it runs anywhere;
#    bring your own `train.de` / `train.en` instead);
# 2. writes `study.yaml`: the data, the budget, the seeds, three arms (the untied
#    softmax, weight tying, and the joint input-output embedding head of Pappas et al.
#    2018), the baseline, a claim and how the winner is chosen;
# 3. runs `tf-outheads study --config study.yaml --export-winner ...`, which trains the
#    arms one run at a time in `runs/<arm>/s<seed>` (a killed study, run again, skips
#    finished runs and resumes the one that was running), scores each run by forced
#    decoding (cross-entropy without label smoothing), and writes `results.md`,
#    `results.json` and the curves;
# 4. reads the verdicts, and serves the exported winner.
#
# Run it as a script (`python tutorials/10_head_study.py`) or open it as a notebook
# (percent format). By default it trains the `lstm-cpu` presets for 1,500 steps, seeds
# 1 and 2, on the whole embedded corpus written as text files: six runs of about 14
# minutes each on 2 CPU cores (about 1 h 30 min). `HEAD_STUDY_TUTORIAL_TINY=1` trains
# `lstm-tiny` heads for 4 steps, one seed, on 400 verses instead (the test suite runs
# that; its numbers mean nothing). `HEAD_STUDY_TUTORIAL_DIR` sets the working directory
# (default: a new temporary one).

# %%
import json
import os
import subprocess
import sys
import tempfile

import tensorflow as tf

from tf_outheads import data
from tf_outheads_zoo import cli
from tf_outheads_zoo.presets import EMBEDDED_CORPUS

TINY = os.environ.get("HEAD_STUDY_TUTORIAL_TINY") == "1"
WORK = os.environ.get("HEAD_STUDY_TUTORIAL_DIR") or tempfile.mkdtemp(prefix="head-study-")
CORPORA = os.path.join(WORK, "corpora")
RUNS = os.path.join(WORK, "runs")
os.makedirs(CORPORA, exist_ok=True)


def tf_outheads(*args):
    """Runs `tf-outheads ARGS`: the CLI's `main`, in this process (a shell runs the same
    program; `HEAD_STUDY_TUTORIAL_SUBPROCESS=1` runs it as `python -m tf_outheads_zoo.cli`)."""
    print("$ tf-outheads " + " ".join(args), flush=True)
    if os.environ.get("HEAD_STUDY_TUTORIAL_SUBPROCESS") == "1":
        subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", *args], check=True)
    else:
        cli.main(list(args))
        sys.stdout.flush()


# %% [markdown]
# ## 1. Your corpus as text files
# One sentence per line, the two sides line-aligned (`.gz` is read as gzip).

# %%
sizes = {"train": 400, "dev": 20, "test": 20} if TINY else {}
for split in ("train", "dev", "test"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, split=split)
    if split in sizes:
        corpus = corpus.select(range(sizes[split]))
    for language, texts in (("es", corpus.sources), ("en", corpus.targets)):
        with open(os.path.join(CORPORA, f"{split}.{language}"), "w", encoding="utf-8") as f:
            f.write("".join(text + "\n" for text in texts))
print("=== FILES ===")
for name in sorted(os.listdir(CORPORA)):
    print(f"{name}: {os.path.getsize(os.path.join(CORPORA, name)):,} bytes")

# %% [markdown]
# ## 2. The study file
# `data` takes the keys of a run file's `data` section (here the three sets; also the
# vocabulary size, cleaning, batches), applied to every arm. Each arm is a preset and
# the settings it changes (`set`, the dotted keys of `tf-outheads train --set`), so an
# arm can be any head, loss or model the presets and registries know
# (`tf-outheads presets`, `tf-outheads components`). `claims` say what you expect: the
# claim **holds** if the test BLEU difference beats `expect` by a 95 % interval that
# counts both the seeds and the test sentences, with its p-value adjusted (Holm) over all
# the claims' tests, is **contradicted** if below, and is **inconclusive** otherwise (the
# report then says how many seeds would settle it). Fix the seeds before you look: adding
# seeds until an interval clears is optional stopping. A run that never learned to read
# its source is flagged as stalled. The winner is chosen on dev, never on test.

# %%
if TINY:
    arms = {"untied": "{preset: lstm-tiny, set: {model.head: softmax}}",
            "tied": "{preset: lstm-tiny, set: {model.head: tied}}",
            "joint": "{preset: lstm-tiny, set: {model.head: {class_name: joint, "
                     "config: {joint_dim: 16}}}}"}
    vocabulary, budget, seeds, eval_every = "  vocab_size: 300\n", "{steps: 4}", "[1]", 2
else:
    arms = {"untied": "{preset: lstm-cpu-softmax}", "tied": "{preset: lstm-cpu-tied}",
            "joint": "{preset: lstm-cpu-joint-512}"}
    vocabulary, budget, seeds, eval_every = "", "{steps: 1500}", "[1, 2]", 300
study_text = (
    "title: Untied, tied and joint output layers on my corpus\n"
    "data:\n"
    "  train: {source: corpora/train.es, target: corpora/train.en}\n"
    "  dev: {source: corpora/dev.es, target: corpora/dev.en}\n"
    "  test: {source: corpora/test.es, target: corpora/test.en}\n"
    + vocabulary
    + f"budget: {budget}\nseeds: {seeds}\neval_every: {eval_every}\n"
    + "arms:\n" + "".join(f"  {name}: {arm}\n" for name, arm in arms.items())
    + "baseline: tied\n"
    "claims:\n"
    "  - {arm: joint, baseline: tied, paper: '+0.5 to +1.2 BLEU (Table 2)'}\n"
    "  - {arm: tied, baseline: untied}\n"
    "select_by: dev_bleu\n")
study_file = os.path.join(WORK, "study.yaml")
with open(study_file, "w", encoding="utf-8") as f:
    f.write(study_text)
print("=== STUDY FILE ===")
print(study_text)

# %% [markdown]
# ## 3. Run the study
# One line per run says which arm and seed trains, where its log is, and when it ends
# its steps, its dev BLEU and the study's remaining time. Every run writes its settings
# first (`study_run.json`): changing the study file in a way that would change a
# finished run is refused, naming the key, so runs of different settings never mix.

# %%
print("=== STUDY ===")
winner_dir = os.path.join(WORK, "export", "1")
tf_outheads("study", "--config", study_file, "--runs-dir", RUNS,
            "--export-winner", winner_dir)

# %% [markdown]
# ## 4. The verdicts
# `results.md` has, per arm, mean ± sd over seeds of dev and test BLEU, the test BLEU
# difference to the baseline with its 95 % interval over seeds and sentences, the dev
# cross-entropy (forced decoding of the references: the same measure for every
# categorical head, whatever loss it trained with), chrF and the length ratio, the
# stalled runs; then each claim's verdict,
# also on dev cross-entropy, which is far less noisy than BLEU. `results.json` holds the
# same numbers for your own analysis.

# %%
print("=== RESULTS ===")
with open(os.path.join(RUNS, "results.md"), encoding="utf-8") as f:
    report = f.read()
print(report[report.index("| arm |"):])
with open(os.path.join(RUNS, "results.json"), encoding="utf-8") as f:
    numbers = json.load(f)
for label, arm in numbers["arms"].items():
    for seed, run in arm["runs"].items():
        print(f"{label} seed {seed}: dev BLEU {run['dev_bleu']:.2f}, dev cross-entropy "
              f"{run['dev_cross_entropy']:.3f} ({run['dev_cross_entropy_kind']})")

# %% [markdown]
# ## 5. The winner, served
# `--export-winner` exported the best arm's best seed (by `select_by` on dev) as the
# SavedModel `tf-outheads export` writes, with `winner.json` saying which it is.

# %%
print("=== WINNER ===")
with open(os.path.join(winner_dir, "winner.json"), encoding="utf-8") as f:
    winner = json.load(f)
print(f"winner: {winner['arm']} seed {winner['seed']} by {winner['metric']} "
      f"({winner['value']:.2f})")
translator = tf.saved_model.load(winner_dir)
source = "En el principio creó Dios los cielos y la tierra."
output = translator.signatures["serving_default"](sources=tf.constant([source]))
print(f"SavedModel: {source!r} -> {output['translations'].numpy()[0][0].decode()!r}")
