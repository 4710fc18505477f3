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
vocabularies (:func:`split_words`, :func:`word_vocabulary`) alike. What it
returns, :class:`WordPairs` and its file, is :mod:`tf_outheads.data.word_pair_table`;
the links, :mod:`tf_outheads.data.alignment_links`.
"""

import collections
import re

import numpy as np

# The links' and the table's own modules; all imported here too, where users
# have always found them.
from tf_outheads.data.alignment_links import eflomal_links
from tf_outheads.data.word_pair_table import CATEGORIES
from tf_outheads.data.word_pair_table import PairingError
from tf_outheads.data.word_pair_table import WordPairs

SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")


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
    pairs = _pairs_in_order(source_vocabulary, target_vocabulary, source_index, target_index,
                            source_freq, target_freq, probabilities, threshold, unk_token,
                            special_tokens)

    source_ids, target_ids, categories, probs = (np.array(c) for c in zip(*pairs))
    result = WordPairs(source_ids, target_ids, categories, len(source_vocabulary),
                       len(target_vocabulary), probabilities=probs,
                       source_tokens=source_vocabulary, target_tokens=target_vocabulary)
    if log:
        log(str(result))
    return result


def _pairs_in_order(source_vocabulary, target_vocabulary, source_index, target_index,
                    source_freq, target_freq, probabilities, threshold, unk_token,
                    special_tokens):
    """`[(source id, target id, category index, probability)]`, paired in the paper's
    order (module docstring): the special tokens with themselves, then (1) lexical
    meaning by `A(y|x)` (`probabilities`, above `threshold`), (2) same word form,
    (3) unrelated by frequency rank (`source_freq`, `target_freq`: corpus counts)."""
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
    return pairs


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


__all__ = ["build_word_pairs", "split_words", "word_pairs_from_tokenizers",
           "word_vocabulary"]
