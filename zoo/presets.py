"""Named training set-ups: the papers' configurations and CPU-sized variants.

A preset is a dict of four sections: `data` (corpus, cleaning, tokenizer,
batching), `model` (keyword arguments of the zoo model), `train` (optimizer,
loss, schedule) and `decode`. `get_preset(name, overrides)` returns a deep copy
with dotted overrides applied (`{"train.max_minutes": 5}`).
"""

import copy
import os

EMBEDDED_CORPUS = os.path.join(os.path.dirname(__file__), "data", "bible-es-en.tsv.gz")

# The SWORD export of the WEB appends the last heading it saw to later verses:
# Psalm 145's superscription to 3,616 verses from Psalm 145:21 to Malachi, the
# Psalm 151 note to 7,201 New Testament verses (dev and test included). They
# are not part of the verses; keeping them inflates BLEU (the model learns to
# emit them). Counted and stripped from the target column of every split.
BIBLE_WEB_ARTIFACTS = (
    "A praise psalm by David.",
    "This Psalm is a genuine one of David, though extra, composed when he fought "
    "in single combat with Goliath.",
)

_BIBLE_DATA = {
    "corpus": EMBEDDED_CORPUS,
    "source_column": "es",
    "target_column": "en_web",
    "reference_columns": ["en_kjv"],
    "strip_target_suffixes": list(BIBLE_WEB_ARTIFACTS),
    "max_length": 100,          # whitespace tokens, either side
    "max_length_ratio": 2.5,
    "vocab_size": 8000,
    "joint_vocabulary": True,
    "tokenizer_type": "bpe",
    "tokenizer_seed": None,     # SentencePiece's seed; None: train.seed
    "batch_tokens": 4096,       # padded tokens per batch (source and target each)
    # Length buckets 1 token wide, carried over passes: batches as full as
    # OpenNMT-py's sorted-pool ones (tf_outheads.data.pipeline; issue 17).
    "bucket_width": 1,
    "max_sequence_length": 160,  # subword tokens incl. EOS/BOS; longer pairs are dropped
    # Target word vectors of a continuous head: None, or {"dim", "epochs", "path"}
    # (a .vec/.bin file; without one, FastText is trained on the target side).
    "target_vectors": None,
}

_PAPPAS_LSTM = {
    # Pappas et al. 2018 §4.1: 2-layer LSTM 512, Luong attention + input feeding,
    # dropout 0.3, uniform(−0.1, 0.1), Adam 1e-3, clip 5, batch 96 sentences.
    # Their code is OpenNMT-py's: global norm clipping, PyTorch's Adam ε 1e-8.
    "model": {
        "embedding_dim": 512,
        "hidden_dim": 512,
        "num_layers": 2,
        "bidirectional_encoder": False,
        "dropout": 0.3,
        "input_feeding": True,
        "attention_score": "general",
        "uniform_init": 0.1,
        "head": "softmax",
    },
    "train": {
        "model_type": "lstm",
        "learning_rate": 1e-3,
        "clipnorm": None,
        "global_clipnorm": 5.0,
        "adam_epsilon": 1e-8,
        "label_smoothing": 0.0,
        "steps_per_epoch": 2000,
        "epochs": 30,
        "max_steps": None,
        "max_minutes": None,
        "patience": 5,
        "seed": 1234,
        # SampledSoftmaxLoss options ({"fraction": 0.25}, ...) or None: full softmax.
        "sampled_softmax": None,
        # A loss by name for heads that need their own ({"class_name": "vmf",
        # "config": {...}}); None: cross-entropy (or the sampled softmax above).
        "loss": None,
    },
    "decode": {"batch_size": 64, "max_length_ratio": 1.5, "max_length_offset": 10,
                   "beam_size": 1, "length_penalty": 0.0},
}

