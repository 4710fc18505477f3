# %% [markdown]
# # Shared-private bilingual embeddings: pairs from a word aligner, then training
#
# Liu et al. (2019) let a source word and the target word it is paired with
# share the first λ_c·d features of their embeddings; the rest stay private to
# each language. Pairs come in three categories, tried in this order: similar
# lexical meaning (`lm`, from word alignments with probability over 0.05), same
# word form (`wf`), and unrelated words paired by frequency rank (`ur`), with
# λ = (0.9, 0.7, 0.5). The target output embedding is tied to the target input
# embedding. The embedding matrices are concatenations of shared and private
# sub-matrices (Eq. 2–3), so the model has fewer parameters and each shared
# slice gets gradients from both languages.
#
# This tutorial, on the embedded Spanish→English Bible corpus:
#
# 1. builds the pairs with the eflomal word aligner and prints their statistics
#    (the paper's Table 5) and examples;
# 2. counts the embedding parameters of vanilla, decoder weight tying,
#    three-way tying and shared-private models, here and at the paper's size;
# 3. trains a small Transformer with tied (decoder WT) embeddings and one with
#    shared-private embeddings, from the same seed for the same steps;
# 4. checks what is shared in the trained model and writes the paper's Figure 6
#    (a PCA of paired embeddings) for both;
# 5. saves and reloads the shared-private model.
#
# Run it as a script (`python tutorials/07_shared_private.py`, about twenty
# minutes on a 2-core CPU) or open it as a notebook (percent format).
# `SP_TUTORIAL_TINY=1` shrinks every setting so the test suite can execute it in
# about a minute; its BLEU means nothing then. The aligner is an optional
# dependency (GPL-3.0): `pip install 'tf_outheads[align]'`.

# %%
import os
import tempfile
import time

import keras
import numpy as np

from tf_outheads import SharedPrivateEmbedding, Translator, corpus_bleu, data, parameter_report
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.training.schedules import InverseSquareRootSchedule
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS
from tf_outheads_zoo.run_pairs import write_pair_figure
from tf_outheads_zoo.transformer import TransformerSeq2Seq

TINY = os.environ.get("SP_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("SP_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="shared-private-")
SEED = 1234

# Every size in one place: (tiny test setting, CPU setting).
VOCAB_SIZE = 600 if TINY else 4000          # joint SentencePiece pieces
TRAIN_VERSES = 3000 if TINY else None       # None: the whole training split
SIZE, FFN, HEADS, LAYERS = (32, 64, 2, 1) if TINY else (256, 1024, 4, 3)
STEPS_PER_EPOCH, EPOCHS = (8, 2) if TINY else (400, 3)
BATCH_TOKENS = 1024 if TINY else 3072
WARMUP = 10 if TINY else 800
SHARING = (0.9, 0.7, 0.5)                   # λ_lm, λ_wf, λ_ur (§3.1)

# %% [markdown]
# ## 1. Corpus, tokenizer and word pairs
# One joint BPE model for both languages (so "same word form" has a meaning at
# the piece level). The pairs are built on the training split: eflomal aligns
# every verse pair, `A(y|x)` is the share of `x`'s alignment links that go to
# `y`, and source pieces, most frequent first, take their most probable unused
# target piece when `A(y|x) > 0.05`.

# %%
splits = {}
for split in ("train", "dev"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web", references=(),
                           split=split)
    splits[split], _ = data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
train, dev = splits["train"], splits["dev"]
if TRAIN_VERSES:
    train = train.select(range(TRAIN_VERSES))
dev = dev.select(range(10 if TINY else 300))
train, _ = data.clean(train, max_length=60 if TINY else 80, max_length_ratio=2.5,
                      drop_containing=BIBLE_WEB_ARTIFACTS)
data.build_tokenizers(train.sources, train.targets, RUN_DIR, vocab_size=VOCAB_SIZE, seed=SEED)
tokenizer, _ = data.load_tokenizers(RUN_DIR)
vocab_size = tokenizer.vocab_size

