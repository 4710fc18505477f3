"""Word alignment links of a tokenized parallel corpus, for pairing its vocabularies.

A link `(i, j)` says that target token `j` of a sentence pair is aligned to its
source token `i`. :func:`tf_outheads.data.build_word_pairs` counts them into the
alignment probability `A(y|x)` of its lexical-meaning pairs (Liu et al. 2019,
§2.1.1). They come from eflomal's forward alignments (:func:`eflomal_links`;
Östling & Tiedemann 2016, the successor of the fast_align the paper used) or from a
trained model's attention (:func:`attention_links`: "the intrinsic attention
mechanism").
"""

import os
import tempfile

import numpy as np

from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.word_pair_table import PairingError

__all__ = ["attention_links", "eflomal_links"]


def eflomal_links(source_sentences, target_sentences, n_iterations=None, log=None):
    """Forward alignment links of tokenized sentence pairs, from eflomal.

    `n_iterations` is eflomal's (`None`: chosen from the corpus size). A pair
    with an empty side gets no links.

    Returns:
        list (one per sentence) of lists of `(i, j)`: target position `j`
        aligned to source position `i`.
    """
    try:
        import eflomal
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(
            "Aligning a corpus needs eflomal (GPL-3.0, an optional dependency): "
            "pip install 'tf_outheads[align]'; or pass `links=` from another aligner."
        ) from error
    # eflomal reads whitespace-separated tokens (and lower-cases them itself).
    source_lines = [" ".join(s) for s in source_sentences]
    target_lines = [" ".join(t) for t in target_sentences]
    aligner = eflomal.Aligner(n_iterations=n_iterations)
    with tempfile.TemporaryDirectory() as directory:
        forward = os.path.join(directory, "forward.links")
        if log:
            log(f"Aligning {len(source_lines):,} sentence pairs with eflomal ...")
        aligner.align(source_lines, target_lines, links_filename_fwd=forward, quiet=True)
        with open(forward, encoding="utf-8") as f:
            lines = f.read().splitlines()
    if len(lines) != len(source_lines):
        raise PairingError(f"eflomal returned {len(lines)} link lines for "
                           f"{len(source_lines)} sentence pairs.")
    return [[tuple(int(p) for p in link.split("-")) for link in line.split()]
            for line in lines]


def attention_links(model, source_ids, target_ids, batch_size=64):
    """Alignment links from a trained model's attention (§2.1.1: "the intrinsic
    attention mechanism"): each target position is linked to the source
    position it attended to most when the model predicted it.

    Args:
        model: a `Seq2SeqModel` with `source_alignments(source_ids, target_in)`.
        source_ids: list of int sequences, as the model's encoder takes them
            (without padding; an EOS the pipeline appends is the caller's choice).
        target_ids: list of int sequences: the target tokens, without BOS/EOS.
        batch_size: int. Sentences per forward pass. Defaults to 64.

    Returns:
        list of lists of `(i, j)` position links, one list per sentence, with
        `i` in the given source sequence and `j` in the target sequence.
    """
    if len(source_ids) != len(target_ids):
        raise PairingError(f"{len(source_ids)} source and {len(target_ids)} target "
                           "sentences: they must be pairs.")
    links = []
    for start in range(0, len(source_ids), batch_size):
        sources = source_ids[start:start + batch_size]
        targets = target_ids[start:start + batch_size]
        s_len = max(1, max(len(s) for s in sources))
        t_len = max(1, max(len(t) for t in targets))
        source = np.full((len(sources), s_len), PAD_ID, np.int32)
        target_in = np.full((len(targets), t_len), PAD_ID, np.int32)
        for row, (s, t) in enumerate(zip(sources, targets)):
            source[row, :len(s)] = s
            target_in[row, :len(t)] = [BOS_ID] + list(t[:-1]) if len(t) else []
        weights = np.asarray(model.source_alignments(source, target_in))  # (B, T, S)
        for row, (s, t) in enumerate(zip(sources, targets)):
            best = weights[row, :len(t), :len(s)].argmax(axis=-1) if len(s) else []
            links.append([(int(i), j) for j, i in enumerate(best)])
    return links
