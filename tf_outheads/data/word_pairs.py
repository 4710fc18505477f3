"""Source–target word pairs for shared-private embeddings (Liu et al. 2019, §2.1).

Each source vocabulary entry is paired with at most one target entry, and each
target entry with at most one source entry, in the paper's order:

1. **lexical meaning** (`lm`, §2.1.1, Eq. 1): source words, most frequent
   first, take the unused aligned target word of highest alignment
   probability `A(y|x)`, if that probability is over `threshold` (0.05 in the
   paper's §3.1);
2. **same word form** (`wf`, §2.1.2): a still-unpaired source entry and the
   unpaired target entry written the same way, when the form occurs on both
   sides of the corpus (with a joint subword vocabulary every piece is in
   both vocabularies; a Spanish-only piece is not "the same word" as its
   never-seen English twin);
3. **unrelated** (`ur`, §2.1.3): the rest, paired by frequency rank (the
   most frequent remaining source entry with the most frequent remaining
   target entry, and so on).

Special tokens (`<pad>`, `<unk>`, `<s>`, `</s>`: ids 0–3 of this library's
tokenizers) are paired with themselves as `wf`: they are the same symbol with
the same role on both sides, and no aligner sees them.

`A(y|x)` comes from word alignments of the training corpus. By default the
corpus is aligned with eflomal (Östling & Tiedemann 2016, the successor of the
fast_align the paper used); its forward links align each target token to one
source token (or none), and `A(y|x) = c(x, y) / Σ_y' c(x, y')` normalises the
link counts of `x` — the estimate of fast_align's lexical table `t(y|x)` that
the paper thresholds. Links from any other source (e.g. a trained model's
attention: :func:`attention_links`) can be given instead.

The builder works on token strings, so it serves subword vocabularies
(SentencePiece pieces: :func:`word_pairs_from_tokenizers`) and word
vocabularies (:func:`split_words`, :func:`word_vocabulary`) alike.
"""

import collections
import dataclasses
import os
import re
import tempfile

import numpy as np

from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import _read_lines
from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.special_tokens import UNK_ID

CATEGORIES = ("lm", "wf", "ur")
"""Pair categories in pairing order: lexical meaning, word form, unrelated."""

SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
_SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
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


# -- word level ------------------------------------------------------------
_WORD = re.compile(r"\w+|[^\w\s]")


def split_words(text, lowercase=True):
    """Word-level tokens of `text`: runs of word characters and single
    punctuation marks (`"Y dijo Dios:"` → `["y", "dijo", "dios", ":"]`)."""
    return _WORD.findall(text.lower() if lowercase else text)


def word_vocabulary(sentences, max_size=None):
    """Word vocabulary of tokenized `sentences`, most frequent first, after the
    special tokens (so ids 0–3 are `<pad>`, `<unk>`, `<s>`, `</s>`).

    Args:
        sentences: iterable of lists of str.
        max_size: int or `None`. Cap on the size, special tokens included.

    Returns:
        list of str.
    """
    counts = collections.Counter(token for sentence in sentences for token in sentence)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in SPECIAL_TOKENS]
    vocabulary = list(SPECIAL_TOKENS) + words
    return vocabulary[:max_size] if max_size else vocabulary


# -- alignment -------------------------------------------------------------
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
        model: a zoo model with `source_alignments(source_ids, target_in)`.
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


# -- pairing ---------------------------------------------------------------
def _to_ids(sentences, index, side, unk_token):
    unk = index.get(unk_token)
    out = []
    for number, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            raise PairingError(f"{side} sentence {number} is a str: give token lists "
                               "(e.g. split_words(text) or the tokenizer's pieces).")
        ids = []
        for token in sentence:
            token_id = index.get(token, unk)
            if token_id is None:
                raise PairingError(
                    f"{side} sentence {number}: token {token!r} is not in the {side} "
                    f"vocabulary, which has no {unk_token!r} entry to map it to.")
            ids.append(token_id)
        out.append(ids)
    return out