start = time.perf_counter()
pairs = data.word_pairs_from_tokenizers(train.sources, train.targets, tokenizer, tokenizer)
pairs_path = pairs.save(os.path.join(RUN_DIR, "word_pairs.tsv"))
print("=== PAIRS ===")
print(f"{pairs} in {time.perf_counter() - start:.0f} s, written to {pairs_path}")
for category in ("lm", "wf", "ur"):
    shown = [(pairs.source_tokens[s], pairs.target_tokens[t])
             for s, t, c in zip(pairs.source_ids, pairs.target_ids, pairs.categories)
             if data.word_pair_table.CATEGORIES[c] == category][4:12]
    print(f"{category}: " + ", ".join(f"{s}→{t}" for s, t in shown))
for piece in ("▁Dios", "▁rey", "▁tierra", "▁dijo"):
    if piece in pairs.source_tokens:  # a small vocabulary may split the word
        print(f"{piece} → {pairs.target_of(piece)}")

# %% [markdown]
# ## 2. Embedding parameters
# `SharedPrivateEmbedding(pairs, d, sharing_ratios)` owns the sub-matrices and
# exposes `.source` and `.target`, two embedding layers whose tables it
# assembles at each call. λ = 0 is decoder weight tying (two private tables and
# a tied output layer), λ = 1 with every piece paired with itself is three-way
# tying (one table). At the paper's size (30K words each side, d = 512) the
# counts of its Tables 1 and 5 follow from the category counts alone.

# %%
def embedding_parameters(shared_private=None, ratios=SHARING, tied=True, v=vocab_size, d=SIZE):
    if shared_private is None:  # separate tables
        return 2 * v * d + (0 if tied else v * d)
    # Counted from the pairs and widths, without creating the variables.
    return SharedPrivateEmbedding(shared_private, d, sharing_ratios=ratios).parameter_count()[
        "parameters"]


print("=== PARAMETERS ===")
print(f"this model (|V| = {vocab_size}, d = {SIZE}): vanilla {embedding_parameters(tied=False):,}, "
      f"decoder WT {embedding_parameters():,}, "
      f"three-way WT {embedding_parameters(data.WordPairs.identity(vocab_size), (1, 1, 1)):,}, "
      f"shared-private {embedding_parameters(pairs):,}")
for counts in ((21_172, 11, 8_817), (4_869, 309, 24_822)):
    ids = np.arange(30_000)
    synthetic = data.WordPairs(ids, ids, np.repeat([0, 1, 2], counts), 30_000, 30_000)
    print(f"paper size, lm/wf/ur = {counts}: vanilla "
          f"{embedding_parameters(tied=False, v=30_000, d=512) / 1e6:.1f}M, decoder WT "
          f"{embedding_parameters(v=30_000, d=512) / 1e6:.1f}M, shared-private "
          f"{embedding_parameters(synthetic, v=30_000, d=512) / 1e6:.1f}M")

# %% [markdown]
# ## 3. Train decoder WT and shared-private Transformers
# Same seed, same batches, same steps; label smoothing 0.1 and Adam with
# β2 = 0.98 and the inverse square-root warm-up of the paper. The only
# difference is `shared_private={"pairs": ..., "sharing_ratios": ...}`; both
# tie the target output embedding to the target input embedding (`head="tied"`).

# %%
def build_model(shared_private):
    keras.utils.set_random_seed(SEED)
    model = TransformerSeq2Seq(
        vocab_size, vocab_size, model_dim=SIZE, ffn_dim=FFN, num_heads=HEADS,
        encoder_layers=LAYERS, decoder_layers=LAYERS, dropout=0.1, head="tied",
        shared_private=shared_private)
    schedule = InverseSquareRootSchedule(SIZE, warmup_steps=WARMUP)
    model.compile(optimizer=keras.optimizers.Adam(schedule, beta_2=0.98, epsilon=1e-9),
                  loss=MaskedSequenceCrossEntropy(label_smoothing=0.1))
    return model


