"""Hubness of a nearest-neighbour search: how unevenly the candidates are retrieved.

A continuous-output decoder (`tf_outheads.ContinuousOutputHead`) emits, at each
step, the target row nearest to its predicted vector. In high dimensions some
points, mostly those near the data mean, are the nearest neighbours of very many
queries (*hubs*) and others of none (*anti-hubs*) (Radovanović, Nanopoulos &
Ivanović 2010). A hub of the target table is a word the decoder outputs far too
often, whatever it should say: the Kumar study's vMF runs output "Thus" 723 times
in 1,068 dev verses whose references hold it once.

:func:`hubness` measures it with the k-occurrence `N_k(c)`, the number of
queries that have candidate `c` among their `k` nearest neighbours (by cosine),
and its skewness `S = E[(N_k − μ)³] / σ³` (Radovanović et al. 2010): about 0
for a table without hubs, large and positive with them (text word vectors give
~1–10 at k = 10).
"""

import dataclasses

import numpy as np

__all__ = ["Hubness", "hubness"]

# Queries scored per matrix product: (chunk, candidates) float32 at a time.
_CHUNK = 1024


@dataclasses.dataclass(repr=False)
class Hubness:
    """What :func:`hubness` returns.

    Args:
        k: int, the neighbourhood size.
        k_occurrence: int array `(candidates,)`, `N_k` of each candidate.
        skewness: float, the skewness of `k_occurrence` (0 when it is constant).
        anti_hub_fraction: float, the share of candidates with `N_k = 0`.
        hub_fraction: float, the share with `N_k >= 2k` (kiez's "hub occurrence").
        top: list of `(candidate index, N_k)`, the most retrieved candidates first.
        queries: int, the number of queries.
    """

    k: int
    k_occurrence: np.ndarray
    skewness: float
    anti_hub_fraction: float
    hub_fraction: float
    top: list
    queries: int

    def as_dict(self, names=None, top=10):
        """A JSON-ready summary; `names(index)` labels the top candidates."""
        label = names if names is not None else (lambda index: int(index))
        return {"k": self.k, "queries": self.queries,
                "candidates": int(self.k_occurrence.size),
                "skewness": round(self.skewness, 4),
                "anti_hub_fraction": round(self.anti_hub_fraction, 4),
                "hub_fraction": round(self.hub_fraction, 4),
                "top": [[label(index), int(count)] for index, count in self.top[:top]]}

    def __repr__(self):
        return (f"Hubness(k={self.k}, skewness={self.skewness:.3f}, "
                f"anti_hubs={self.anti_hub_fraction:.1%}, hubs={self.hub_fraction:.1%})")


def _unit_rows(name, array):
    array = np.asarray(array, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] == 0:
        raise ValueError(f"`{name}` must be a non-empty 2-D array (rows, dim). "
                         f"Received: {name} of shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` must be finite. Received: a NaN or infinite value")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.maximum(norms, 1e-12)


def hubness(candidates, queries=None, k=10, top=20, query_rows=None):
    """k-occurrence and its skewness of the cosine nearest-neighbour search.

    Args:
        candidates: float array `(N, dim)`, the searched rows (e.g. a target
            table's rows of the pieces that have a vector).
        queries: float array `(Q, dim)` or `None`. The query vectors (e.g. the
            vectors a model predicted on dev). `None`: the candidates
            themselves, each leaving itself out of its own neighbours (the
            table's intrinsic hubness).
        query_rows: int array or `None`. With `queries=None`, only these rows of
            the candidates are queries (each still leaving itself out): a
            sample that estimates a large table's skewness at a fraction of the
            cost (the search is `queries × N`). Defaults to `None` (every row).
        k: int in `[1, N)` (`[1, N]` with `queries`). Neighbours per query.
            Defaults to `10`, the usual choice.
        top: int >= 0. How many of the most retrieved candidates to list.
            Defaults to `20`.

    Returns:
        A `Hubness`.

    Raises:
        ValueError: an argument out of range, naming it.

    Example:

    ```python
    import numpy as np
    from tf_outheads.metrics import hubness
    table = np.random.default_rng(0).standard_normal((2000, 300))
    hubness(table, k=10).skewness  # small: Gaussian rows in 300-d have few hubs
    hubness(table + 3.0, k=10).skewness  # a shared offset does not change cosines much
    ```

    References:
        Radovanović, Nanopoulos & Ivanović 2010, "Hubs in Space", JMLR 11
        (the skewness of N_k as the measure of hubness).
    """
    candidates = _unit_rows("candidates", candidates)
    self_queries = queries is None
    rows = np.arange(candidates.shape[0])
    if query_rows is not None:
        if not self_queries:
            raise ValueError("`query_rows` picks queries among the candidates; give it or "
                             "`queries`, not both. Received: both")
        rows = np.asarray(query_rows)
        if (rows.ndim != 1 or rows.size == 0 or not np.issubdtype(rows.dtype, np.integer)
                or rows.min() < 0 or rows.max() >= candidates.shape[0]):
            raise ValueError(f"`query_rows` must be a non-empty 1-D array of row indices in "
                             f"[0, {candidates.shape[0]}). Received: {query_rows!r}")
    queries = candidates[rows] if self_queries else _unit_rows("queries", queries)
    if queries.shape[1] != candidates.shape[1]:
        raise ValueError(f"`queries` must have the candidates' dim {candidates.shape[1]}. "
                         f"Received: queries of shape {queries.shape}")
    limit = candidates.shape[0] - (1 if self_queries else 0)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= limit:
        raise ValueError(f"`k` must be an int in [1, {limit}] (the candidates"
                         f"{' other than the query' if self_queries else ''}). Received: k={k!r}")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 0:
        raise ValueError(f"`top` must be an int >= 0. Received: top={top!r}")
    counts = np.zeros(candidates.shape[0], dtype=np.int64)
    for start in range(0, queries.shape[0], _CHUNK):
        block = queries[start:start + _CHUNK] @ candidates.T  # (chunk, N)
        if self_queries:
            block[np.arange(block.shape[0]), rows[start:start + _CHUNK]] = -np.inf
        nearest = np.argpartition(-block, k - 1, axis=1)[:, :k]
        counts += np.bincount(nearest.ravel(), minlength=candidates.shape[0])
    mean, std = counts.mean(), counts.std()
    skewness = float(np.mean((counts - mean) ** 3) / std ** 3) if std > 0 else 0.0
    order = np.argsort(-counts, kind="stable")[:top]
    return Hubness(k=int(k), k_occurrence=counts, skewness=skewness,
                   anti_hub_fraction=float(np.mean(counts == 0)),
                   hub_fraction=float(np.mean(counts >= 2 * k)),
                   top=[(int(index), int(counts[index])) for index in order],
                   queries=int(queries.shape[0]))
