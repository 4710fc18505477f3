"""Shared-private bilingual word embeddings (Liu et al. 2019, §2.2, Eq. 2–3).

A source word `x` and the target word `y` it is paired with (by
`tf_outheads.data.build_word_pairs`) hold the *same* variable for the first
`λ_c·d` features of their embeddings, `c` the pair's category (`lm` lexical
meaning, `wf` same word form, `ur` unrelated); the other `(1 − λ_c)·d` features
are private to each language:

    E^x_c = S_c ⊕̃ P^x_c,      E^y_c = S_c ⊕̃ P^y_c               (Eq. 3)
    E^x   = E^x_lm ⊕ E^x_wf ⊕ E^x_ur  (rows put back in vocabulary order)   (Eq. 2)

with `⊕̃` column and `⊕` row concatenation. Entries in no pair (a vocabulary
larger than the other) keep a fully private row. A lookup gathers the ids'
rows from each sub-matrix (O(B·d), sparse gradients); the full table of Eq. 2
(a concatenation and one row gather) is assembled only where a whole table is
needed, e.g. by a tied output layer once per step. Either way gradients from
both sides reach the shared variables.

The layer owns the variables; `.source` and `.target` are the two embedding
layers a model uses (`input_dim`, `output_dim`, `.embeddings`, `__call__(ids)`,
like `keras.layers.Embedding`), and `.target` is what a tied or joint head
reuses as its output embedding (the paper ties the target output embedding
to the target input embedding). Special cases:

- `sharing_ratios=(0, 0, 0)`: two private tables — with a tied head this is
  decoder weight tying (Press & Wolf 2017), Table 4's first row;
- `sharing_ratios=(1, 1, 1)` with `WordPairs.identity(V)` (every word paired
  with itself, a joint vocabulary): one table for source, target input and
  target output — three-way weight tying.
"""

import numpy as np
import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.word_pair_table import CATEGORIES
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.validation import positive_int

SIDES = ("source", "target")


def shared_width(ratio, dim):
    """Shared features of a category: `λ·d` rounded half up (0.9 · 512 → 461)."""
    return int(np.floor(ratio * dim + 0.5))


def _pairs_argument(pairs):
    if isinstance(pairs, WordPairs):
        return pairs
    if isinstance(pairs, dict):
        return WordPairs.from_config(pairs)
    if isinstance(pairs, str) or hasattr(pairs, "__fspath__"):
        return WordPairs.load(pairs)
    raise ValueError("`pairs` must be a tf_outheads.data.WordPairs, its config dict or the "
                     f"path of a pairs file. Received: pairs={type(pairs).__name__}")