PRESETS = {
    # The default, a 10-minute budget on 2 CPU cores. OpenNMT-py's LSTM recipe at
    # CPU size (shared/peers/opennmt-py-lstm-cpu.yaml): 1-layer biLSTM / LSTM 256,
    # "general" attention with input feeding, dropout 0.1, U(±0.1) initialisation,
    # Adam 5e-3 (ε 1e-8), global norm clipping 5, label smoothing 0.1, 2,048-token
    # batches, 4K joint BPE. OpenNMT-py's, so that the tied and untied baselines can
    # be checked against OpenNMT-py itself (benchmarks/README.md, "Peer: OpenNMT-py").
    "lstm-cpu": {
        "description": "CPU-sized attentional LSTM with the joint head, d_j = 512 (default)",
        "data": dict(_BIBLE_DATA, vocab_size=4000, batch_tokens=2048),
        "model": {
            "embedding_dim": 256,
            "hidden_dim": 256,
            "num_layers": 1,
            "bidirectional_encoder": True,
            "dropout": 0.1,
            "input_feeding": True,
            "attention_score": "general",
            "uniform_init": 0.1,
            "head": {"class_name": "joint", "config": {"joint_dim": 512}},
        },
        "train": {
            "model_type": "lstm",
            "learning_rate": 5e-3,
            "clipnorm": None,
            "global_clipnorm": 5.0,
            "adam_epsilon": 1e-8,
            "label_smoothing": 0.1,
            "steps_per_epoch": 300,
            "epochs": 100,
            "max_steps": None,
            "max_minutes": 10.0,
            "patience": 4,
            "seed": 1234,
            "sampled_softmax": None,
            "loss": None,
        },
        "decode": {"batch_size": 128, "max_length_ratio": 1.5, "max_length_offset": 10,
                   "beam_size": 1, "length_penalty": 0.0},
    },
    # A smoke run: 40 steps of a 64-unit model (tests and tutorials).
    "lstm-tiny": {
        "description": "Tiny attentional LSTM for tests and tutorials",
        "data": dict(_BIBLE_DATA, vocab_size=1000, batch_tokens=2048, max_length=40),
        "model": {
            "embedding_dim": 64,
            "hidden_dim": 64,
            "num_layers": 1,
            "bidirectional_encoder": False,
            "dropout": 0.1,
            "input_feeding": True,
            "attention_score": "general",
            "uniform_init": 0.1,
            "head": "tied",
        },
        "train": {
            "model_type": "lstm",
            "learning_rate": 3e-3,
            "clipnorm": None,
            "global_clipnorm": 5.0,
            "adam_epsilon": 1e-8,
            "label_smoothing": 0.1,
            "steps_per_epoch": 20,
            "epochs": 2,
            "max_steps": None,
            "max_minutes": None,
            "patience": 100,
            "seed": 1234,
            "sampled_softmax": None,
            "loss": None,
        },
        "decode": {"batch_size": 64, "max_length_ratio": 1.5, "max_length_offset": 10,
                   "beam_size": 1, "length_penalty": 0.0},
    },
    "lstm-pappas": {
        "description": "Pappas et al. 2018 NMT baseline: 2-layer LSTM 512, untied softmax",
        "data": dict(_BIBLE_DATA, vocab_size=32000, batch_tokens=4096),
        **copy.deepcopy(_PAPPAS_LSTM),
    },
    "lstm-pappas-tied": {
        "description": "Pappas et al. 2018 NMT-tied: 2-layer LSTM 512, weight tying (Eq. 5)",
        "data": dict(_BIBLE_DATA, vocab_size=32000, batch_tokens=4096),
        **copy.deepcopy(_PAPPAS_LSTM),
    },
}
PRESETS["lstm-pappas-tied"]["model"]["head"] = "tied"

# Output layers of Pappas et al. 2018 as head specs (Table 3, Eq. 6/7a/7b/15), and
# the paper's name for each (preset descriptions).
PAPPAS_HEADS = {
    "softmax": "softmax",                                                 # NMT
    "tied": "tied",                                                       # NMT-tied, Eq. 5
    "joint-512": {"class_name": "joint", "config": {"joint_dim": 512}},    # Eq. 15
    "joint-2048": {"class_name": "joint", "config": {"joint_dim": 2048}},
    "joint-4096": {"class_name": "joint", "config": {"joint_dim": 4096}},
    "bilinear": {"class_name": "joint", "config": {                       # Eq. 6: E·W·h
        "output_structure": False, "activation": "linear", "projection_bias": False}},
    "output-structure": {"class_name": "joint", "config": {               # Eq. 7a: σ(E·W)·h
        "context_structure": False}},
    "context-structure": {"class_name": "joint", "config": {              # Eq. 7b: E·σ(W·h)
        "output_structure": False}},
}
_PAPPAS_HEAD_NAMES = {
    "softmax": "NMT, untied softmax",
    "tied": "NMT-tied, weight tying (Eq. 5)",
    "joint-512": "NMT-joint, d_j = 512 (Eq. 15)",
    "joint-2048": "NMT-joint, d_j = 2048 (Eq. 15)",
    "joint-4096": "NMT-joint, d_j = 4096 (Eq. 15)",
    "bilinear": "bilinear ablation E·W·h (Eq. 6)",
    "output-structure": "output structure only, σ(E·W)·h (Eq. 7a)",
    "context-structure": "context structure only, E·σ(W·h) (Eq. 7b)",
}


