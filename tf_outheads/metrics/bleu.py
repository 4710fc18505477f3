"""Corpus BLEU and chrF through sacrebleu, with their signatures.

Scores are computed on detokenized text with sacrebleu's own tokenizer (`13a`
by default), so they are comparable across papers; the signature returned with
every score says exactly how it was computed (Post, 2018).

sacrebleu's Python API scores a reference stream that is shorter or longer than
the hypotheses without complaint (it zips them); the functions here refuse it,
since a dropped line silently changes the score.
"""

import dataclasses

from sacrebleu.metrics import BLEU
from sacrebleu.metrics import CHRF


@dataclasses.dataclass(frozen=True)
class Score:
    """One corpus-level score.

    Args:
        name: str, the metric's name as sacrebleu prints it (`"BLEU"`,
            `"chrF2"`).
        score: float, the corpus score in `[0, 100]`.
        signature: str, sacrebleu's signature, e.g.
            `"nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"`.
        text: str, sacrebleu's score line, e.g.
            `"BLEU = 35.21 66.7/41.2/28.6/20.0 (BP = 1.000 ...)"`.
    """

    name: str
    score: float
    signature: str
    text: str

    def __str__(self):
        return f"{self.text} [{self.signature}]"


def _reference_streams(hypotheses, references):
    """Checks the inputs and returns the references as a list of streams."""
    if isinstance(hypotheses, str):
        raise TypeError(
            "`hypotheses` must be a list of strings, one per sentence, not a "
            "single string."
        )
    hypotheses = list(hypotheses)
    if isinstance(references, str):
        raise TypeError(
            "`references` must be a list of strings (one stream) or a list of "
            "streams, not a single string."
        )
    references = list(references)
    if not references:
        raise ValueError("`references` is empty: give at least one stream.")
    # One stream (list[str]) or several (list[list[str]]).
    if all(isinstance(line, str) for line in references):
        streams = [references]
    elif any(isinstance(stream, str) for stream in references):
        raise TypeError(
            "`references` mixes strings and streams: give a list of strings "
            "(one stream) or a list of lists of strings (several streams)."
        )
    else:
        streams = [list(stream) for stream in references]
    for index, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"Reference stream {index} has {len(stream)} lines but there "
                f"are {len(hypotheses)} hypotheses; every reference stream "
                "must have one line per hypothesis."
            )
    return hypotheses, streams


def _score(metric, hypotheses, references):
    hypotheses, streams = _reference_streams(hypotheses, references)
    result = metric.corpus_score(hypotheses, streams)
    return Score(
        name=result.name,
        score=float(result.score),
        signature=str(metric.get_signature()),
        text=str(result),
    )


def corpus_bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """Corpus BLEU of detokenized hypotheses against one or more references.

    Args:
        hypotheses: list of str, one detokenized translation per sentence.
        references: list of str (one reference stream) or list of lists of
            str (several streams, each with one line per hypothesis).
        tokenize: str, sacrebleu tokenizer. Defaults to `"13a"` (the WMT
            standard).
        lowercase: bool, whether to compare case-insensitively. Defaults to
            `False`.

    Returns:
        `Score` with sacrebleu's BLEU, signature and score line.

    Raises:
        ValueError: when a reference stream's line count differs from the
            number of hypotheses.

    Example:

    ```python
    from tf_outheads.metrics import corpus_bleu
    score = corpus_bleu(
        ["In the beginning God made the heavens and the earth."],
        [
            ["In the beginning, God created the heavens and the earth."],
            ["In the beginning God created the heaven and the earth."],
        ],
    )
    score.score, score.signature  # 70.17, "nrefs:2|case:mixed|eff:no|..."
    ```

    References:
        Papineni et al., 2002, "BLEU: a method for automatic evaluation of
        machine translation", Eq. (1)-(2); Post, 2018, "A Call for Clarity in
        Reporting BLEU Scores".
    """
    metric = BLEU(tokenize=tokenize, lowercase=lowercase)
    return _score(metric, hypotheses, references)


def corpus_chrf(hypotheses, references):
    """Corpus chrF (chrF2: character 6-grams, beta 2) of detokenized text.

    Args:
        hypotheses: list of str, one detokenized translation per sentence.
        references: list of str (one reference stream) or list of lists of
            str (several streams, each with one line per hypothesis).

    Returns:
        `Score` with sacrebleu's chrF, signature and score line.

    Raises:
        ValueError: when a reference stream's line count differs from the
            number of hypotheses.

    Example:

    ```python
    from tf_outheads.metrics import corpus_chrf
    corpus_chrf(["God saw the light."], ["God saw the light."]).score  # 100.0
    ```

    References:
        Popović, 2015, "chrF: character n-gram F-score for automatic MT
        evaluation", Eq. (1).
    """
    metric = CHRF()
    return _score(metric, hypotheses, references)


