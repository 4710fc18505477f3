# %% [markdown]
# # Back-translation: sampled synthetic sources for target-side text
#
# Parallel text is scarce; text in the target language alone is not. Back-translation
# (Sennrich et al. 2016) turns target-side text into training pairs: a *reverse* model
# (target → source) translates it, and the forward model trains on the synthetic
# sources paired with the real targets, next to the real pairs. Edunov et al. (2018,
# "Understanding Back-Translation at Scale") compared ways to produce the synthetic
# sources: beam search gives the most likely, least varied ones; sampling from the
# model gives varied ones with a richer training signal. With much bitext sampling
# (and noised beam) won; with little bitext (their 80K-pair setting) beam search did
# better. This corpus is small; the tutorial samples from the 10 most likely pieces at
# each step, a middle ground it does not measure against the others (`--beam-size 5`
# instead of the sampling options gives the beam variant).
#
# The steps, as a user runs them from the shell (here through the CLI's `main`):
#
# 1. split the embedded corpus's training books: the first half as real pairs, the
#    second half's English as target-side text alone (its Spanish is thrown away);
# 2. train the reverse model (English → Spanish) on the real pairs;
# 3. `tf-outheads translate --sampling-topk 10 --seed 1`: one sampled Spanish source per
#    English line. The seed makes the sample reproducible: each line's draw depends on
#    the seed and the line's position only, not on the batch;
# 4. train two forward models (Spanish → English) for the same number of steps: one on
#    the real pairs, one on the real and the synthetic pairs;
# 5. compare their dev BLEU on the real dev set.
#
# Each model learns its own SentencePiece pieces from its own training files, as a user's
# would (the back-translated model's pieces see the extra English).
#
# Run it as a script (`python tutorials/11_back_translation.py`) or open it as a
# notebook (percent format). By default it trains `lstm-cpu` three times for 1,500 steps
# each and samples ~14,000 back-translations: roughly an hour on 2 CPU cores (estimated
# from the head-study tutorial's 1,500-step runs, about 14 minutes each; this tutorial's
# default has not been timed). One seed of each model says little (two seeds differ by about a BLEU
# point here); `tutorials/10_head_study.py` shows how to judge a difference over seeds.
# `BACK_TRANSLATION_TUTORIAL_TINY=1` trains `lstm-tiny` for 4 steps on 300 pairs and
# 200 target lines instead (the test suite runs that; its numbers mean nothing).
# `BACK_TRANSLATION_TUTORIAL_DIR` sets the working directory (default: a new temporary
# one).

# %%
import json
import os
import subprocess
import sys
import tempfile

from tf_outheads import data
from tf_outheads_zoo import cli
from tf_outheads_zoo.config import BIBLE_WEB_ARTIFACTS
from tf_outheads_zoo.presets import EMBEDDED_CORPUS

TINY = os.environ.get("BACK_TRANSLATION_TUTORIAL_TINY") == "1"
WORK = (os.environ.get("BACK_TRANSLATION_TUTORIAL_DIR")
        or tempfile.mkdtemp(prefix="back-translation-"))
CORPORA = os.path.join(WORK, "corpora")
RUNS = os.path.join(WORK, "runs")
os.makedirs(CORPORA, exist_ok=True)


def tf_outheads(*args):
    """Runs `tf-outheads ARGS`: the CLI's `main`, in this process (a shell runs the same
    program; `BACK_TRANSLATION_TUTORIAL_SUBPROCESS=1` runs it as
    `python -m tf_outheads_zoo.cli`)."""
    print("$ tf-outheads " + " ".join(args), flush=True)
    if os.environ.get("BACK_TRANSLATION_TUTORIAL_SUBPROCESS") == "1":
        subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", *args], check=True)
    else:
        cli.main(list(args))
        sys.stdout.flush()


def write_lines(name, texts):
    path = os.path.join(CORPORA, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(text + "\n" for text in texts))
    return path


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


# %% [markdown]
# ## 1. Real pairs and target-side text
# The English side loses the export's boilerplate first (the presets strip it from
# targets; here English is also the reverse model's source). The training split is
# ordered by book, so the target-side text comes from books the real pairs do not
# cover: new names and topics, as monolingual data usually brings.

# %%
splits = {}
for split in ("train", "dev", "test"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, split=split)
    corpus, _ = data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
    splits[split] = corpus
train = splits["train"]
half = len(train) // 2
real = train.select(range(300) if TINY else range(half))
target_side = train.select(range(half, half + 200) if TINY else range(half, len(train)))
held = {"dev": 20, "test": 20} if TINY else {}
for split in ("dev", "test"):
    corpus = splits[split]
    if split in held:
        corpus = corpus.select(range(held[split]))
    write_lines(f"{split}.es", corpus.sources)
    write_lines(f"{split}.en", corpus.targets)
