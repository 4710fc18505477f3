"""Parallel corpora: readers with clear errors, and counted cleaning filters.

A corpus is read whole into a :class:`ParallelCorpus` (source sentences, target
sentences, extra reference translations and an id per pair). Readers never skip
or truncate anything silently: a malformed line stops reading with a
:class:`CorpusError` that says ``path:LINE: what is wrong`` and what was
expected. Dropping pairs is the job of :func:`clean`, which counts what each
filter removed.
"""

import dataclasses
import gzip
import os
import zlib

__all__ = [
    "CorpusError",
    "ParallelCorpus",
    "CleaningReport",
    "read_tsv",
    "read_parallel_files",
    "clean",
    "strip_suffixes",
]


class CorpusError(ValueError):
    """A corpus file cannot be read as asked.

    The message names the file and, where it applies, the 1-based line number
    (``path:LINE: what is wrong``), then what was expected.
    """


@dataclasses.dataclass(repr=False)
class ParallelCorpus:
    """Aligned source sentences, target sentences and extra references.

    Args:
        sources: list of str. Source-side sentences.
        targets: list of str. Target-side sentences, aligned with `sources`.
        references: dict of str to list of str. Extra reference translations
            of the sources, keyed by name (e.g. `{"en_kjv": [...]}`), each as
            long as `targets`. Defaults to `{}`.
        ids: list of str. One identifier per pair (the TSV `ref` column, or
            `"path:line"` for text files). Defaults to `None`, which numbers
            the pairs `"1"`, `"2"`, ...
        origin: str. Human description of where the pairs came from.
            Defaults to `"in-memory"`.
        target_name: str or None. Name of the target stream when it is
            scored as a reference (the TSV column, or the target file's
            name). Defaults to `None`, read as `"target"`.

    Raises:
        ValueError: if the lists do not all have the same length.

    Example:

    ```python
    corpus = tf_outheads.data.ParallelCorpus(
        sources=["Y dijo Dios: Sea la luz."],
        targets=["God said, “Let there be light.”"],
    )
    len(corpus)  # 1
    ```
    """

    sources: list[str]
    targets: list[str]
    references: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    ids: list[str] | None = None
    origin: str = "in-memory"
    target_name: str | None = None

    def __post_init__(self):
        self.sources = list(self.sources)
        self.targets = list(self.targets)
        self.references = {
            str(name): list(texts) for name, texts in dict(self.references or {}).items()
        }
        if self.ids is None:
            self.ids = [str(index + 1) for index in range(len(self.sources))]
        self.ids = list(self.ids)
        size = len(self.sources)
        lengths = {"targets": len(self.targets), "ids": len(self.ids)}
        lengths.update(
            {f"references[{name!r}]": len(texts) for name, texts in self.references.items()}
        )
        wrong = {name: length for name, length in lengths.items() if length != size}
        if wrong:
            raise ValueError(
                f"All fields of a ParallelCorpus must have as many entries as "
                f"`sources` ({size}). Received: "
                + ", ".join(f"len({name})={length}" for name, length in wrong.items())
            )

    def __len__(self):
        return len(self.sources)

    def __repr__(self):
        return (
            f"ParallelCorpus(origin={self.origin!r}, size={len(self)}, "
            f"references={list(self.references)})"
        )

    def select(self, indices):
        """Returns a new corpus holding the pairs at `indices`, in that order.

        Args:
            indices: iterable of int. Positions of the pairs to keep.

        Returns:
            A `ParallelCorpus` with sources, targets, references and ids
            taken at `indices`, and the same `origin`.

        Example:

        ```python
        first_hundred = corpus.select(range(100))
        ```
        """
        indices = list(indices)
        return ParallelCorpus(
            sources=[self.sources[i] for i in indices],
            targets=[self.targets[i] for i in indices],
            references={
                name: [texts[i] for i in indices]
                for name, texts in self.references.items()
            },
            ids=[self.ids[i] for i in indices],
            origin=self.origin,
            target_name=self.target_name,
        )

    def reference_streams(self):
        """`{target_name: targets, **references}`: every stream a hypothesis is scored against."""
        return {self.target_name or "target": self.targets, **self.references}


