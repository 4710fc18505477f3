"""Stalled runs, seen and named: a run that never learned to translate measures its
recipe's failure, not its head, so a study flags it instead of averaging it in.

Two plateaus stop an attentional model. On the *unigram* plateau it predicts each
piece's frequency whatever came before; on the *language-model* plateau it predicts the
next piece from the target prefix but does not read the source (the decoder ignores the
attention). Both give a model whose dev references score about as well after the
source of another sentence as after their own. `stall_check` reads what a run left:

- **source gain** (runs scored by `runner.score_run` since issue 53): the dev
  cross-entropy of the references after mismatched sources (each paired with the source
  half the split away) minus that after their own, in nats per token. A model that
  reads its source loses far more than `MIN_SOURCE_GAIN` when the source is wrong.
- **unigram plateau**: the dev loss of history.csv at the first evaluation at or after
  `STALL_SHARE` of the run's steps against the loss of the best source-blind unigram
  predictor (`unigram_levels`, in the training loss's own units: with the run's label
  smoothing). Within `PLATEAU_MARGIN` of it, the run has not left the plateau.

Records from before the guard have neither number for the first test; they are
"not checked", never "healthy".
"""

import json
import math
import os

# A run must have left the unigram plateau by this share of its steps.
STALL_SHARE = 0.5
# "On the plateau": a dev loss within this share of the unigram predictor's (above
# (1 - PLATEAU_MARGIN) x that loss).
PLATEAU_MARGIN = 0.1
# nats per token the references must lose after a mismatched source: see `stall_check`.
MIN_SOURCE_GAIN = 1.0


def unigram_levels(pieces, vocabulary_size, label_smoothing=0.0):
    """The dev loss of the best source-blind unigram predictor of `pieces`.

    Args:
        pieces: iterable of int piece ids of the dev references (EOS included once per
            sentence, as the losses count it).
        vocabulary_size: int, the target vocabulary's size V.
        label_smoothing: float ε of the training loss.

    Returns:
        `(entropy, smoothed_loss)`: the entropy H(p) of the references' own piece
        distribution p in nats (the cross-entropy of a model that predicts p at every
        step), and the label-smoothed loss of the prediction that minimises it,
        q = (1 − ε)·p + ε/V: (1 − ε)·H(p, q) + ε·mean_v(−log q_v) (equal to H(p) for
        ε = 0). A run's dev loss is compared with the second, in its own units.
    """
    counts = {}
    total = 0
    for piece in pieces:
        counts[int(piece)] = counts.get(int(piece), 0) + 1
        total += 1
    if total == 0:
        raise ValueError("unigram_levels needs at least one piece. Received: none")
    if not vocabulary_size >= len(counts):
        raise ValueError(f"vocabulary_size must cover the {len(counts)} distinct pieces. "
                         f"Received: vocabulary_size={vocabulary_size}")
    eps = float(label_smoothing)
    entropy = -sum(c / total * math.log(c / total) for c in counts.values())
    if eps == 0:
        return entropy, entropy
    floor = eps / vocabulary_size  # q of a piece the references never use
    cross = -sum(c / total * math.log((1 - eps) * c / total + floor)
                 for c in counts.values())
    uniform = (sum(-math.log((1 - eps) * c / total + floor) for c in counts.values())
               - (vocabulary_size - len(counts)) * math.log(floor)) / vocabulary_size
    return entropy, (1 - eps) * cross + eps * uniform


def stall_check(run_dir):
    """Whether a finished run stalled: `{"stalled": bool or None, "reasons": [...],
    "source_gain": nats or None, "plateau": {...} or None}`.

    `stalled` is True when either test below fails, False when at least one test ran
    and none failed, None when neither could run (a record from before the guard).

    - Source gain (`MIN_SOURCE_GAIN`): the dev references' cross-entropy after
      mismatched sources minus after their own, from `cross_entropy.json`. The unigram
      and the language-model plateau both give ~0; a model that translates, several
      nats (measured: see benchmarks/docs/peer_opennmt.md, "Stalls").
    - Unigram plateau (`STALL_SHARE`, `PLATEAU_MARGIN`): the run's dev loss at the first
      evaluation at or after `STALL_SHARE` of its steps (`stats.dev_loss_curve`: the
      output layer's loss), against the unigram level in the same units
      (`cross_entropy.json`'s `dev.unigram_loss`, written for categorical heads
      trained with cross-entropy).
    """
    reasons, gain, plateau, ran = [], None, None, False
    path = os.path.join(run_dir, "cross_entropy.json")
    scores = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            scores = json.load(f)
    dev = (scores or {}).get("dev", {})
    # Only log-probabilities are nats (a continuous head's cosine or likelihood scoring
    # is another scale: `runner.score_run`'s `log_probabilities`).
    if (dev.get("mismatched_source_cross_entropy") is not None
            and (scores or {}).get("log_probabilities", True)):
        ran = True
        gain = dev["mismatched_source_cross_entropy"] - dev["cross_entropy"]
        if gain < MIN_SOURCE_GAIN:
            reasons.append(f"does not read its source: the dev references lose "
                           f"{gain:.2f} nats per token after mismatched sources "
                           f"(< {MIN_SOURCE_GAIN:g})")
    from tf_outheads_zoo.study.stats import dev_loss_curve

    losses = list(zip(*dev_loss_curve(run_dir)))
    if dev.get("unigram_loss") is not None and losses:
        last_step = losses[-1][0]
        step, loss = next((s, v) for s, v in losses if s >= STALL_SHARE * last_step)
        level = dev["unigram_loss"]
        plateau = {"step": step, "dev_loss": loss, "unigram_loss": level}
        ran = True
        if loss > (1 - PLATEAU_MARGIN) * level:
            reasons.append(f"on the unigram plateau at step {step:,} of {last_step:,}: "
                           f"dev loss {loss:.3f} against the unigram predictor's "
                           f"{level:.3f}")
    return {"stalled": bool(reasons) if ran else None, "reasons": reasons,
            "source_gain": gain, "plateau": plateau}


def stall_label(check):
    """A short mark for a table cell: `"stalled"`, `""` or `"not checked"`."""
    if check["stalled"] is None:
        return "not checked"
    return "stalled" if check["stalled"] else ""