def _vocabulary_index(vocabulary, side):
    vocabulary = [str(v) for v in vocabulary]
    if not vocabulary:
        raise PairingError(f"The {side} vocabulary is empty.")
    index = {}
    for token_id, token in enumerate(vocabulary):
        if token in index:
            raise PairingError(f"The {side} vocabulary lists {token!r} twice "
                               f"(ids {index[token]} and {token_id}).")
        index[token] = token_id
    return vocabulary, index


def _alignment_probabilities(source, target, links, source_size):
    """`A(y|x)` from forward links: per source id, a dict target id → probability."""
    counts = [collections.Counter() for _ in range(source_size)]
    for number, (s, t, sentence_links) in enumerate(zip(source, target, links)):
        for link in sentence_links:
            try:
                i, j = link
            except (TypeError, ValueError):
                raise PairingError(f"Links of sentence {number}: expected (source position, "
                                   f"target position) pairs. Received: {link!r}") from None
            if not (0 <= i < len(s) and 0 <= j < len(t)):
                raise PairingError(
                    f"Links of sentence {number}: link {i}-{j} is outside the sentence "
                    f"({len(s)} source, {len(t)} target tokens). Were the links made "
                    "from the same tokenization?")
            counts[s[i]][t[j]] += 1
    probabilities = []
    for row in counts:
        total = sum(row.values())
        probabilities.append({y: c / total for y, c in row.items()} if total else {})
    return probabilities