models = {"decoder WT": build_model(None),
          "shared-private": build_model({"pairs": pairs_path, "sharing_ratios": SHARING})}
print("=== TRAINING ===")
results = {}
for name, model in models.items():
    tokenizer, _ = data.load_tokenizers(RUN_DIR)
    batches = data.dataset_from_corpus(train, tokenizer, tokenizer, batch_tokens=BATCH_TOKENS,
                                       repeat=True, seed=1)
    start = time.perf_counter()
    history = model.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, verbose=2).history
    seconds = time.perf_counter() - start
    tokenizer, _ = data.load_tokenizers(RUN_DIR)
    hypotheses = Translator(model, tokenizer, tokenizer).translate(dev.sources)
    results[name] = {"loss": [round(v, 3) for v in history["loss"]],
                     "bleu": corpus_bleu(hypotheses, dev.targets).score,
                     "embeddings": parameter_report(model).groups["embeddings"],
                     "seconds": seconds, "example": hypotheses[0]}
print("=== RESULTS ===")
print(f"ES : {dev.sources[0]}\nREF: {dev.targets[0]}")
for name, result in results.items():
    print(f"[{name}] loss per epoch {result['loss']}, dev BLEU {result['bleu']:.2f}, "
          f"embedding parameters {result['embeddings']:,}, {result['seconds']:.0f} s\n"
          f"    {result['example']}")

# %% [markdown]
# ## 4. What is shared
# In the trained shared-private model the paired rows of `▁Dios` (source) and
# `▁God` (target) are equal on their first round(0.9·d) features, exactly —
# they are one variable — and differ on the private rest. Paired rows are also
# closer in cosine than in the decoder-WT model, whose rows were never tied.
# Figure 6 of the paper projects paired embeddings of both languages together.

# %%
def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


print("=== SHARED FEATURES ===")
shared_private = models["shared-private"]
dios, god = tokenizer.piece_to_id("▁Dios"), tokenizer.piece_to_id("▁God")
target_id, width = shared_private.shared_private.shared_features(dios)
source_row = np.asarray(shared_private.source_embedding.embeddings)[dios]
target_row = np.asarray(shared_private.target_embedding.embeddings)[god]
print(f"▁Dios is paired with {tokenizer.id_to_piece(target_id)!r} on {width} of {SIZE} features")
print(f"shared slice equal: {np.array_equal(source_row[:width], target_row[:width])}, "
      f"private slices equal: {np.array_equal(source_row[width:], target_row[width:])}")
lm = pairs.categories == 0
for name, model in models.items():
    source = np.asarray(model.source_embedding.embeddings)[pairs.source_ids[lm]]
    target = np.asarray(model.target_embedding.embeddings)[pairs.target_ids[lm]]
    paired = np.mean([cosine(s, t) for s, t in zip(source, target)])
    shuffled = np.mean([cosine(s, t) for s, t in zip(source, np.roll(target, 1, axis=0))])
    figure = write_pair_figure(model, pairs, os.path.join(
        RUN_DIR, f"pca_{name.replace(' ', '_')}.svg"), count=30, title=f"{name}: paired embeddings")
    print(f"[{name}] mean cosine of lm pairs {paired:.3f} (of mismatched pairs {shuffled:.3f}); "
          f"Figure 6: {figure}")

# %% [markdown]
# ## 5. Save and reload
# The model's config holds the pairs themselves (not the path), so the `.keras`
# file loads anywhere; the shared slices are still one variable after loading.

# %%
path = os.path.join(RUN_DIR, "shared_private.keras")
shared_private.save(path)
reloaded = keras.saving.load_model(path, safe_mode=True)
inputs = {"source_ids": np.array([[50, 60, 70, data.EOS_ID]], "int32"),
          "target_in": np.array([[data.BOS_ID, 80, 90]], "int32")}
print("=== SAVED MODEL ===")
print(f"same logits after reloading: "
      f"{np.allclose(reloaded(inputs), shared_private(inputs), atol=1e-5)}; "
      f"embedding parameters {parameter_report(reloaded).groups['embeddings']:,}")