@dataclasses.dataclass
class CleaningReport:
    """What :func:`clean` removed, filter by filter.

    Args:
        total: int. Pairs before cleaning.
        kept: int. Pairs after cleaning.
        removed: dict of str to int. Filter name (`"empty"`, `"max_length"`,
            `"length_ratio"`, `"contains"`, in the order they run; only
            enabled filters)
            to the number of pairs it removed. A pair is counted once, by the
            first filter that removes it, so `total == kept + sum(removed)`.
    """

    total: int
    kept: int
    removed: dict[str, int]

    def __str__(self):
        share = 100.0 * self.kept / self.total if self.total else 100.0
        lines = [f"kept {self.kept} of {self.total} pairs ({share:.1f}%)"]
        for name, count in self.removed.items():
            lines.append(f"  {name}: removed {count} pairs")
        return "\n".join(lines)


_UTF8_BOM = b"\xef\xbb\xbf"


def _open_binary(path):
    # Compression is chosen by suffix, so a plain file named *.gz fails loudly
    # instead of being read as garbage.
    if os.fspath(path).endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _gzip_error(path, line_number, error):
    """A `CorpusError` for a gzip stream that stopped at `line_number`."""
    if line_number == 1 and str(error).startswith("Not a gzipped file"):
        return CorpusError(
            f"{path}:{line_number}: not a gzip file ({error}); expected gzip "
            f"data, as the name ends in `.gz` (rename it, or compress it)."
        )
    return CorpusError(
        f"{path}:{line_number}: the gzip data is truncated or damaged after "
        f"{line_number - 1} complete line(s) ({type(error).__name__}: {error}); "
        f"expected a complete gzip file (`gzip -t` checks one; copy or "
        f"download it again)."
    )


def _read_lines(path):
    """Yields `(line_number, text)` for each line of `path`, decoded as UTF-8.

    Only the line terminator (`\\n` or `\\r\\n`) is removed, and a UTF-8
    byte order mark at the very start of the file (as Windows editors write
    it). Lines are split on `\\n` alone, so a stray `\\r` or other Unicode
    line separator stays inside its line rather than shifting the numbering.

    Raises:
        CorpusError: a line is not valid UTF-8, or a `.gz` file is not gzip,
            truncated or damaged (the message gives the line being read; the
            gzip error is chained as `__cause__`).
    """
    with _open_binary(path) as stream:
        line_number = 0
        while True:
            line_number += 1
            try:
                raw = stream.readline()
            # gzip.BadGzipFile is an OSError; zlib.error covers bad blocks.
            except (EOFError, OSError, zlib.error) as error:
                if not isinstance(stream, gzip.GzipFile):
                    raise
                raise _gzip_error(path, line_number, error) from error
            if not raw:
                return
            if line_number == 1 and raw.startswith(_UTF8_BOM):
                raw = raw[len(_UTF8_BOM):]
            if raw.endswith(b"\n"):
                raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusError(
                    f"{path}:{line_number}: invalid UTF-8 at byte "
                    f"{error.start} of the line ({raw[error.start:error.end]!r}); "
                    f"expected UTF-8 encoded text."
                ) from None
            yield line_number, text