@export
class SharedPrivateEmbedding(keras.layers.Layer):
    """Source and target embeddings that share features per word pair (Eq. 2–3).

    Args:
        pairs: `tf_outheads.data.WordPairs`, its `get_config()` dict, or the
            path of a pairs file written by `WordPairs.save`.
        output_dim: int `d`. Embedding size of both sides.
        sharing_ratios: three floats in [0, 1]: `λ = (λ_lm, λ_wf, λ_ur)`.
            Defaults to `(0.9, 0.7, 0.5)` (the paper's best, §3.1). A category
            shares `round(λ_c·d)` features (half up).
        embeddings_initializer: initializer of every sub-matrix. Defaults to
            `"uniform"` (as `keras.layers.Embedding`).
        **kwargs: passed to `keras.layers.Layer`.

    Attributes:
        source: the source embedding layer (`input_dim = |V_src|`).
        target: the target embedding layer (`input_dim = |V_tgt|`); pass it to
            tied, joint and ReWE heads.

    Example:
    ```python
    pairs = tf_outheads.data.WordPairs.load("run/word_pairs.tsv")
    embedding = tf_outheads.SharedPrivateEmbedding(pairs, output_dim=512)
    source_vectors = embedding.source(source_ids)       # (B, S, 512)
    head = tf_outheads.TiedSoftmaxHead(embedding.target)
    ```

    Reference: Liu, Wong, Liu, Chao, Xiao & Zhu 2019, "Shared-Private
    Bilingual Word Embeddings for Neural Machine Translation", ACL.
    """

    def __init__(self, pairs, output_dim, sharing_ratios=(0.9, 0.7, 0.5),
                 embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        self.pairs = _pairs_argument(pairs)
        self.output_dim = positive_int("output_dim", output_dim)
        ratios = tuple(sharing_ratios) if not isinstance(sharing_ratios, str) else ()
        if len(ratios) != len(CATEGORIES) or not all(
                isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r <= 1
                for r in ratios):
            raise ValueError(
                f"`sharing_ratios` must be {len(CATEGORIES)} numbers in [0, 1] "
                f"(λ for {', '.join(CATEGORIES)}). Received: sharing_ratios={sharing_ratios!r}")
        self.sharing_ratios = tuple(float(r) for r in ratios)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.widths = tuple(shared_width(r, self.output_dim) for r in self.sharing_ratios)
        self.source_vocabulary_size = self.pairs.source_vocabulary_size
        self.target_vocabulary_size = self.pairs.target_vocabulary_size

        # Rows in assembled order: pairs by category (Eq. 2), then unpaired ids.
        order = np.argsort(self.pairs.categories, kind="stable")
        self._category_sizes = tuple(int(n) for n in np.bincount(
            self.pairs.categories, minlength=len(CATEGORIES)))
        self._positions = {}
        self._unpaired = {}
        for side, paired_ids, size in (
                ("source", self.pairs.source_ids[order], self.source_vocabulary_size),
                ("target", self.pairs.target_ids[order], self.target_vocabulary_size)):
            unpaired = np.setdiff1d(np.arange(size), paired_ids)
            row_ids = np.concatenate([paired_ids, unpaired])
            positions = np.empty(size, np.int32)
            positions[row_ids] = np.arange(size, dtype=np.int32)
            self._positions[side] = positions
            self._unpaired[side] = len(unpaired)
        # Not tracked as sublayers: each view tracks this layer (its weights),
        # and a cycle would make `weights` recurse.
        object.__setattr__(self, "_views", {
            side: SharedPrivateEmbeddingSide(self, side, dtype=self.dtype_policy,
                                             name=f"{self.name}_{side}")
            for side in SIDES})

    def __dir__(self):
        # Keras saving walks `dir()` of every layer and, when loading, follows
        # a cycle forever (it marks a layer visited only after its children).
        # The sides point at this layer; do not point back at them.
        return [name for name in super().__dir__() if name not in ("source", "target", "_views")]

    @property
    def source(self):
        return self._views["source"]

    @property
    def target(self):
        return self._views["target"]

    def _initializer(self):
        """A fresh copy of the initializer for each sub-matrix: a Keras random
        initializer draws the same values at every call, so sub-matrices of
        one shape would start equal (an integer seed is offset per copy)."""
        config = keras.initializers.serialize(self.embeddings_initializer)
        inner = config.get("config") if isinstance(config, dict) else None
        if not isinstance(inner, dict) or "seed" not in inner:
            return self.embeddings_initializer
        seed = getattr(self.embeddings_initializer, "_init_seed", None)
        self._copies = getattr(self, "_copies", 0) + 1
        if isinstance(seed, int):
            seed += self._copies
        return keras.initializers.deserialize({**config, "config": {**inner, "seed": seed}})

    def _add(self, name, rows, columns):
        if rows == 0 or columns == 0:
            return None
        return self.add_weight(name=name, shape=(rows, columns),
                               initializer=self._initializer(), trainable=True)

    def build(self, input_shape=None):
        if self.built:  # e.g. already built by deserialization (build_config)
            return
        d = self.output_dim
        self.shared, self.private = {}, {side: {} for side in SIDES}
        for category, n, k in zip(CATEGORIES, self._category_sizes, self.widths):
            self.shared[category] = self._add(f"shared_{category}", n, k)
            for side in SIDES:
                self.private[side][category] = self._add(f"{side}_private_{category}", n, d - k)
        self.unpaired = {side: self._add(f"{side}_unpaired", self._unpaired[side], d)
                         for side in SIDES}
        self.built = True
        for view in self._views.values():
            view.built = True

    def _blocks(self, side):
        """`(parts, rows)` of each row block in assembled order (Eq. 2): the
        column parts (Eq. 3) of the lm, wf and ur pairs, then the unpaired rows."""
        if side not in SIDES:
            raise ValueError(f"`side` must be one of {SIDES}. Received: side={side!r}")
        if not self.built:
            self.build()
        blocks = []
        for category, rows in zip(CATEGORIES, self._category_sizes):
            parts = [p for p in (self.shared[category], self.private[side][category])
                     if p is not None]
            if parts:
                blocks.append((parts, rows))
        if self.unpaired[side] is not None:
            blocks.append(([self.unpaired[side]], self._unpaired[side]))
        return blocks

    def table(self, side):
        """The assembled `(|V_side|, d)` embedding table of `"source"` or `"target"`."""
        rows = [parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=1)
                for parts, _ in self._blocks(side)]
        rows = rows[0] if len(rows) == 1 else ops.concatenate(rows, axis=0)
        return ops.take(rows, self._positions[side], axis=0)

    def lookup(self, side, ids):
        """Embedding rows of `ids` `(...)` → `(..., d)`, without assembling the
        table: one gather per sub-matrix of the ids' rows, so a decoding step
        costs O(B·d), not O(|V|·d), and the gradients stay sparse."""
        positions = ops.take(self._positions[side], ops.cast(ids, "int32"), axis=0)
        output, offset = None, 0
        for parts, rows in self._blocks(side):
            local = ops.clip(positions - offset, 0, rows - 1)
            gathered = [ops.take(part, local, axis=0) for part in parts]
            vectors = gathered[0] if len(gathered) == 1 else ops.concatenate(gathered, axis=-1)
            if output is None:
                output = vectors
            else:
                inside = ops.logical_and(positions >= offset, positions < offset + rows)
                output = ops.where(ops.expand_dims(inside, -1), vectors, output)
            offset += rows
        return output

    def call(self, source_ids, target_ids):
        """`(source vectors, target vectors)` of two id tensors."""
        return self.source(source_ids), self.target(target_ids)

    def set_rows(self, rows):
        """Writes whole embedding rows into the sub-matrices they are assembled from.

        Args:
            rows: `{side: (ids, vectors)}`, `vectors` `(n, d)` the rows of `ids` in
                the assembled table (`table(side)`). A pair's shared columns (Eq. 3)
                become the mean of the rows given for its two sides; rows not given
                keep their values.

        A vocabulary update writes the parent's rows of the pieces it keeps
        (`tf_outheads.models.weight_transfer.transfer_weights`).
        """
        if not self.built:
            self.build()
        given = {side: {int(i): np.asarray(v) for i, v in zip(*rows[side])}
                 for side in SIDES if side in rows}
        order = np.argsort(self.pairs.categories, kind="stable")
        paired = {"source": self.pairs.source_ids[order], "target": self.pairs.target_ids[order]}
        offset = 0
        for category, n, k in zip(CATEGORIES, self._category_sizes, self.widths):
            shared = self.shared[category]
            shared_rows = None if shared is None else np.array(shared.numpy())
            private = {side: self.private[side][category] for side in SIDES}
            private_rows = {side: None if v is None else np.array(v.numpy())
                            for side, v in private.items()}
            for j in range(n):
                vectors = {side: given.get(side, {}).get(int(paired[side][offset + j]))
                           for side in SIDES}
                known = [v for v in vectors.values() if v is not None]
                if known and shared_rows is not None:
                    shared_rows[j] = np.mean([v[:k] for v in known], axis=0)
                for side, vector in vectors.items():
                    if vector is not None and private_rows[side] is not None:
                        private_rows[side][j] = vector[k:]
            for variable, values in ((shared, shared_rows),
                                     *((private[s], private_rows[s]) for s in SIDES)):
                if variable is not None:
                    variable.assign(values)
            offset += n
        for side in SIDES:
            unpaired = self.unpaired[side]
            if unpaired is None or side not in given:
                continue
            size = getattr(self, f"{side}_vocabulary_size")
            ids = np.setdiff1d(np.arange(size), paired[side])
            values = np.array(unpaired.numpy())
            for j, piece in enumerate(ids):
                if int(piece) in given[side]:
                    values[j] = given[side][int(piece)]
            unpaired.assign(values)

    def parameter_count(self):
        """`{"parameters", "vanilla", "shared"}`: this layer's parameters, the
        two private tables it replaces (`(|V_src| + |V_tgt|)·d`), and the
        features the pairs share (`Σ_c n_c · round(λ_c·d)`)."""
        shared = sum(n * k for n, k in zip(self._category_sizes, self.widths))
        vanilla = (self.source_vocabulary_size + self.target_vocabulary_size) * self.output_dim
        return {"parameters": vanilla - shared, "vanilla": vanilla, "shared": shared}

    def shared_features(self, source_id):
        """`(target id, shared width)` of `source_id`'s pair, or `None` if unpaired."""
        where = np.flatnonzero(self.pairs.source_ids == int(source_id))
        if not where.size:
            return None
        index = where[0]
        return int(self.pairs.target_ids[index]), self.widths[self.pairs.categories[index]]

    def get_config(self):
        config = super().get_config()
        config.update({
            "pairs": self.pairs.get_config(),
            "output_dim": self.output_dim,
            "sharing_ratios": list(self.sharing_ratios),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        })
        return config