def _pappas_preset(head_name, num_layers=2):
    preset = {
        "description": (f"Pappas et al. 2018: {num_layers}-layer LSTM 512, "
                        f"{_PAPPAS_HEAD_NAMES[head_name]}"),
        "data": dict(_BIBLE_DATA, vocab_size=32000, batch_tokens=4096),
        **copy.deepcopy(_PAPPAS_LSTM),
    }
    preset["model"]["head"] = copy.deepcopy(PAPPAS_HEADS[head_name])
    preset["model"]["num_layers"] = num_layers
    return preset


# Tables 2/3 (2 layers) and Table 5 (1, 3, 4 layers; NMT, NMT-tied, NMT-joint 512).
for _head in ("joint-512", "joint-2048", "joint-4096", "bilinear", "output-structure",
              "context-structure"):
    PRESETS[f"lstm-pappas-{_head}"] = _pappas_preset(_head)
for _layers in (1, 3, 4):
    for _head in ("softmax", "tied", "joint-512"):
        PRESETS[f"lstm-pappas-{_head}-{_layers}layer"] = _pappas_preset(_head, _layers)

# CPU-sized variants of the default, to compare heads in minutes (same data,
# steps and seed as lstm-cpu; only the head differs). lstm-cpu-joint-512 is
# lstm-cpu under the name of its head, for sweeps over d_j.
for _name, _head, _description in (
        ("tied", "tied",
         "weight tying (Press & Wolf 2017), the baseline checked against OpenNMT-py"),
        ("softmax", "softmax", "an untied softmax, the other baseline"),
        ("joint", {"class_name": "joint", "config": {"joint_dim": 256}},
         "the joint head, d_j = 256"),
        ("joint-512", {"class_name": "joint", "config": {"joint_dim": 512}},
         "the joint head, d_j = 512 (the same model as lstm-cpu)"),
        ("joint-1024", {"class_name": "joint", "config": {"joint_dim": 1024}},
         "the joint head, d_j = 1024")):
    PRESETS[f"lstm-cpu-{_name}"] = copy.deepcopy(PRESETS["lstm-cpu"])
    PRESETS[f"lstm-cpu-{_name}"]["description"] = f"lstm-cpu with {_description}"
    PRESETS[f"lstm-cpu-{_name}"]["model"]["head"] = _head

# Sampling-based training (Pappas et al. 2018 §3.2, Table 4): |V| ≈ 128K BPE with
# 25 % (Table 2) or 5 % (Table 4) of the vocabulary per batch, every target of
# the batch kept. Needs a corpus large enough for 128K pieces (--corpus);
# the Bible corpus tops out near 32K per language.
for _head in ("softmax", "tied", "joint-512", "joint-2048", "joint-4096"):
    for _percent in (25, 5):
        _preset = _pappas_preset(_head)
        _preset["description"] = (f"Pappas et al. 2018: 2-layer LSTM 512, "
                                  f"{_PAPPAS_HEAD_NAMES[_head]}, |V| 128K, "
                                  f"{_percent}% sampled softmax")
        _preset["data"]["vocab_size"] = 128000
        _preset["train"]["sampled_softmax"] = {"fraction": _percent / 100, "mode": "batch"}
        PRESETS[f"lstm-pappas-{_head}-128k-sampled{_percent}"] = _preset

# A large vocabulary on CPU: lstm-cpu with 32K separate vocabularies (the most
# the Bible corpus gives per language), full vs 5 % sampled softmax.
PRESETS["lstm-cpu-32k"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-32k"]["description"] = (
    "lstm-cpu, tied head, 32K separate vocabularies, full softmax")