def read_tsv(
    path,
    source="es",
    target="en_web",
    references=("en_kjv",),
    split="train",
    split_column="split",
    id_column="ref",
):
    """Reads a tab-separated parallel corpus with a header line.

    The file is read as UTF-8, gunzipped on the fly when its name ends in
    `.gz`; a byte order mark at its start is skipped. Fields are split on
    tabs (no quoting) and stripped of surrounding whitespace. Every row must
    have as many fields as the header.

    Args:
        path: str or path-like. The `.tsv` or `.tsv.gz` file.
        source: str. Column holding the source sentences. Defaults to `"es"`.
        target: str. Column holding the target sentences. Defaults to
            `"en_web"`.
        references: iterable of str. Extra reference columns, returned in
            `ParallelCorpus.references` under their column names. Defaults to
            `("en_kjv",)`.
        split: str or None. Keep only rows whose `split_column` equals it;
            `None` keeps every row. Defaults to `"train"`.
        split_column: str. Column holding the split name; only needed when
            `split` is not `None`. Defaults to `"split"`.
        id_column: str or None. Column used as pair ids; `None` uses
            `"path:line"`. Defaults to `"ref"`.

    Returns:
        A `ParallelCorpus`, rows in file order.

    Raises:
        CorpusError: if the file is empty, the header lacks a requested
            column (the message lists the available ones), a row has a
            different number of fields than the header, a line is not valid
            UTF-8, a `.gz` file is not gzip or is truncated or damaged (the
            message gives the line reached), or no row belongs to `split`
            (the message lists the split values present).

    Example:

    ```python
    dev = tf_outheads.data.read_tsv("bible-es-en.tsv.gz", split="dev")
    dev.sources[0], dev.targets[0], dev.references["en_kjv"][0]
    ```
    """
    references = tuple(references or ())
    lines = _read_lines(path)
    try:
        _, header_line = next(lines)
    except StopIteration:
        raise CorpusError(
            f"{path}: the file is empty; expected a header line of "
            f"tab-separated column names."
        ) from None
    header = [name.strip() for name in header_line.split("\t")]
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise CorpusError(
            f"{path}:1: the header repeats the column(s) {duplicates}; "
            f"expected unique column names."
        )
    requested = {"source": source, "target": target}
    requested.update({f"references[{i}]": name for i, name in enumerate(references)})
    if split is not None:
        requested["split_column"] = split_column
    if id_column is not None:
        requested["id_column"] = id_column
    for role, name in requested.items():
        if name not in header:
            raise CorpusError(
                f"{path}:1: the header has no column {name!r} (requested as "
                f"{role}); available columns: {', '.join(header)}."
            )
    position = {name: index for index, name in enumerate(header)}

    sources, targets, ids = [], [], []
    reference_texts = {name: [] for name in references}
    split_values = set()
    for line_number, line in lines:
        fields = line.split("\t")
        if len(fields) != len(header):
            raise CorpusError(
                f"{path}:{line_number}: found {len(fields)} tab-separated "
                f"field(s); expected {len(header)} as in the header "
                f"({', '.join(header)})."
            )
        fields = [field.strip() for field in fields]
        if split is not None:
            row_split = fields[position[split_column]]
            split_values.add(row_split)
            if row_split != split:
                continue
        sources.append(fields[position[source]])
        targets.append(fields[position[target]])
        for name in references:
            reference_texts[name].append(fields[position[name]])
        if id_column is None:
            ids.append(f"{path}:{line_number}")
        else:
            ids.append(fields[position[id_column]])

    if not sources:
        if split is None:
            raise CorpusError(
                f"{path}: the file has a header but no data rows; expected at "
                f"least one row."
            )
        present = ", ".join(repr(value) for value in sorted(split_values)) or "none"
        raise CorpusError(
            f"{path}: no rows with {split_column}={split!r}; values present in "
            f"column {split_column!r}: {present}."
        )
    origin = f"{path} [{source} -> {target}"
    origin += f", split={split}]" if split is not None else "]"
    return ParallelCorpus(
        sources=sources,
        targets=targets,
        references=reference_texts,
        ids=ids,
        origin=origin,
        target_name=target,
    )


def _read_text_file(path):
    lines = list(_read_lines(path))
    if not lines:
        raise CorpusError(f"{path}: the file is empty; expected one sentence per line.")
    return [text for _, text in lines]


