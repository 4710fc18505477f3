"""The contracts that let every head plug into every model, decoder and export path.

`typing.Protocol`s, checked by `tests/conformance/` for every registered head and
every registered model, so that a new head or model is held to the same checks
(docs/architecture.md, "The output-head contract" and "Decoding").
"""

import typing


@typing.runtime_checkable
class OutputHead(typing.Protocol):
    """A model's output layer (`tf_outheads.layers`).

    - `__call__(h)`: decoder outputs `(B, T, d_h)` → what the training loss
      reads: logits `(B, T, V)` (categorical heads) or vectors `(B, T, m)`
      (continuous heads).
    - `inference_cache()`: tensors that depend only on the weights, computed
      once per decoding call (never per step).
    - `scores(h_t, cache)`: one step's decoder output `(B, d_h)` → per-word
      log-scores `(B, V)` float32; every search sees only these.
    - `vocabulary_size`: `V`.
    - `default_loss(label_smoothing=0.0)`: the loss `compile_for_translation`
      trains it with unless told otherwise (categorical heads: the masked
      cross-entropy; the continuous head: the vMF loss).

    A head class registers its short name with `tf_outheads.registry.register_head`.
    Categorical heads also have `logits_for(h, candidate_ids)` (sampled
    softmax); continuous heads `target_vectors()` (their loss's table).
    """

    vocabulary_size: int

    def __call__(self, h, *args, **kwargs):
        ...

    def inference_cache(self):
        ...

    def scores(self, h_t, cache):
        ...

    def default_loss(self, label_smoothing=0.0):
        ...


@typing.runtime_checkable
class AuxiliaryHead(typing.Protocol):
    """A head trained next to the output layer and unused at inference (ReWE).

    - `__call__(h, logits=None)`: its prediction from the decoder outputs (the
      output layer's logits when `needs_logits`).
    - `target_vectors()`: the `(V, m)` table its loss compares with.
    - `default_loss()`, `default_weight`: what `compile_for_translation`
      trains it with unless told otherwise.
    """

    needs_logits: bool
    default_weight: float

    def __call__(self, h, *args, **kwargs):
        ...

    def target_vectors(self):
        ...

    def default_loss(self):
        ...


@typing.runtime_checkable
class DecodingModel(typing.Protocol):
    """What greedy search, beam search, `Translator` and the export need of a model.

    - `initial_decoding_state(source_ids, max_length=None)`: a dict of tensors,
      each with leading dimension `B`. With `max_length` (under XLA), for that
      many steps, every entry keeping its shape; without it, an entry may grow
      at each step along an axis it leaves unknown to the graph (a cache).
    - `make_step_fn(cache=None)` → `step_fn(ids_t (B,), state) → (log-scores
      (B, V) float32, new state of the same structure and shapes, but for the
      sizes the initial state left unknown)`.
    - `source_alignments(source_ids, target_in)` → attention `(B, T, S)`
      float32 (`<unk>` replacement).
    - `head`: the output layer (`OutputHead`); `auxiliary_heads()`: `{name:
      AuxiliaryHead}`, trained only.
    - for vocabulary selection by a model's own prediction (a
      `tf_outheads.decoding.NeuralSelection`), also `selection_probabilities`
      and `initial_decoding_state(..., return_memory=True)` (`Seq2SeqModel`).
    """

    head: typing.Any

    def initial_decoding_state(self, source_ids, max_length=None):
        ...

    def make_step_fn(self, cache=None):
        ...

    def source_alignments(self, source_ids, target_in):
        ...

    def auxiliary_heads(self):
        ...