PRESETS["lstm-cpu-32k"]["data"].update(vocab_size=32000, joint_vocabulary=False)
PRESETS["lstm-cpu-32k"]["model"]["head"] = "tied"
PRESETS["lstm-cpu-32k-sampled5"] = copy.deepcopy(PRESETS["lstm-cpu-32k"])
PRESETS["lstm-cpu-32k-sampled5"]["description"] = (
    "lstm-cpu-32k trained with a 5% sampled softmax (Pappas et al. 2018 §3.2)")
PRESETS["lstm-cpu-32k-sampled5"]["train"]["sampled_softmax"] = {"fraction": 0.05, "mode": "batch"}

# Continuous outputs (Kumar & Tsvetkov 2019; VIVO report Table 3): the head
# predicts a 300-d target word vector, trained with the vMF NLL (λ1 = 0.02 norm
# penalty, λ2 = 0.1 dot scaling); FastText vectors are trained on the target side
# with the run's own SentencePiece model (nothing can be downloaded). Separate
# vocabularies: with a joint one, Spanish-only pieces would have no vector.
_VMF_LOSS = {"class_name": "vmf", "config": {"norm_penalty": 0.02, "dot_scale": 0.1}}
PRESETS["lstm-cpu-vmf"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-vmf"]["description"] = (
    "lstm-cpu with a continuous output head and the vMF loss (Kumar & Tsvetkov 2019)")
PRESETS["lstm-cpu-vmf"]["data"].update(
    joint_vocabulary=False, target_vectors={"dim": 300, "epochs": 5, "path": None})
PRESETS["lstm-cpu-vmf"]["model"]["head"] = {"class_name": "continuous",
                                            "config": {"output_dim": 300}}
PRESETS["lstm-cpu-vmf"]["train"]["loss"] = copy.deepcopy(_VMF_LOSS)
PRESETS["lstm-cpu-vmf"]["train"]["label_smoothing"] = 0.0
PRESETS["lstm-cpu-vmf-softmax"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-vmf-softmax"]["description"] = (
    "lstm-cpu-vmf's softmax baseline: same separate vocabularies, tied softmax")
PRESETS["lstm-cpu-vmf-softmax"]["data"].update(joint_vocabulary=False)
PRESETS["lstm-cpu-vmf-softmax"]["model"]["head"] = "tied"
PRESETS["lstm-cpu-vmf"]["decode"]["replace_unk"] = True  # VIVO Table 3: "Unk replacement"

# The VIVO report's Table 3 (Kumar & Tsvetkov 2019's settings), both columns:
# 1 encoder and 2 decoder layers, hidden 1024, source embedding 512, target
# embedding 300 (the FastText size), 50K vocabularies per side, sentences up to
# 100 tokens, Adam (5e-4 vMF, 2e-4 softmax), input feeding, weight tying for the
# softmax, unknown-word replacement. Not in Table 3, so ours: a bidirectional
# encoder (as in ReWE's set-up), dropout 0.3, global norm clipping 5, batches of 4096
# tokens, BPE pieces instead of words. The Bible corpus has fewer than 50K
# pieces per language: give a larger corpus with --corpus.
_VIVO = {
    "data": dict(_BIBLE_DATA, vocab_size=50000, joint_vocabulary=False, batch_tokens=4096,
                 target_vectors={"dim": 300, "epochs": 5, "path": None}),
    "model": {
        "embedding_dim": 300,
        "source_embedding_dim": 512,
        "hidden_dim": 1024,
        "num_layers": 2,
        "encoder_layers": 1,
        "decoder_layers": 2,
        "bidirectional_encoder": True,
        "dropout": 0.3,
        "input_feeding": True,
        "attention_score": "general",
        "uniform_init": 0.1,
        "head": {"class_name": "continuous", "config": {"output_dim": 300}},
    },
    "train": dict(copy.deepcopy(_PAPPAS_LSTM["train"]), learning_rate=5e-4,
                  loss=copy.deepcopy(_VMF_LOSS)),
    "decode": dict(_PAPPAS_LSTM["decode"], replace_unk=True),
}
PRESETS["lstm-vivo-vmf"] = dict(copy.deepcopy(_VIVO), description=(
    "VIVO report Table 3, vMF column: 1+2-layer LSTM 1024, vMF loss (λ1 0.02, λ2 0.1)"))