def build_word_pairs(source_sentences, target_sentences, source_vocabulary,
                     target_vocabulary, links=None, threshold=0.05, unk_token="<unk>",
                     special_tokens=SPECIAL_TOKENS, log=None):
    """Pairs source and target vocabulary entries (Liu et al. 2019, §2.1).

    See the module docstring for the order (lexical meaning → same word form
    → unrelated by frequency rank) and how `A(y|x)` is estimated.

    Args:
        source_sentences: sequence of lists of str. Tokenized source side of
            the training corpus (subword pieces or words).
        target_sentences: sequence of lists of str, one per source sentence.
        source_vocabulary: sequence of str. Entry `i` is the token of id `i`.
        target_vocabulary: sequence of str.
        links: `None` (align the corpus with eflomal), or a sequence, one per
            sentence pair, of `(i, j)` links: target token `j` aligned to
            source token `i` (e.g. from :func:`attention_links`).
        threshold: float in [0, 1). `lm` pairs need `A(y|x) > threshold`.
            Defaults to `0.05` (§3.1; Table 5 also uses 0.1 and 0.5).
        unk_token: str. Tokens missing from a vocabulary count as this entry;
            without such an entry they are an error. Defaults to `"<unk>"`.
        special_tokens: tokens paired with themselves (`wf`) when both
            vocabularies have them. Defaults to `<pad> <unk> <s> </s>`.
        log: callable or `None`. Progress messages.

    Returns:
        `WordPairs`.

    Raises:
        PairingError: an empty corpus, sides of different lengths, a token
            outside a vocabulary without `unk_token`, links outside their
            sentence, a bad threshold.

    Example:
    ```python
    from tf_outheads.data import build_word_pairs, split_words, word_vocabulary
    src = [split_words(s) for s in corpus.sources]
    tgt = [split_words(t) for t in corpus.targets]
    pairs = build_word_pairs(src, tgt, word_vocabulary(src), word_vocabulary(tgt))
    print(pairs)               # WordPairs: lm ... / wf ... / ur ...
    pairs.target_of("dios")    # ("god", "lm")
    ```
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold < 1:
        raise PairingError(f"`threshold` must be a float in [0, 1). Received: threshold={threshold!r}")
    source_sentences = list(source_sentences)
    target_sentences = list(target_sentences)
    if len(source_sentences) != len(target_sentences):
        raise PairingError(f"{len(source_sentences)} source and {len(target_sentences)} target "
                           "sentences: the corpus sides must be parallel.")
    if not any(source_sentences) or not any(target_sentences):
        raise PairingError("The corpus is empty: no tokens on one side "
                           f"({len(source_sentences)} sentence pairs given).")
    source_vocabulary, source_index = _vocabulary_index(source_vocabulary, "source")
    target_vocabulary, target_index = _vocabulary_index(target_vocabulary, "target")
    source = _to_ids(source_sentences, source_index, "source", unk_token)
    target = _to_ids(target_sentences, target_index, "target", unk_token)
    if links is None:
        links = eflomal_links(source_sentences, target_sentences, log=log)
    links = list(links)
    if len(links) != len(source):
        raise PairingError(f"{len(links)} link lists for {len(source)} sentence pairs.")

    source_freq = np.bincount([i for s in source for i in s], minlength=len(source_vocabulary))
    target_freq = np.bincount([j for t in target for j in t], minlength=len(target_vocabulary))
    probabilities = _alignment_probabilities(source, target, links, len(source_vocabulary))

    pairs = []  # (source id, target id, category, probability)
    used_source, used_target = set(), set()

    def pair(s, t, category, probability=np.nan):
        pairs.append((s, t, category, probability))
        used_source.add(s)
        used_target.add(t)

    for token in special_tokens:
        if token in source_index and token in target_index:
            pair(source_index[token], target_index[token], CATEGORIES.index("wf"))
    # Frequency order with ties broken by id, so the result is deterministic.
    by_frequency = sorted(range(len(source_vocabulary)), key=lambda i: (-source_freq[i], i))
    unk_id = source_index.get(unk_token)
    for s in by_frequency:  # (1) lexical meaning, Eq. 1
        if s in used_source or s == unk_id:
            continue
        candidates = sorted(probabilities[s].items(), key=lambda kv: (-kv[1], kv[0]))
        for t, probability in candidates:
            if probability <= threshold:
                break
            if t not in used_target and target_vocabulary[t] != unk_token:
                pair(s, t, CATEGORIES.index("lm"), probability)
                break
    for s in by_frequency:  # (2) same word form, on both sides of the corpus
        t = target_index.get(source_vocabulary[s])
        if (s not in used_source and t is not None and t not in used_target
                and source_freq[s] > 0 and target_freq[t] > 0):
            pair(s, t, CATEGORIES.index("wf"))
    rest_target = [t for t in sorted(range(len(target_vocabulary)), key=lambda j: (-target_freq[j], j))
                   if t not in used_target]
    rest_source = [s for s in by_frequency if s not in used_source]
    for s, t in zip(rest_source, rest_target):  # (3) unrelated, by frequency rank
        pair(s, t, CATEGORIES.index("ur"))

    source_ids, target_ids, categories, probs = (np.array(c) for c in zip(*pairs))
    result = WordPairs(source_ids, target_ids, categories, len(source_vocabulary),
                       len(target_vocabulary), probabilities=probs,
                       source_tokens=source_vocabulary, target_tokens=target_vocabulary)
    if log:
        log(str(result))
    return result


def word_pairs_from_tokenizers(source_texts, target_texts, source_tokenizer, target_tokenizer,
                               **kwargs):
    """:func:`build_word_pairs` at subword level: the texts are split into the
    tokenizers' SentencePiece pieces and the vocabularies are their pieces.

    Args:
        source_texts: sequence of str.
        target_texts: sequence of str.
        source_tokenizer: `SubwordTokenizer` (with a joint model, the same
            object as `target_tokenizer`).
        target_tokenizer: `SubwordTokenizer`.
        **kwargs: passed to :func:`build_word_pairs` (`links`, `threshold`, `log`).

    Returns:
        `WordPairs` over the tokenizers' ids.
    """
    return build_word_pairs(source_tokenizer.pieces(source_texts),
                            target_tokenizer.pieces(target_texts),
                            source_tokenizer.vocabulary(), target_tokenizer.vocabulary(),
                            **kwargs)


__all__ = [
    "CATEGORIES",
    "PairingError",
    "WordPairs",
    "attention_links",
    "build_word_pairs",
    "eflomal_links",
    "split_words",
    "word_pairs_from_tokenizers",
    "word_vocabulary",
]