@export
class SharedPrivateEmbeddingSide(keras.layers.Layer):
    """One side (`"source"` or `"target"`) of a `SharedPrivateEmbedding`: an
    embedding layer whose table is assembled from the shared and private
    sub-matrices. Made by `SharedPrivateEmbedding`; use `.source` / `.target`.

    Its weights are those of the whole shared-private layer (it tracks it), so
    a model that holds only this side still trains and saves the variables.
    """

    def __init__(self, owner, side, **kwargs):
        super().__init__(**kwargs)
        if isinstance(owner, dict):
            owner = keras.saving.deserialize_keras_object(owner)
        if side not in SIDES:
            raise ValueError(f"`side` must be one of {SIDES}. Received: side={side!r}")
        self.owner = owner
        self.side = side
        self.input_dim = (owner.source_vocabulary_size if side == "source"
                          else owner.target_vocabulary_size)
        self.output_dim = owner.output_dim

    def build(self, input_shape=None):
        if not self.owner.built:
            self.owner.build()
        self.built = True

    @property
    def embeddings(self):
        """The assembled `(input_dim, output_dim)` table (a tensor, not a variable)."""
        return self.owner.table(self.side)

    def call(self, ids):
        return ops.cast(self.owner.lookup(self.side, ids), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({"owner": keras.saving.serialize_keras_object(self.owner),
                       "side": self.side})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        owner = config.pop("owner")
        if isinstance(owner, dict):
            owner = keras.saving.deserialize_keras_object(owner)
        return owner._views[config["side"]]


def shared_private_argument(spec, source_vocabulary_size, target_vocabulary_size, dim,
                            embeddings_initializer="uniform", dtype=None):
    """A model's `shared_private=` argument as a built `SharedPrivateEmbedding`.

    Args:
        spec: a `SharedPrivateEmbedding`, or a dict with `"pairs"` (a
            `WordPairs`, its config or a pairs file path) and optionally
            `"sharing_ratios"` — the model supplies the size and initializer.
        source_vocabulary_size, target_vocabulary_size: the model's; the pairs
            must have been built for these vocabularies.
        dim: int. The model's embedding size (one for both sides).

    Raises:
        ValueError: an unknown key, or pairs of other vocabulary sizes or
            an embedding of another size than the model's.
    """
    if isinstance(spec, SharedPrivateEmbedding):
        layer = spec
    elif isinstance(spec, dict):
        if spec.get("pairs") in ("auto", "identity"):
            raise ValueError(
                f"`shared_private.pairs = {spec['pairs']!r}` names pairs still to be built "
                "from a corpus and its tokenizers; a model needs the pairs themselves: "
                "tf_outheads.data.build_word_pairs(...) or WordPairs.identity(V).")
        unknown = set(spec) - {"pairs", "sharing_ratios"}
        if unknown or "pairs" not in spec:
            raise ValueError(
                "`shared_private` must be a SharedPrivateEmbedding or a dict with "
                "'pairs' and optionally 'sharing_ratios'. "
                f"Received keys: {sorted(spec)}")
        layer = SharedPrivateEmbedding(
            spec["pairs"], dim, sharing_ratios=spec.get("sharing_ratios", (0.9, 0.7, 0.5)),
            embeddings_initializer=embeddings_initializer, dtype=dtype, name="shared_private")
    else:
        raise ValueError("`shared_private` must be None, a SharedPrivateEmbedding or a dict "
                         f"with 'pairs'. Received: {type(spec).__name__}")
    expected = (source_vocabulary_size, target_vocabulary_size, dim)
    found = (layer.source_vocabulary_size, layer.target_vocabulary_size, layer.output_dim)
    if found != expected:
        raise ValueError(
            "The shared-private embedding does not fit the model: (|V_src|, |V_tgt|, d) = "
            f"{found} for a model of {expected}. Were the pairs built with this "
            "model's tokenizers?")
    layer.build()
    return layer


def shared_private_to_spec(layer):
    """The model config entry of a shared-private embedding (pairs inline, so a
    saved model loads without the pairs file)."""
    return {"pairs": layer.pairs.get_config(), "sharing_ratios": list(layer.sharing_ratios)}


__all__ = [
    "SharedPrivateEmbedding",
    "SharedPrivateEmbeddingSide",
    "shared_private_argument",
    "shared_private_to_spec",
    "shared_width",
]