PRESETS["lstm-vivo-softmax"] = dict(copy.deepcopy(_VIVO), description=(
    "VIVO report Table 3, softmax column: 1+2-layer LSTM 1024, tied softmax"))
PRESETS["lstm-vivo-softmax"]["data"]["target_vectors"] = None
PRESETS["lstm-vivo-softmax"]["model"]["head"] = "tied"
PRESETS["lstm-vivo-softmax"]["train"].update(learning_rate=2e-4, loss=None)

# -- Transformer (Vaswani et al. 2017) ------------------------------------------------------
# The base model of the paper (§5.3–5.4, Table 3 "base") as Liu et al. 2019 trained it for
# the shared-private embeddings (§4.1: 6+6 layers, d_model 512, d_ff 2048, 8 heads,
# dropout 0.1 on residuals, attention and feed-forward, label smoothing 0.1, Adam
# β1 0.9 / β2 0.98, inverse-square-root warm-up over 4,000 steps, ~25K source and 25K
# target tokens per batch, beam 4). ε = 1e-9 as Vaswani et al. (Liu et al. write 1e-8).
# Decoding: beam 4, α = 0.6, outputs up to source length + 50 (Vaswani et al. §6.1).
# Not reproduced: 37K shared BPE (the Bible corpus gives ~32K joint pieces), tied
# embeddings (head "softmax" here: the heads are what the zoo compares), the 100K steps
# on 8 GPUs (here a step cap, early stopping on dev BLEU), checkpoint averaging.
_TRANSFORMER_BASE_MODEL = {
    "model_dim": 512,
    "ffn_dim": 2048,
    "num_heads": 8,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "dropout": 0.1,
    "attention_dropout": 0.1,
    "ffn_dropout": 0.1,
    "norm": "post",
    "head": "softmax",
    "shared_private": None,
}
_TRANSFORMER_TRAIN = {
    "model_type": "transformer",
    "learning_rate": None,  # the schedule gives it: d^-0.5 · min(n^-0.5, n · warmup^-1.5)
    "learning_rate_schedule": {"name": "inverse_sqrt", "warmup_steps": 4000, "scale": 1.0},
    "adam_beta_2": 0.98,
    "adam_epsilon": 1e-9,
    "clipnorm": None,  # the paper does not clip
    "label_smoothing": 0.1,
    "steps_per_epoch": 2000,
    "epochs": 50,
    "max_steps": 100000,
    "max_minutes": None,
    "patience": 10,
    "seed": 1234,
    "sampled_softmax": None,
    "loss": None,
}
PRESETS["transformer-base"] = {
    "description": "Vaswani et al. 2017 Transformer base: 6+6 layers, 512/2048, 8 heads, "
                   "inverse-sqrt warm-up 4000, Adam β2 0.98, label smoothing 0.1",
    "data": dict(_BIBLE_DATA, vocab_size=32000, batch_tokens=25000),
    "model": dict(_TRANSFORMER_BASE_MODEL),
    "train": copy.deepcopy(_TRANSFORMER_TRAIN),
    "decode": {"batch_size": 64, "max_length_ratio": 1.0, "max_length_offset": 50,
               "beam_size": 4, "length_penalty": 0.6},
}
# CPU-sized: 3+3 layers of 256/1024 with 4 heads, a 25-minute budget on 2 cores
# (lstm-cpu's data section with 4096-token batches). Pre-norm (Xiong et al. 2020: the
# pre-LN Transformer trains without the long warm-up that post-norm needs).
PRESETS["transformer-cpu"] = {
    "description": "CPU-sized Transformer: pre-norm, 3+3 layers, 256/1024, 4 heads, "
                   "warm-up 800, a 25-minute budget on 2 cores",
    "data": dict(_BIBLE_DATA, vocab_size=4000, batch_tokens=4096),
    "model": dict(_TRANSFORMER_BASE_MODEL, model_dim=256, ffn_dim=1024, num_heads=4,
                  encoder_layers=3, decoder_layers=3, norm="pre"),
    "train": dict(copy.deepcopy(_TRANSFORMER_TRAIN), steps_per_epoch=300, epochs=100,
                  max_steps=None, max_minutes=25.0, patience=4,
                  learning_rate_schedule={"name": "inverse_sqrt", "warmup_steps": 800,
                                          "scale": 1.0}),
    "decode": {"batch_size": 128, "max_length_ratio": 1.5, "max_length_offset": 10,
               "beam_size": 1, "length_penalty": 0.0},
}

