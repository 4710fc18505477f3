"""FLOPs of a zoo model's matrix products, counted from its shapes, and this machine's
float32 matmul speed: the GFLOP/s a benchmark achieves and their share of the peak
(`peer_opennmt.py`: ours and OpenNMT-py's, training and decoding).

Takes a run's model section (`RunConfig.model`, e.g. `preset_config(name).model`);
imports TensorFlow only in `matmul_peak_gflops`.
"""

import time


def forward_flops(model, vocab_size, source_length, target_length):
    """Forward FLOPs of the model's matrix products, 2 per multiply-add, split as
    `{"per_source": ..., "per_target": ...}`: per source token (encoder, attention keys)
    and per target token (decoder, attention over `source_length` positions, the output
    layer over `vocab_size` words), for sentences of the given mean lengths. Element-wise
    work (activations, softmax, layer norms) is not counted: the FLOP/s are those of the
    matrix products, the work both systems must do whatever their overheads."""
    if model.model_type == "lstm":
        embed, hidden = model.embedding_dim, model.hidden_dim
        source_embed = model.source_embedding_dim or embed
        enc_layers = model.encoder_layers or model.num_layers
        dec_layers = model.decoder_layers or model.num_layers
        directions = 2 if model.bidirectional_encoder else 1
        unit = hidden // directions
        per_source = directions * 2 * (source_embed + unit) * 4 * unit
        per_source += (enc_layers - 1) * directions * 2 * (hidden + unit) * 4 * unit
        if model.attention_score == "general":
            per_source += 2 * hidden * hidden  # keys W_a · memory
        fed = hidden if model.input_feeding else 0
        per_target = 2 * (embed + fed + hidden) * 4 * hidden
        per_target += (dec_layers - 1) * 2 * (2 * hidden) * 4 * hidden
        per_target += 2 * 2 * source_length * hidden  # scores and context
        per_target += 2 * (2 * hidden) * hidden  # h̃ = tanh(W_c [c; h])
        per_target += 2 * hidden * vocab_size
        return {"per_source": per_source, "per_target": per_target}
    if model.model_type == "transformer":
        d, ffn = model.model_dim, model.ffn_dim
        layer_ffn = 2 * 2 * d * ffn
        per_source = model.encoder_layers * (2 * 4 * d * d + layer_ffn
                                             + 2 * 2 * source_length * d)
        # Cross-attention keys and values: once per source token and decoder layer.
        per_source += model.decoder_layers * 2 * 2 * d * d
        per_target = model.decoder_layers * (
            2 * 4 * d * d + 2 * 2 * target_length * d  # self-attention
            + 2 * 2 * d * d + 2 * 2 * source_length * d  # cross: queries, output, weights
            + layer_ffn)
        per_target += 2 * d * vocab_size
        return {"per_source": per_source, "per_target": per_target}
    raise ValueError(f"no FLOP count for model_type={model.model_type!r}")


def train_flops_per_target_token(model, vocab_size, lengths):
    """Training FLOPs (forward and backward: 3 × forward) per target token, from the
    training pairs' mean lengths `lengths = {"source": ..., "target": ...}` (pieces + EOS)."""
    flops = forward_flops(model, vocab_size, lengths["source"], lengths["target"])
    return 3 * (flops["per_target"] + flops["per_source"] * lengths["source"]
                / lengths["target"])


def decode_flops(model, vocab_size, source_tokens, output_tokens, sentences):
    """Forward FLOPs of greedy decoding: the encoder over `source_tokens`, one decoder step
    per output token (`output_tokens`, EOS included), with the sentences' mean lengths
    for the attention terms (a step of the Transformer attends to the half of the output
    written so far, on average)."""
    source_length = source_tokens / sentences
    flops = forward_flops(model, vocab_size, source_length, output_tokens / sentences / 2)
    return flops["per_source"] * source_tokens + flops["per_target"] * output_tokens


def matmul_peak_gflops(size=2048, repeats=10):
    """This machine's float32 matmul speed in GFLOP/s (TensorFlow/oneDNN, `size`² by
    `size`², best of `repeats`): the "peak" the achieved FLOP/s are measured against."""
    import tensorflow as tf

    a = tf.random.normal([size, size])
    product = tf.function(lambda x: tf.reduce_sum(tf.matmul(x, x)))
    product(a).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product(a).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


PEER_PEAK = """
import sys, time, torch
size, repeats = int(sys.argv[1]), int(sys.argv[2])
a = torch.randn(size, size)
(a @ a).sum().item()
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    (a @ a).sum().item()
    best = min(best, time.perf_counter() - start)
print(2 * size ** 3 / best / 1e9)
"""


def peer_matmul_peak_gflops(python, env=None, size=2048, repeats=10):
    """`matmul_peak_gflops` as the peer's PyTorch runs it (the same product, in the
    peer's `python`, with its environment `env`): each side's achieved FLOP/s are
    measured against its own library's peak, which differ (on an AMD CPU with AVX-512,
    oneDNN in TensorFlow used it and PyTorch's BLAS did not: 480 against 206 GFLOP/s)."""
    import subprocess

    result = subprocess.run([python, "-c", PEER_PEAK, str(size), str(repeats)], env=env,
                            check=True, capture_output=True, text=True)
    return float(result.stdout.split()[-1])


def add_flops(entry, model, vocab_size, train_lengths, peaks):
    """GFLOP/s of both sides' training and decoding, and their share of each side's own
    matmul peak (in place): `peaks` `{"ours": ..., "peer": ...}`, GFLOP/s."""
    per_token = train_flops_per_target_token(model, vocab_size, train_lengths)
    decode = entry["decode"]
    gflops = {}
    for side in ("ours", "peer"):
        train = entry[side]["train_tokens_per_second"] * per_token / 1e9
        work = decode_flops(model, vocab_size, decode["source_tokens"],
                            decode[f"{side}_output_tokens"], decode["sentences"])
        decoding = work / decode[f"{side}_seconds"] / 1e9
        gflops[side] = {"train": train, "decode": decoding,
                        "train_percent_of_peak": 100 * train / peaks[side],
                        "decode_percent_of_peak": 100 * decoding / peaks[side]}
    entry["gflops"] = gflops
    entry["train_flops_per_target_token"] = per_token
