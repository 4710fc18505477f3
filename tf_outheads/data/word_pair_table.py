"""The table of source–target word pairs for shared-private embeddings: `WordPairs`.

Each pair joins a source vocabulary id and a target vocabulary id, with its
category (Liu et al. 2019, §2.1: lexical meaning `lm`, same word form `wf`,
unrelated `ur`) and, for `lm` pairs, the alignment probability `A(y|x)` that made
it. :class:`WordPairs` checks that no id is paired twice, says how many pairs each
category has (the paper's Table 5), follows a vocabulary update (`remapped`), and
is written to and read from a TSV file (`save` / `load`). The pairs are made by
:func:`tf_outheads.data.build_word_pairs` (:mod:`tf_outheads.data.word_pairs`)
and used by `tf_outheads.layers.shared_private`.
"""

import dataclasses
import os
import re

import numpy as np

from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import _read_lines

__all__ = ["CATEGORIES", "PairingError", "WordPairs"]

CATEGORIES = ("lm", "wf", "ur")
"""Pair categories in pairing order: lexical meaning, word form, unrelated."""

_HEADER = ("category", "source_id", "target_id", "source_token", "target_token",
           "probability")


class PairingError(ValueError):
    """Bad input to the pairing builder or a malformed pairs file."""


@dataclasses.dataclass(frozen=True)
class WordPairs:
    """Source–target vocabulary pairs with their categories.

    Attributes:
        source_ids: int array `(n,)`. Source vocabulary ids.
        target_ids: int array `(n,)`. The target id paired with each.
        categories: int array `(n,)`. Index into `CATEGORIES`
            (0 = `lm`, 1 = `wf`, 2 = `ur`).
        source_vocabulary_size: int.
        target_vocabulary_size: int. Entries of either vocabulary that
            appear in no pair keep fully private embedding rows.
        probabilities: float array `(n,)`. `A(y|x)` of `lm` pairs, `NaN`
            for the others. Defaults to all `NaN`.
        source_tokens: tuple of str or `None`. The source vocabulary, for
            reports and the pairs file. Defaults to `None`.
        target_tokens: tuple of str or `None`. Defaults to `None`.

    Raises:
        PairingError: ids out of range, a source or target id in two pairs,
            an unknown category, or arrays of different lengths.
    """

    source_ids: np.ndarray
    target_ids: np.ndarray
    categories: np.ndarray
    source_vocabulary_size: int
    target_vocabulary_size: int
    probabilities: np.ndarray = None
    source_tokens: tuple = None
    target_tokens: tuple = None

    def __post_init__(self):
        def ints(name):
            value = np.asarray(getattr(self, name))
            if value.ndim != 1 or (value.size and not np.issubdtype(value.dtype, np.integer)):
                raise PairingError(f"`{name}` must be a 1-D array of ints. Received: "
                                   f"dtype={value.dtype}, shape={value.shape}")
            object.__setattr__(self, name, value.astype(np.int64))

        for name in ("source_ids", "target_ids", "categories"):
            ints(name)
        for name in ("source_vocabulary_size", "target_vocabulary_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise PairingError(f"`{name}` must be a positive int. Received: {name}={value!r}")
            object.__setattr__(self, name, int(value))
        n = len(self.source_ids)
        probabilities = (np.full(n, np.nan) if self.probabilities is None
                         else np.asarray(self.probabilities, dtype=np.float64))
        object.__setattr__(self, "probabilities", probabilities)
        lengths = {len(self.target_ids), len(self.categories), len(probabilities)}
        if lengths != {n}:
            raise PairingError(
                "`source_ids`, `target_ids`, `categories` and `probabilities` must have "
                f"the same length. Received lengths {n}, {len(self.target_ids)}, "
                f"{len(self.categories)}, {len(probabilities)}")
        for name, ids, size in (("source_ids", self.source_ids, self.source_vocabulary_size),
                                ("target_ids", self.target_ids, self.target_vocabulary_size)):
            bad = np.flatnonzero((ids < 0) | (ids >= size))
            if bad.size:
                raise PairingError(f"`{name}` must lie in [0, {size}). Received: {name}"
                                   f"[{bad[0]}]={ids[bad[0]]}")
            unique, counts = np.unique(ids, return_counts=True)
            if (counts > 1).any():
                raise PairingError(f"Each id may be paired once; `{name}` repeats id "
                                   f"{unique[counts > 1][0]}.")
        bad = np.flatnonzero((self.categories < 0) | (self.categories >= len(CATEGORIES)))
        if bad.size:
            raise PairingError(f"`categories` must be in [0, {len(CATEGORIES)}) "
                               f"({', '.join(CATEGORIES)}). Received: categories[{bad[0]}]="
                               f"{self.categories[bad[0]]}")
        for name, tokens, size in (("source_tokens", self.source_tokens, self.source_vocabulary_size),
                                   ("target_tokens", self.target_tokens, self.target_vocabulary_size)):
            if tokens is not None:
                tokens = tuple(str(t) for t in tokens)
                if len(tokens) != size:
                    raise PairingError(f"`{name}` must have one entry per id ({size}). "
                                       f"Received: {len(tokens)} entries")
                object.__setattr__(self, name, tokens)

    def __len__(self):
        return len(self.source_ids)

    @classmethod
    def identity(cls, vocabulary_size, tokens=None):
        """Every id paired with itself as `wf`: one joint vocabulary, for
        three-way weight tying (`sharing_ratios=(1, 1, 1)`)."""
        ids = np.arange(vocabulary_size)
        return cls(ids, ids, np.full(vocabulary_size, CATEGORIES.index("wf")), vocabulary_size,
                   vocabulary_size, source_tokens=tokens, target_tokens=tokens)

    def remapped(self, source_ids, target_ids, source_tokens, target_tokens):
        """These pairs in other vocabularies (a vocabulary update).

        Args:
            source_ids, target_ids: int arrays `(|V_new|,)` of each side: the old id of
                each new piece, −1 for a piece the old vocabulary lacks
                (`tf_outheads.data.piece_map`).
            source_tokens, target_tokens: the new vocabularies.

        Returns:
            `WordPairs` over the new ids: the pairs whose two pieces are both kept,
            with their categories and probabilities; the others are dropped.

        Example:

        ```python
        child_pairs = pairs.remapped(piece_map(old_src, new_src), piece_map(old_tgt, new_tgt),
                                     new_src.vocabulary(), new_tgt.vocabulary())
        ```
        """
        new_ids = []
        for name, mapping, size in (("source_ids", source_ids, self.source_vocabulary_size),
                                    ("target_ids", target_ids, self.target_vocabulary_size)):
            mapping = np.asarray(mapping)
            if mapping.ndim != 1 or mapping.max(initial=-1) >= size:
                raise PairingError(f"`{name}` must give an old id (< {size}) or -1 for each "
                                   f"new piece. Received: shape {mapping.shape}, largest "
                                   f"{mapping.max(initial=-1)}")
            new_of_old = np.full(size, -1)
            new_of_old[mapping[mapping >= 0]] = np.flatnonzero(mapping >= 0)
            new_ids.append(new_of_old)
        source, target = new_ids[0][self.source_ids], new_ids[1][self.target_ids]
        keep = (source >= 0) & (target >= 0)
        return WordPairs(source[keep], target[keep], self.categories[keep],
                         len(source_tokens), len(target_tokens),
                         probabilities=self.probabilities[keep],
                         source_tokens=tuple(source_tokens), target_tokens=tuple(target_tokens))

    def counts(self):
        """Pairs per category: `{"lm": n, "wf": n, "ur": n}` (the paper's Table 5)."""
        return {name: int(np.sum(self.categories == index))
                for index, name in enumerate(CATEGORIES)}

    def statistics(self):
        """Counts per category, unpaired entries of each side and vocabulary sizes."""
        return {
            **self.counts(),
            "unpaired_source": self.source_vocabulary_size - len(self),
            "unpaired_target": self.target_vocabulary_size - len(self),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
        }

    def __str__(self):
        stats = self.statistics()
        return (f"WordPairs: lm {stats['lm']:,} / wf {stats['wf']:,} / ur {stats['ur']:,} "
                f"(unpaired: {stats['unpaired_source']:,} source, "
                f"{stats['unpaired_target']:,} target; |V| = "
                f"{self.source_vocabulary_size:,} / {self.target_vocabulary_size:,})")

    def target_of(self, source_token):
        """`(target_token, category)` paired with `source_token`, or `None`."""
        if self.source_tokens is None or self.target_tokens is None:
            raise PairingError("These pairs carry no vocabularies (`source_tokens`/`target_tokens`).")
        try:
            source_id = self.source_tokens.index(source_token)
        except ValueError:
            raise PairingError(f"{source_token!r} is not in the source vocabulary.") from None
        where = np.flatnonzero(self.source_ids == source_id)
        if not where.size:
            return None
        index = where[0]
        return self.target_tokens[self.target_ids[index]], CATEGORIES[self.categories[index]]

    # -- (de)serialization ---------------------------------------------
    def get_config(self):
        """JSON-serializable dict (ids and categories as lists; no tokens)."""
        return {
            "source_ids": self.source_ids.tolist(),
            "target_ids": self.target_ids.tolist(),
            "categories": self.categories.tolist(),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def save(self, path):
        """Writes a TSV: a `#` line per statistic, a header, one pair per line."""
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for key, value in self.statistics().items():
                f.write(f"# {key}\t{value}\n")
            f.write("\t".join(_HEADER) + "\n")
            for s, t, c, p in zip(self.source_ids, self.target_ids, self.categories,
                                  self.probabilities):
                source_token = self.source_tokens[s] if self.source_tokens else ""
                target_token = self.target_tokens[t] if self.target_tokens else ""
                probability = "" if np.isnan(p) else f"{p:.6g}"
                f.write(f"{CATEGORIES[c]}\t{s}\t{t}\t{_escape(source_token)}\t"
                        f"{_escape(target_token)}\t{probability}\n")
        os.replace(tmp, path)  # A crash mid-write leaves the old file whole.
        return path

    @classmethod
    def load(cls, path):
        """Reads a file written by :meth:`save`. The tokens of paired entries
        come back in `source_tokens`/`target_tokens`; unpaired entries read as "".

        Raises:
            PairingError: naming the file and line of a malformed entry or of
                invalid UTF-8, or a file without the vocabulary sizes. A
                leading byte order mark is skipped.
        """
        path = os.fspath(path)
        stats, rows = {}, []
        header_seen = False
        try:
            # Lines split on "\n" alone (a "\r" inside a token stays in it),
            # a leading byte order mark skipped, bad UTF-8 named by line.
            for number, line in _read_lines(path):
                if line.startswith("# "):
                    key, _, value = line[2:].partition("\t")
                    stats[key] = value
                    continue
                fields = line.split("\t")
                if not header_seen:
                    if tuple(fields) != _HEADER:
                        raise PairingError(f"{path}:{number}: expected the header "
                                           f"{'|'.join(_HEADER)}. Received: {line[:80]!r}")
                    header_seen = True
                    continue
                if len(fields) != len(_HEADER) or fields[0] not in CATEGORIES:
                    raise PairingError(f"{path}:{number}: expected {len(_HEADER)} tab-separated "
                                       f"fields starting with one of {CATEGORIES}. "
                                       f"Received: {line[:80]!r}")
                try:
                    rows.append((CATEGORIES.index(fields[0]), int(fields[1]), int(fields[2]),
                                 float(fields[5]) if fields[5] else np.nan,
                                 _unescape(fields[3]), _unescape(fields[4])))
                except ValueError as error:
                    raise PairingError(f"{path}:{number}: {error}. Received: {line[:80]!r}") from None
        except CorpusError as error:
            raise PairingError(str(error)) from error.__cause__
        try:
            sizes = {key: int(stats[key]) for key in ("source_vocabulary_size",
                                                      "target_vocabulary_size")}
        except (KeyError, ValueError):
            raise PairingError(f"{path}: the '# source_vocabulary_size' and "
                               "'# target_vocabulary_size' lines are missing or not ints.") from None
        if not rows:
            raise PairingError(f"{path}: no pairs.")
        columns = list(zip(*rows))
        categories, source_ids, target_ids, probabilities = (np.array(c) for c in columns[:4])
        tokens = {}
        if all(columns[4]) and all(columns[5]):
            # Tokens of paired entries only; unpaired entries read as "".
            for side, ids, names in (("source", source_ids, columns[4]),
                                     ("target", target_ids, columns[5])):
                size = sizes[f"{side}_vocabulary_size"]
                table = [""] * size
                for token_id, token in zip(ids, names):
                    if 0 <= token_id < size:
                        table[token_id] = token
                tokens[f"{side}_tokens"] = table
        try:
            return cls(source_ids, target_ids, categories, probabilities=probabilities,
                       **sizes, **tokens)
        except PairingError as error:
            raise PairingError(f"{path}: {error}") from None


def _escape(token):
    return token.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _unescape(field):
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), field)