# Shared-private bilingual embeddings (Liu et al. 2019) and the weight tying they
# generalise (their Tables 1 and 4), on the paper's Transformer base and on the CPU
# size: "vanilla" is transformer-base / transformer-cpu (three tables); decoder WT ties
# the output layer to the target embedding (Press & Wolf 2017); three-way WT uses one
# table for source, target input and target output (every piece of the joint
# vocabulary paired with itself, λ = 1); shared-private pairs pieces by eflomal
# alignments of the training split (A(y|x) > 0.05), then same form, then frequency
# rank, λ = (0.9, 0.7, 0.5), output tied to the target embedding. `pairs: "auto"`
# writes <run>/word_pairs.tsv (reused by later runs in the same directory) and the
# run ends with <run>/paired_embeddings_pca.svg (their Figure 6). Not reproduced:
# their 30K separate vocabularies per language (the Bible corpus gives ~32K joint
# pieces: three-way tying needs a joint vocabulary, and all four share one).
_SHARED_PRIVATE = {"pairs": "auto", "threshold": 0.05, "sharing_ratios": [0.9, 0.7, 0.5]}
_THREE_WAY = {"pairs": "identity", "sharing_ratios": [1.0, 1.0, 1.0]}
_SHARED_PRIVATE_NAMES = {
    "decoder-wt": "decoder weight tying, output layer = target embedding",
    "three-way": "three-way weight tying, one table for source, target and output",
    "shared-private": "shared-private embeddings, λ = 0.9/0.7/0.5, output tied",
}
for _size in ("base", "cpu"):
    for _name, _head, _embeddings in (("decoder-wt", "tied", None),
                                      ("three-way", "tied", _THREE_WAY),
                                      ("shared-private", "tied", _SHARED_PRIVATE)):
        _preset = copy.deepcopy(PRESETS[f"transformer-{_size}"])
        _preset["description"] = (f"transformer-{_size} with "
                                  f"{_SHARED_PRIVATE_NAMES[_name]} (Liu et al. 2019)")
        _preset["model"].update(head=_head, shared_private=copy.deepcopy(_embeddings))
        PRESETS[f"transformer-{_size}-{_name}"] = _preset
# The attentional LSTM with shared-private embeddings under its joint head (the
# target side of the shared-private layer is the joint head's input embedding E).
PRESETS["lstm-cpu-shared-private"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-shared-private"]["description"] = (
    "lstm-cpu with shared-private embeddings (Liu et al. 2019) under the joint head")
PRESETS["lstm-cpu-shared-private"]["model"]["shared_private"] = copy.deepcopy(_SHARED_PRIVATE)

DEFAULT_PRESET = "lstm-cpu"


def get_preset(name, overrides=None):
    """A deep copy of preset `name` with dotted overrides applied.

    Args:
        name: str, a key of `PRESETS`.
        overrides: dict `"section.key" → value`, e.g. `{"train.max_minutes": 2}`.

    Raises:
        ValueError: unknown preset, or an override naming an unknown key.
    """
    if name not in PRESETS:
        raise ValueError(f"Unknown preset. Available: {sorted(PRESETS)}. Received: preset={name!r}")
    return apply_overrides(PRESETS[name], overrides, name)


def apply_overrides(preset, overrides, name):
    """A deep copy of the preset dict `preset` (named `name` in errors) with dotted
    overrides applied; an override must name a key the preset has (see `get_preset`)."""
    preset = copy.deepcopy(preset)
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in ("data", "model", "train", "decode") or key not in preset[section]:
            known = [f"{s}.{k}" for s in ("data", "model", "train", "decode") for k in preset[s]]
            raise ValueError(
                f"Unknown setting {dotted!r} for preset {name!r}; known: {', '.join(known)}. "
                f"Received: {dotted}={value!r}"
            )
        preset[section][key] = value
    return preset


