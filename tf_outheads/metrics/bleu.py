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


@dataclasses.dataclass(frozen=True)
class PairedResult:
    """One system's BLEU in a paired significance test against a baseline.

    Args:
        system: str, the system's name.
        score: float, its corpus BLEU.
        mean: float, the mean BLEU over the bootstrap resamples.
        ci: float, half the width of the 95 % confidence interval around
            `mean` (the interval is `mean ± ci`).
        p_value: float or `None` (the baseline): sacrebleu's two-sided
            p-value of the absolute BLEU difference to the baseline (after
            MultEval: `(count(resampled |Δ| − mean > |Δ|) + 1) / (samples + 1)`,
            so a system identical to the baseline gets `1 / (samples + 1)`,
            not 1: "a zero difference should not be attributed to chance").
        signature: str, sacrebleu's signature with the test, the number of
            resamples and the seed, e.g. `"nrefs:1|bs:1000|seed:12345|..."`.
    """

    system: str
    score: float
    mean: float
    ci: float
    p_value: object
    signature: str


def paired_significance(named_hypotheses, references, test="bs", samples=1000, seed=12345,
                        tokenize="13a"):
    """Paired significance of BLEU differences, by sacrebleu's own implementation.

    The first system is the baseline; every other is tested against it with
    paired bootstrap resampling (`test="bs"`, Koehn 2004) or approximate
    randomization (`"ar"`, Riezler & Maxwell 2005), exactly as
    `sacrebleu --paired-bs` / `--paired-ar` do, with the 95 % confidence
    interval of every system's mean from bootstrap resamples.

    Args:
        named_hypotheses: list of `(name, hypotheses)`, baseline first; every
            system translates the same sentences.
        references: list of str (one stream) or list of streams.
        test: `"bs"` or `"ar"`. Defaults to `"bs"`.
        samples: int, resamples (bootstrap) or trials (randomization).
            Defaults to 1000.
        seed: int, sacrebleu's `SACREBLEU_SEED`; the same seed gives the same
            p-values. Defaults to 12345 (sacrebleu's).
        tokenize: str. Defaults to `"13a"`.

    Returns:
        list of `PairedResult`, in the order given.

    Raises:
        ValueError: fewer than two systems, a bad `test`, or a system or
            reference stream whose line count differs from the baseline's.
    """
    import os

    from sacrebleu.significance import PairedTest

    named_hypotheses = [(str(name), list(hyps)) for name, hyps in named_hypotheses]
    if len(named_hypotheses) < 2:
        raise ValueError("A paired test needs a baseline and at least one system. "
                         f"Received {len(named_hypotheses)} system(s)")
    if test not in ("bs", "ar"):
        raise ValueError(f"`test` must be 'bs' or 'ar'. Received: test={test!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"`samples` must be a positive int. Received: samples={samples!r}")
    baseline_lines = len(named_hypotheses[0][1])
    for name, hyps in named_hypotheses:
        if len(hyps) != baseline_lines:
            raise ValueError(f"System {name!r} has {len(hyps)} lines but the baseline "
                             f"{named_hypotheses[0][0]!r} has {baseline_lines}")
    _, streams = _reference_streams(named_hypotheses[0][1], references)
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        tester = PairedTest(named_hypotheses, {"BLEU": BLEU(tokenize=tokenize)}, streams,
                            test_type=test, n_samples=samples,
                            n_ar_confidence=0 if test == "ar" else -1)
        signatures, scores = tester()
    finally:
        if previous is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = previous
    (metric,) = [name for name in scores if name != "System"]
    signature = str(signatures[metric])
    return [PairedResult(system=name, score=float(result.score), mean=float(result.mean),
                         ci=float(result.ci), p_value=result.p_value, signature=signature)
            for name, result in zip(scores["System"], scores[metric])]


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
        return split_lines(stream.read(), path)


def split_lines(data, name):
    """`read_lines` of bytes already read (`name`, e.g. `"<stdin>"`, for errors).

    Lines end at `\\n` only (an ending `\\r` is dropped); a leading UTF-8 byte
    order mark is dropped.

    Raises:
        ValueError: a line is not valid UTF-8; the message names `name`, the
            line number and the byte offset within that line.
    """
    path = name
    raw_lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
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