write_lines("real.es", real.sources)
write_lines("real.en", real.targets)
write_lines("mono.en", target_side.targets)
print("=== FILES ===")
print(f"real pairs: {len(real):,}; English lines without their Spanish: {len(target_side):,}")
for name in sorted(os.listdir(CORPORA)):
    print(f"{name}: {os.path.getsize(os.path.join(CORPORA, name)):,} bytes")


# %% [markdown]
# ## 2. The run files
# One run file per model; they differ only in their files. The budget is a number of
# steps, the same for the two forward models, so the comparison does not depend on how
# fast each trains.

# %%
def run_file(name, train, source, target):
    """`WORK/name.yaml`: train on `corpora/{train}.{source|target}`, dev and test sets in
    the same direction."""
    if TINY:
        settings = ("preset: lstm-tiny\n"
                    "data:\n  vocab_size: 300\n"
                    "train: {max_steps: 4, steps_per_epoch: 2}\n"
                    "decode: {max_length_offset: 3}\n")
    else:
        settings = ("preset: lstm-cpu\n"
                    "data:\n  vocab_size: 4000\n"
                    "train: {max_steps: 1500, max_minutes: null}\n")
    sets = "".join(f"  {split}: {{source: corpora/{files}.{source}, "
                   f"target: corpora/{files}.{target}}}\n"
                   for split, files in (("train", train), ("dev", "dev"), ("test", "test")))
    settings = settings.replace("data:\n", "data:\n" + sets)
    path = os.path.join(WORK, f"{name}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(settings)
    return path


reverse_file = run_file("reverse", "real", "en", "es")
print("=== RUN FILE (reverse) ===")
print("\n".join(read_lines(reverse_file)))

# %% [markdown]
# ## 3. The reverse model: English → Spanish on the real pairs

# %%
print("=== REVERSE ===")
reverse_dir = os.path.join(RUNS, "en-es")
tf_outheads("train", "--config", reverse_file, "--run-dir", reverse_dir)

# %% [markdown]
# ## 4. Sampled back-translations
# `--sampling-topk 10` draws each piece from the model's 10 most likely; the seed makes
# the file reproducible (the same command gives the same file, whatever `--batch-size`).
# Every sampling option is also a `Translator` argument and an input of the exported
# model's `translate` signature.

# %%
print("=== BACK-TRANSLATE ===")
mono = os.path.join(CORPORA, "mono.en")
synthetic = os.path.join(CORPORA, "mono.bt.es")
sampling = ("--sampling-topk", "10", "--seed", "1")
tf_outheads("translate", "--run-dir", reverse_dir, "--input", mono, "--output", synthetic,
            *sampling)
again = os.path.join(WORK, "mono.bt.again.es")
tf_outheads("translate", "--run-dir", reverse_dir, "--input", mono, "--output", again,
            "--batch-size", "7", *sampling)
print("the same seed gives the same sample:", read_lines(synthetic) == read_lines(again))
for target, source in list(zip(read_lines(mono), read_lines(synthetic)))[:3]:
    print(f"  {target!r}\n    <- {source!r}")

# %% [markdown]
# ## 5. Two forward models, the same steps
# The back-translated model's training files are the real pairs followed by the
# synthetic ones (the training stream shuffles them together).

# %%
write_lines("real+bt.es", real.sources + read_lines(synthetic))
write_lines("real+bt.en", real.targets + target_side.targets)
forward = {"baseline": run_file("baseline", "real", "es", "en"),
           "back-translation": run_file("back-translation", "real+bt", "es", "en")}
results = {}
for name, path in forward.items():
    print(f"=== FORWARD ({name}) ===")
    run_dir = os.path.join(RUNS, f"es-en-{name}")
    tf_outheads("train", "--config", path, "--run-dir", run_dir)
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        results[name] = json.load(f)

# %% [markdown]
# ## 6. The comparison
# Dev and test BLEU of the two forward models (one seed each: a difference of about a
# BLEU point is within seed-to-seed noise here).

# %%
print("=== RESULTS ===")
print(f"{'model':<18} {'training pairs':>14} {'steps':>6} {'dev BLEU':>9} {'test BLEU':>10}")
for name, result in results.items():
    pairs = len(real) + (len(target_side) if name == "back-translation" else 0)
    print(f"{name:<18} {pairs:>14,} {result['steps']:>6} "
          f"{result['dev']['bleu[dev.en]']['score']:>9.2f} "
          f"{result['test']['bleu[test.en]']['score']:>10.2f}")