# -- ReWE (Jauregi Unanue et al. 2019) ---------------------------------------------------
# A ReWE head (Linear(d_h→200) → ReLU → Linear(200→300), Eq. 5) regresses the gold
# word's embedding next to the categorical head; loss NLL + 20·(1 − cos) (Eq. 7,
# CEL, λ = 20: every main result, Table 2). Targets: the paper regresses toward
# *pretrained* fastText vectors (§2, §3.2; in their code the decoder's input
# embedding, initialised from those vectors, supplementary A), so these presets
# regress a frozen 300-d FastText table trained on the run's own target side
# (nothing can be downloaded; `data.target_vectors.path` takes a .vec file).
# `LSTMSeq2Seq` cannot initialise its input embeddings from the vectors, so they
# start random as in the plain model of each pair. Inference ignores the head.
_REWE_TARGET_VECTORS = {"dim": 300, "epochs": 5, "path": None}
_REWE_HEAD = {"hidden_dim": 200, "embedding_dim": 300, "targets": "pretrained"}
_REWE_LOSS = {"weight": 20.0, "distance": "cosine"}

# CPU pair: lstm-cpu (the plain model, unchanged) and lstm-cpu + ReWE, same data,
# steps and seed.
PRESETS["lstm-cpu-rewe"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-rewe"]["description"] = (
    "lstm-cpu + ReWE (λ = 20, cosine) regressing frozen 300-d FastText target vectors, "
    "the paper's main setting; plain pair: lstm-cpu")
PRESETS["lstm-cpu-rewe"]["data"]["target_vectors"] = dict(_REWE_TARGET_VECTORS)
PRESETS["lstm-cpu-rewe"]["model"]["rewe"] = dict(_REWE_HEAD)
PRESETS["lstm-cpu-rewe"]["train"]["rewe"] = dict(_REWE_LOSS)

# The paper's set-up (supplementary A, after Denkowski & Neubig 2017): 1-layer
# BiLSTM encoder, LSTM decoder, hidden 1024, embeddings 300, sentences up to 100
# tokens, Adam 2e-4, batches of 40 sentences, evaluation every 25,000 sentences
# (here every 600 steps ≈ 24,000 verses: TensorBoard records epoch values only at
# multiples of its update_freq, 50), beam 5; BPE on both languages together (their 32,000 merges for
# en-fr; the Bible corpus gives about 32K pieces). Not reproduced, and not
# faked: Bahdanau (additive) attention (ours is Luong "general" with input
# feeding, as OpenNMT-py's default), fastText-initialised input embeddings, the
# 50K word vocabularies with unknown-word replacement, the restart / halving
# learning-rate schedule (here: early stopping on dev BLEU), batches counted in
# sentences (here ~2048 padded tokens ≈ 40 verses). Dropout 0.3, uniform(±0.1)
# initialisation, Adam ε 1e-8 and global norm clipping 5 are OpenNMT-py's
# defaults (the paper does not give them).
_REWE_PAPER = {
    "data": dict(_BIBLE_DATA, vocab_size=32000, joint_vocabulary=True, batch_tokens=2048,
                 max_length=100, target_vectors=dict(_REWE_TARGET_VECTORS)),
    "model": {
        "embedding_dim": 300,
        "hidden_dim": 1024,
        "num_layers": 1,
        "bidirectional_encoder": True,
        "dropout": 0.3,
        "input_feeding": True,
        "attention_score": "general",
        "uniform_init": 0.1,
        "head": "softmax",
        "rewe": dict(_REWE_HEAD),
    },
    "train": dict(copy.deepcopy(_PAPPAS_LSTM["train"]), learning_rate=2e-4,
                  steps_per_epoch=600, epochs=100, patience=10, rewe=dict(_REWE_LOSS)),
    "decode": dict(_PAPPAS_LSTM["decode"], beam_size=5),
}
PRESETS["lstm-rewe-paper"] = dict(copy.deepcopy(_REWE_PAPER), description=(
    "ReWE paper (Jauregi Unanue et al. 2019): BiLSTM/LSTM 1024, embeddings 300, "
    "ReWE λ = 20 cosine to frozen 300-d FastText vectors"))
PRESETS["lstm-rewe-paper-plain"] = dict(copy.deepcopy(_REWE_PAPER), description=(
    "ReWE paper's baseline: lstm-rewe-paper without the ReWE head"))
PRESETS["lstm-rewe-paper-plain"]["data"]["target_vectors"] = None
PRESETS["lstm-rewe-paper-plain"]["model"]["rewe"] = None
PRESETS["lstm-rewe-paper-plain"]["train"]["rewe"] = None