def read_parallel_files(source_path, target_path, reference_paths=None):
    """Reads line-aligned source and target text files (`train.src`/`train.tgt`).

    Each file is read as UTF-8 (gunzipped when its name ends in `.gz`), one
    sentence per line; only the line terminator is removed, and a byte order
    mark at the start of a file. Empty lines are kept (use :func:`clean` to
    drop them) so that line numbers stay aligned.

    Args:
        source_path: str or path-like. Source sentences, one per line.
        target_path: str or path-like. Target sentences, one per line.
        reference_paths: dict of str to path, or None. Extra reference files,
            each with as many lines as the target file, returned in
            `ParallelCorpus.references` under their keys. Defaults to `None`.

    Returns:
        A `ParallelCorpus` whose ids are `"source_path:line"`.

    Raises:
        CorpusError: if a file is empty, the files have different line counts
            (the message names both files with their counts), a line is not
            valid UTF-8, or a `.gz` file is not gzip or is truncated or
            damaged (the message names the file and the line reached).

    Example:

    ```python
    corpus = tf_outheads.data.read_parallel_files("train.es", "train.en")
    ```
    """
    sources = _read_text_file(source_path)
    targets = _read_text_file(target_path)
    if len(sources) != len(targets):
        raise CorpusError(
            f"{source_path} has {len(sources)} lines but {target_path} has "
            f"{len(targets)} lines; expected line-aligned files with equal "
            f"line counts."
        )
    references = {}
    for name, path in (reference_paths or {}).items():
        texts = _read_text_file(path)
        if len(texts) != len(targets):
            raise CorpusError(
                f"{path} (reference {name!r}) has {len(texts)} lines but "
                f"{target_path} has {len(targets)} lines; expected line-aligned "
                f"files with equal line counts."
            )
        references[name] = texts
    return ParallelCorpus(
        sources=sources,
        targets=targets,
        references=references,
        ids=[f"{source_path}:{line}" for line in range(1, len(sources) + 1)],
        origin=f"{source_path} -> {target_path}",
        target_name=os.path.basename(os.fspath(target_path)),
    )


def _check_positive(name, value, kind, minimum):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kind) or value < minimum:
        raise ValueError(
            f"`{name}` must be None or a number >= {minimum}. "
            f"Received: {name}={value!r}"
        )


def clean(corpus, max_length=None, max_length_ratio=None, drop_empty=True, drop_containing=()):
    """Drops pairs that are empty, too long or badly length-matched, counted.

    Lengths are counts of tokens between ASCII whitespace (as
    `tf.strings.split`, so that `tf_outheads.data.CleaningRules` drops the same
    pairs in a graph). The filters run in this order and a pair is counted by
    the first one that removes it:

    1. `"empty"` (if `drop_empty`): either side is empty or whitespace only.
    2. `"max_length"` (if `max_length` is set): either side has more than
       `max_length` tokens.
    3. `"length_ratio"` (if `max_length_ratio` is set):
       `max(ls, lt) / max(1, min(ls, lt)) > max_length_ratio`.
    4. `"contains"` (if `drop_containing` is given): the target contains one
       of the strings (boilerplate that :func:`strip_suffixes` could not
       remove because it is not at the end).

    Args:
        corpus: `ParallelCorpus`. The pairs to clean.
        max_length: int or None. Longest side allowed, in whitespace tokens.
            Defaults to `None` (no limit).
        max_length_ratio: float or None, at least 1. Largest ratio allowed
            between the longer and the shorter side. Defaults to `None`.
        drop_empty: bool. Whether to drop pairs with an empty side. Defaults
            to `True`.
        drop_containing: iterable of str. Drop pairs whose target contains
            any of these strings. Defaults to `()`.

    Returns:
        A tuple `(cleaned_corpus, report)`: a `ParallelCorpus` with the kept
        pairs in their original order (references and ids aligned), and a
        `CleaningReport`.

    Raises:
        ValueError: if `max_length` or `max_length_ratio` is out of range.

    Example:

    ```python
    corpus = tf_outheads.data.read_tsv("bible-es-en.tsv.gz")
    corpus, report = tf_outheads.data.clean(corpus, max_length=100, max_length_ratio=2.5)
    print(report)
    ```
    """
    _check_positive("max_length", max_length, int, 1)
    _check_positive("max_length_ratio", max_length_ratio, (int, float), 1)
    removed = {}
    if drop_empty:
        removed["empty"] = 0
    if max_length is not None:
        removed["max_length"] = 0
    if max_length_ratio is not None:
        removed["length_ratio"] = 0
    drop_containing = tuple(drop_containing or ())
    if any(not isinstance(text, str) or not text for text in drop_containing):
        raise ValueError(
            "`drop_containing` must hold non-empty strings. "
            f"Received: drop_containing={drop_containing!r}"
        )
    if drop_containing:
        removed["contains"] = 0

    kept = []
    for index, (source, target) in enumerate(zip(corpus.sources, corpus.targets)):
        source_length = len(source.encode("utf-8").split())
        target_length = len(target.encode("utf-8").split())
        if drop_empty and (source_length == 0 or target_length == 0):
            removed["empty"] += 1
        elif max_length is not None and max(source_length, target_length) > max_length:
            removed["max_length"] += 1
        elif max_length_ratio is not None and (
            max(source_length, target_length) / max(1, min(source_length, target_length))
            > max_length_ratio
        ):
            removed["length_ratio"] += 1
        elif any(text in target for text in drop_containing):
            removed["contains"] += 1
        else:
            kept.append(index)
    cleaned = corpus.select(kept)
    cleaned.origin = f"{corpus.origin}, cleaned"
    report = CleaningReport(total=len(corpus), kept=len(kept), removed=removed)
    return cleaned, report