def evaluate_translations(hypotheses, references, primary="en_web"):
    """BLEU and chrF against a primary reference, BLEU against all of them.

    Args:
        hypotheses: list of str, one detokenized translation per sentence.
        references: dict from stream name (e.g. `"en_web"`, `"en_kjv"`) to a
            list of str with one line per hypothesis.
        primary: str, the stream scored alone. Defaults to `"en_web"`.

    Returns:
        dict from a readable key to `Score`, in this order:
        `"bleu[<primary>]"`, `"chrf[<primary>]"` and, when there are several
        streams, `"bleu[<primary>+<other>+...]"` (multi-reference BLEU, the
        primary first, the others in the dict's order).

    Example:

    ```python
    from tf_outheads.metrics import evaluate_translations, format_report
    results = evaluate_translations(
        ["God saw the light, that it was good."],
        {
            "en_web": ["God saw the light, and saw that it was good."],
            "en_kjv": ["And God saw the light, that it was good."],
        },
    )
    list(results)  # ["bleu[en_web]", "chrf[en_web]", "bleu[en_web+en_kjv]"]
    print(format_report(results))
    ```
    """
    references = dict(references)
    if primary not in references:
        raise ValueError(
            f"`primary` must name one of the reference streams "
            f"{sorted(references)}. Received: primary={primary!r}"
        )
    names = [primary] + [name for name in references if name != primary]
    results = {}
    for name in names:
        # Name the failing stream, which _reference_streams cannot.
        if len(references[name]) != len(hypotheses):
            raise ValueError(
                f"Reference stream {name!r} has {len(references[name])} lines "
                f"but there are {len(hypotheses)} hypotheses; every reference "
                "stream must have one line per hypothesis."
            )
    results[f"bleu[{primary}]"] = corpus_bleu(hypotheses, references[primary])
    results[f"chrf[{primary}]"] = corpus_chrf(hypotheses, references[primary])
    if len(names) > 1:
        key = "bleu[" + "+".join(names) + "]"
        results[key] = corpus_bleu(
            hypotheses, [references[name] for name in names]
        )
    return results


def format_report(results):
    """A plain-text table of scores with their signatures.

    Args:
        results: dict from a name to `Score`, as `evaluate_translations`
            returns.

    Returns:
        str, one row per score: name, score with two decimals, signature.

    Example:

    ```python
    from tf_outheads.metrics import corpus_bleu, format_report
    print(format_report({"bleu[en_web]": corpus_bleu(["a b"], ["a b"])}))
    ```
    """
    header = ("metric", "score", "signature")
    rows = [
        (key, f"{score.score:.2f}", score.signature)
        for key, score in results.items()
    ]
    key_width = max([len(header[0])] + [len(row[0]) for row in rows])
    score_width = max([len(header[1])] + [len(row[1]) for row in rows])
    lines = [
        f"{header[0]:<{key_width}}  {header[1]:>{score_width}}  {header[2]}"
    ]
    lines.append("-" * len(lines[0]))
    for key, score, signature in rows:
        lines.append(f"{key:<{key_width}}  {score:>{score_width}}  {signature}")
    return "\n".join(lines)


def read_lines(path):
    """Reads a hypotheses or reference file: one sentence per line.

    Line endings (`\\n`, `\\r\\n`) are stripped; every other character is
    kept, since sacrebleu tokenizes the text itself.

    Args:
        path: str or path-like, a UTF-8 text file.

    Returns:
        list of str, one per line.

    Raises:
        ValueError: when the file is not valid UTF-8; the message names the
            file, the line number and the byte offset within that line.

    Example:

    ```python
    from tf_outheads.metrics import corpus_bleu, read_lines
    score = corpus_bleu(read_lines("hyp.en"), read_lines("ref.en"))
    ```
    """
    with open(path, "rb") as stream:
        raw_lines = stream.read().split(b"\n")
    # A final newline ends the last line; it does not start an empty one.
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{path}: line {number} is not valid UTF-8 (byte "
                f"{error.start} of the line: {raw[error.start:error.end]!r})."
            ) from None
        lines.append(line.removesuffix("\r"))
    return lines