# Supplementary C, on the CPU model. Contrastive A: no ReWE network; the ReWE
# loss compares e(argmax p_j), the predicted word's input embedding, with the
# gold word's (the input embedding, stop-gradient), λ = 0.2 (their best, Table 7).
PRESETS["lstm-cpu-rewe-contrastive-a"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-rewe-contrastive-a"]["description"] = (
    "ReWE contrastive A: loss between e(argmax p) and e(y) (input embedding), λ = 0.2")
PRESETS["lstm-cpu-rewe-contrastive-a"]["model"]["rewe"] = {
    "targets": "input_embedding", "prediction": "predicted_word"}
PRESETS["lstm-cpu-rewe-contrastive-a"]["train"]["rewe"] = {"weight": 0.2, "distance": "cosine"}
# Contrastive B: ReWE alone, decoded by nearest neighbour — a continuous head
# whose map is the ReWE network (200 ReLU units → 300), cosine loss to the frozen
# FastText vectors, cosine scores. Separate vocabularies, as lstm-cpu-vmf: with a
# joint one, Spanish-only pieces would be targets without an English vector.
PRESETS["lstm-cpu-rewe-contrastive-b"] = copy.deepcopy(PRESETS["lstm-cpu"])
PRESETS["lstm-cpu-rewe-contrastive-b"]["description"] = (
    "ReWE contrastive B: ReWE network alone (cosine loss), nearest-neighbour decoding")
PRESETS["lstm-cpu-rewe-contrastive-b"]["data"].update(
    joint_vocabulary=False, target_vectors=dict(_REWE_TARGET_VECTORS))
PRESETS["lstm-cpu-rewe-contrastive-b"]["model"]["head"] = {
    "class_name": "continuous",
    "config": {"output_dim": 300, "hidden_units": 200, "activation": "relu", "scoring": "cosine"}}
PRESETS["lstm-cpu-rewe-contrastive-b"]["train"].update(
    loss={"class_name": "cosine", "config": {}}, label_smoothing=0.0)

# -- Distributed and fault-tolerant training (every preset) ---------------------------
# `tf_outheads.training.fit` settings: strategy "default" | "mirrored" (local GPUs;
# num_gpus = None: all) | "multi_worker" (hosts from TF_CONFIG); precision "float32" |
# "mixed_float16" (loss scaling) | "mixed_bfloat16"; accumulation_steps global batches
# per update (batch_tokens is the global batch, split across replicas); a backup
# (weights, optimizer, data position) every backup_every_n_steps steps and at each
# epoch's end in RUN_DIR/backup, the last keep_backups kept; nonfinite "raise" |
# "skip"; average_last N: the final model averages the last N backups' weights
# (instead of the best dev-BLEU weights; N <= keep_backups).
TRAINING_DEFAULTS = {
    # Optimizer (zoo.train.build_optimizer): "adam" | "lazy_adam"; None: Keras' defaults.
    "optimizer": "adam",
    "adam_beta_2": None,
    "adam_epsilon": None,
    "global_clipnorm": None,
    "learning_rate_schedule": None,
    "strategy": "default",
    "num_gpus": None,
    "precision": "float32",
    "accumulation_steps": 1,
    "backup_every_n_steps": 200,
    "keep_backups": 3,
    "nonfinite": "raise",
    "average_last": None,
}
# Keys every preset has, so that `--set` reaches them everywhere: a ReWE head and its
# loss weight (None: none), unknown-word replacement at decoding, shared-private
# embeddings (None: separate tables).
MODEL_DEFAULTS = {"rewe": None, "shared_private": None}
DECODE_DEFAULTS = {"replace_unk": False}
for _preset in PRESETS.values():
    for _key, _value in TRAINING_DEFAULTS.items():
        _preset["train"].setdefault(_key, _value)
    _preset["train"].setdefault("rewe", None)
    for _key, _value in MODEL_DEFAULTS.items():
        _preset["model"].setdefault(_key, _value)
    for _key, _value in DECODE_DEFAULTS.items():
        _preset["decode"].setdefault(_key, _value)
# Vaswani et al. (2017) §6.1: base models are the average of the last 5 checkpoints.
for _name, _preset in PRESETS.items():
    if _name.startswith("transformer-base"):
        _preset["train"].update(keep_backups=5, average_last=5, backup_every_n_steps=1000)
