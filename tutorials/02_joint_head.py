# %% [markdown]
# # Beyond weight tying: the joint input-output embedding head
#
# Pappas, Miculicich & Henderson (2018) replace the output layer of an NMT
# decoder by a bilinear map between the decoder state and the *target input
# embedding* `E`, each projected to a joint space of size `d_j`:
#
#     logits = σ(E·U + b_u) · σ(V·h + b_v) + b          (Eq. 14/15)
#
# Weight tying (`logits = E·h + b`, Eq. 18) is the special case without the two
# projections. This tutorial trains the same attentional LSTM twice on the
# embedded Spanish→English Bible corpus, once with the tied head and once with
# `tf_outheads.JointEmbeddingHead`, from the same seed and for the same number
# of steps; compares their parameters (the output-layer capacity of Eq. 9 and
# Eq. 16) and BLEU; and prints the nearest neighbours of a few English subwords
# under the input representation `E` and the output representation
# `E' = g_out(E)`, like Table 1 of the paper.
#
# Run it as a script (`python tutorials/02_joint_head.py`, about five minutes on
# a 2-core CPU) or open it as a notebook (percent format, e.g. with Jupytext).
# `JOINT_TUTORIAL_TINY=1` shrinks every setting so the test suite can execute
# it in well under a minute; with so little training its BLEU and neighbours
# mean nothing.

# %%
import os
import tempfile

import keras
import numpy as np

from tf_outheads import (JointEmbeddingHead, TiedSoftmaxHead, compile_for_translation,
                         corpus_bleu, data, parameter_report, translate)
from tf_outheads_zoo import LSTMSeq2Seq
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

TINY = os.environ.get("JOINT_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("JOINT_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="joint-head-")
SEED = 1234

# Every size in one place: (tiny test setting, few-minute CPU setting).
VOCAB_SIZE = 500 if TINY else 4000     # SentencePiece pieces per language
SIZE = 32 if TINY else 256             # embedding = hidden size d = d_h
JOINT_DIM = 64 if TINY else 512        # d_j, the joint space (Eq. 16's capacity knob)
STEPS_PER_EPOCH, EPOCHS = (10, 2) if TINY else (150, 2)
BATCH_TOKENS = 1024 if TINY else 2048

# %% [markdown]
# ## 1. Read the corpus, strip the WEB boilerplate, clean
# The SWORD export of the World English Bible appends a Psalm heading to
# thousands of verses; `strip_suffixes` removes it from the targets of every
# split (`tf_outheads_zoo.presets.BIBLE_WEB_ARTIFACTS`), so the model does not learn to emit
# it and BLEU is not inflated by it.

# %%
splits = {}
for split in ("train", "dev"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web", references=(),
                           split=split)
    corpus, removed = data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
    print(f"{split}: {len(corpus)} verse pairs, boilerplate stripped from "
          f"{sum(removed.values())} targets")
    splits[split] = corpus
train, dev = splits["train"], splits["dev"]
if TINY:
    train, dev = train.select(range(1500)), dev.select(range(10))
else:
    dev = dev.select(range(200))
train, report = data.clean(train, max_length=60 if TINY else 80, max_length_ratio=2.5,
                           drop_containing=BIBLE_WEB_ARTIFACTS)
print(report)

# %% [markdown]
# ## 2. Tokenizers
# Separate source and target SentencePiece models, so the target embedding `E`
# holds English subwords only (the rows we look at in section 6). They are
# trained once and cached in the run directory.

# %%
source_tokenizer, target_tokenizer = data.build_tokenizers(
    train.sources, train.targets, RUN_DIR, vocab_size=VOCAB_SIZE, joint=False)
print(f"vocabularies: source {source_tokenizer.vocab_size}, target {target_tokenizer.vocab_size}")

# %% [markdown]
# ## 3. Two models, one seed
# The head is the only difference. `head="tied"` builds a `TiedSoftmaxHead`;
# the spec dict builds a `JointEmbeddingHead` with `joint_dim=d_j`. Both heads
# take the model's own target embedding `E` (the same variable the decoder
# reads its inputs from, not a copy).

# %%
HEADS = {
    "tied": "tied",
    f"joint({JOINT_DIM})": {"class_name": "joint", "config": {"joint_dim": JOINT_DIM}},
}


def build_model(head):
    keras.utils.set_random_seed(SEED)  # same initial weights outside the head
    model = LSTMSeq2Seq(source_tokenizer.vocab_size, target_tokenizer.vocab_size,
                        embedding_dim=SIZE, hidden_dim=SIZE, num_layers=1,
                        bidirectional_encoder=True, dropout=0.1 if TINY else 0.2, head=head)
    compile_for_translation(model, learning_rate=3e-3 if TINY else 2e-3, label_smoothing=0.1)
    return model


models = {name: build_model(head) for name, head in HEADS.items()}
joint_name = f"joint({JOINT_DIM})"
assert isinstance(models["tied"].head, TiedSoftmaxHead)
assert isinstance(models[joint_name].head, JointEmbeddingHead)
assert models[joint_name].head.embedding is models[joint_name].target_embedding