def strip_suffixes(corpus, suffixes, fields=("targets",)):
    """Removes known boilerplate appended to the end of sentences, counted.

    Some exported corpora carry text that does not belong to the sentence:
    the SWORD export of the World English Bible, for instance, appends the
    last heading the exporter saw (a Psalm superscription) to thousands of
    later verses. Training on it teaches the model to emit it, and scoring
    against it inflates BLEU. This removes each suffix from the end of the
    chosen fields (then strips trailing whitespace), repeatedly, so a
    sentence ending in several of them loses all. Only exact, whole-suffix
    matches at the end are removed; the text elsewhere is never touched.

    Args:
        corpus: `ParallelCorpus`.
        suffixes: iterable of non-empty str. Boilerplate to remove.
        fields: iterable of str. `"targets"`, `"sources"` and/or
            `"references"` (all extra reference streams). Defaults to
            `("targets",)`.

    Returns:
        A tuple `(stripped_corpus, counts)`: a new `ParallelCorpus` (same
        pairs, order and ids) and a dict suffix → number of times it was
        removed.

    Raises:
        ValueError: if a suffix is empty or a field name is unknown.

    Example:

    ```python
    corpus, counts = tf_outheads.data.strip_suffixes(
        corpus, ["A praise psalm by David."])
    ```
    """
    suffixes = [str(suffix).strip() for suffix in suffixes]
    if any(not suffix for suffix in suffixes):
        raise ValueError(f"`suffixes` must be non-empty strings. Received: suffixes={suffixes!r}")
    fields = tuple(fields)
    unknown = [field for field in fields if field not in ("sources", "targets", "references")]
    if unknown:
        raise ValueError(
            "`fields` must name 'sources', 'targets' or 'references'. "
            f"Received: fields={fields!r}"
        )
    counts = {suffix: 0 for suffix in suffixes}

    def strip(texts):
        out = []
        for text in texts:
            changed = True
            while changed:
                changed = False
                for suffix in suffixes:
                    if text.endswith(suffix):
                        text = text[: -len(suffix)].rstrip()
                        counts[suffix] += 1
                        changed = True
            out.append(text)
        return out

    stripped = ParallelCorpus(
        sources=strip(corpus.sources) if "sources" in fields else corpus.sources,
        targets=strip(corpus.targets) if "targets" in fields else corpus.targets,
        references={
            name: strip(texts) if "references" in fields else texts
            for name, texts in corpus.references.items()
        },
        ids=corpus.ids,
        origin=corpus.origin,
        target_name=corpus.target_name,
    )
    return stripped, counts