# %% [markdown]
# ## 4. Parameters
# `parameter_report` counts every variable once (the tied `E` under the
# embeddings) and ends with the output layer's own capacity as the paper counts
# it: `|V|` for tying (Eq. 9), `d·d_j + d_j·d_h + |V|` for the joint head
# (Eq. 16), independent of `|V|` apart from the bias.

# %%
for name, model in models.items():
    print(f"=== PARAMETERS [{name}] ===")
    print(parameter_report(model))
    print()

# %% [markdown]
# ## 5. Train both for the same number of steps, translate, score
# Same batches in the same order (the dataset is seeded), same optimizer, same
# steps. Greedy decoding computes the joint head's `E'` once per `translate`
# call, not at every step.

# %%
# `keras.utils.set_random_seed` (in `build_model`) resets TensorFlow's random
# state, which also frees the SentencePiece ops of tokenizers built before it.
# Load them again from the run directory (a cache hit, no retraining) before
# building a tf.data pipeline on them.
source_tokenizer, target_tokenizer = data.load_tokenizers(RUN_DIR)

results = {}
for name, model in models.items():
    print(f"=== TRAINING [{name}] ===")
    # A fresh, seeded pipeline per model: both see the same batches in the same order.
    batches = data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                       batch_tokens=BATCH_TOKENS, repeat=True, seed=1)
    history = model.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, verbose=2)
    losses = [round(value, 3) for value in history.history["loss"]]
    hypotheses = translate(model, dev.sources, source_tokenizer, target_tokenizer)
    results[name] = {"losses": losses, "hypotheses": hypotheses,
                     "bleu": corpus_bleu(hypotheses, dev.targets)}

for source, reference, *hypotheses in list(zip(
        dev.sources, dev.targets, *(r["hypotheses"] for r in results.values())))[:3]:
    print(f"{'ES':{len(joint_name)}s}: {source}\n{'REF':{len(joint_name)}s}: {reference}")
    for name, hypothesis in zip(results, hypotheses):
        print(f"{name:{len(joint_name)}s}: {hypothesis}")
    print()
for name, result in results.items():
    print(f"loss per epoch [{name}]: {result['losses']}")
for name, result in results.items():
    print(f"BLEU [{name}]: {result['bleu'].text} | {result['bleu'].signature}")

# %% [markdown]
# ## 6. Input and output representations (Table 1 of Pappas et al. 2018)
# The joint head has two representations of every target word: the input
# embedding `e_j` (a row of `E`, what the decoder reads) and the output
# embedding `e'_j = σ(U·e_j + b_u)` (a row of `E' = head.output_weights()`, what
# the decoder's state is scored against). With tying both are the same row, so
# both columns would show the same neighbours. Cosine similarity, special
# tokens left out.

# %%
joint_model = models[joint_name]
input_rows = keras.ops.convert_to_numpy(joint_model.target_embedding.embeddings)
output_rows = keras.ops.convert_to_numpy(joint_model.head.output_weights())
print(f"E {input_rows.shape}, E' = g_out(E) {output_rows.shape}")

FIRST_WORD_ID = data.EOS_ID + 1  # ids below are PAD, UNK, BOS, EOS
pieces = [target_tokenizer.id_to_piece(i) for i in range(target_tokenizer.vocab_size)]


def nearest(rows, query_id, k=5):
    unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit[query_id]
    similarity[:FIRST_WORD_ID] = -np.inf
    similarity[query_id] = -np.inf
    return [pieces[i] for i in np.argsort(-similarity)[:k]]


# Query words of the paper's kind; those the vocabulary lacks are replaced by
# its first whole-word pieces (SentencePiece orders BPE pieces by merge, so
# early pieces are frequent).
wanted = ["▁king", "▁said", "▁water", "▁God", "▁land", "▁son"]
queries = [p for p in wanted if target_tokenizer.piece_to_id(p) != data.UNK_ID]
fallback = [p for p in pieces[FIRST_WORD_ID:] if p.startswith("▁") and len(p) > 3]
for piece in fallback:
    if len(queries) >= 4:
        break
    if piece not in queries:
        queries.append(piece)

print(f"=== NEAREST NEIGHBOURS [{joint_name}]: top-5 by cosine, input E vs output E' ===")
width = max(len(q) for q in queries)
rows = [(q, nearest(input_rows, target_tokenizer.piece_to_id(q)),
         nearest(output_rows, target_tokenizer.piece_to_id(q))) for q in queries]
# Pieces hold no spaces (SentencePiece writes them as ▁): a space separates them.
column = max(len("input representation (E)"), max(len(" ".join(n)) for _, n, _ in rows))
print(f"{'query':{width}s} | {'input representation (E)':{column}s} | output representation (E')")
print("-" * (width + column + 32))
for query, input_neighbours, output_neighbours in rows:
    print(f"{query:{width}s} | {' '.join(input_neighbours):{column}s} | "
          f"{' '.join(output_neighbours)}")
