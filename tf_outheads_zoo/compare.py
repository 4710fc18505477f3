"""Side by side: the training NLL and dev BLEU of several run directories.

`tf-outheads compare RUN_DIR RUN_DIR ... --output DIR` writes `nll.svg` (the
training NLL per step, a moving average), `dev_bleu.svg` (dev BLEU at every
evaluation), `comparison.json` and `comparison.md` (steps, time, final dev and
test scores, and sacrebleu's paired significance test of every run against the
first: p-value and 95 % confidence interval, with the test's signature) to DIR. The NLL of a ReWE run is its `logits_loss` column, the
same loss as a plain run's `loss` (label smoothing included), so the curves
compare like for like.
"""

import csv
import json
import os

from tf_outheads_zoo.plots import write_line_plot


def nll_curve(run_dir):
    """`(steps, nll)` of `run_dir/loss_curves.csv` (plain or ReWE layout).

    Raises:
        FileNotFoundError: the run has no `loss_curves.csv`.
        ValueError: the file has neither an NLL column nor any row.
    """
    path = os.path.join(run_dir, "loss_curves.csv")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no per-step losses in this run directory "
                                "(written by `tf-outheads train`)")
    with open(path, encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames or []
        column = "logits_loss" if "logits_loss" in fields else "loss"
        if column not in fields:
            raise ValueError(f"{path}: expected a `loss` or `logits_loss` column, "
                             f"found {fields}")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return [int(row["step"]) for row in rows], [float(row[column]) for row in rows]


def moving_average(values, window):
    """Mean of the last `window` values at each position (fewer at the start)."""
    if window < 1:
        raise ValueError(f"`window` must be >= 1. Received: {window}")
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _bleu_history(run_dir):
    path = os.path.join(run_dir, "bleu.jsonl")
    if not os.path.exists(path):
        return [], []
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r["step"] for r in records], [r["bleu"] for r in records]


def _summary(run_dir, label):
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    row = {"run": label, "run_dir": run_dir, "steps": results["steps"],
           "train_seconds": results["train_seconds"]}
    for split in ("dev", "test"):
        for name, score in results.get(split, {}).items():
            row[f"{split} {name}"] = round(score["score"], 2)
    return row


def run_references(run_dir, split):
    """The reference stream a run was scored against on `split` (its settings' corpus,
    target column, known boilerplate stripped: `tf_outheads_zoo.splits.read_split`), or the
    `<split>.ref` file of a run record (`tf_outheads_zoo.study.record_run`)."""
    from tf_outheads.metrics import read_lines
    from tf_outheads_zoo.splits import read_split

    recorded = os.path.join(run_dir, f"{split}.ref")
    if os.path.exists(recorded):
        return read_lines(recorded)
    from tf_outheads_zoo.runs import stored_run

    # Through the schema, as the run read its data.
    return read_split(stored_run(run_dir, required=True)[1].data, split,
                      log=lambda *_: None).targets


def significance_table(run_dirs, labels, split, test="bs", samples=1000):
    """Paired BLEU significance of every run against the first, on `split`.

    Reads each run's `{split}.hyp` and the references of the first run
    (`run_references`; every run must have been scored on the same ones) and
    runs sacrebleu's paired test (`tf_outheads.metrics.paired_significance`).

    Returns:
        list of `PairedResult` (baseline first).

    Raises:
        FileNotFoundError: a run has no `{split}.hyp`.
        ValueError: the runs were scored against different references.
    """
    from tf_outheads.metrics import paired_significance, read_lines

    references = run_references(run_dirs[0], split)
    for run_dir in run_dirs[1:]:
        if run_references(run_dir, split) != references:
            raise ValueError(f"{run_dir}: scored against other {split} references than "
                             f"{run_dirs[0]}; a paired test needs the same sentences")
    systems = []
    for run_dir, label in zip(run_dirs, labels):
        path = os.path.join(run_dir, f"{split}.hyp")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no {split} translations in this run directory")
        systems.append((label, read_lines(path)))
    return paired_significance(systems, references, test=test, samples=samples)


def compare_runs(run_dirs, output_dir, labels=None, window=50, significance="bs",
                 samples=1000, log=print):
    """Writes the comparison of `run_dirs` to `output_dir`; returns the table rows.

    Args:
        run_dirs: list of str, trained run directories (`results.json`,
            `loss_curves.csv`, `bleu.jsonl`).
        output_dir: str, where to write `nll.svg`, `dev_bleu.svg`,
            `comparison.json` and `comparison.md`.
        labels: optional list of str, one per run (default: the directory names).
        window: int, steps averaged for the NLL curves.
        significance: `"bs"` (paired bootstrap resampling), `"ar"`
            (approximate randomization) or `None`: sacrebleu's paired test of
            each run's dev and test BLEU against the first run's
            (`significance_table`): the table gets each run's bootstrap mean
            ± 95 % confidence interval and p-value, `comparison.json` the
            signature. Defaults to `"bs"`.
        samples: int, resamples or trials of the test. Defaults to 1000.
    """
    if labels is None:
        labels = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    if len(labels) != len(run_dirs) or len(set(labels)) != len(labels):
        raise ValueError(f"need one distinct label per run; got {labels} for {run_dirs}")
    for run_dir in run_dirs:
        if not os.path.exists(os.path.join(run_dir, "results.json")):
            raise FileNotFoundError(f"{run_dir}/results.json: not a finished run")
    os.makedirs(output_dir, exist_ok=True)
    nll = {}
    for run_dir, label in zip(run_dirs, labels):
        steps, values = nll_curve(run_dir)
        nll[label] = (steps, moving_average(values, window))
    write_line_plot(os.path.join(output_dir, "nll.svg"), nll,
                    title=f"Training NLL per step (moving average of {window})",
                    xlabel="training step", ylabel="NLL")
    bleu = {label: _bleu_history(d) for d, label in zip(run_dirs, labels)}
    if any(steps for steps, _ in bleu.values()):
        write_line_plot(os.path.join(output_dir, "dev_bleu.svg"),
                        {k: v for k, v in bleu.items() if v[0]},
                        title="Dev BLEU during training", xlabel="training step",
                        ylabel="BLEU")
    rows = [_summary(d, label) for d, label in zip(run_dirs, labels)]
    for row, label in zip(rows, labels):
        row["dev_bleu_history"] = [[s, round(b, 2)] for s, b in zip(*bleu[label])]
    signatures = {}
    if significance:
        for split in ("dev", "test"):
            results = significance_table(run_dirs, labels, split, test=significance,
                                         samples=samples)
            signatures[split] = results[0].signature
            for row, result in zip(rows, results):
                row[f"{split} BLEU mean ± 95% CI"] = f"{result.mean:.2f} ± {result.ci:.2f}"
                row[f"{split} p"] = ("baseline" if result.p_value is None
                                     else f"{result.p_value:.4f}")
            log(f"[compare] {split}: paired {'bootstrap' if significance == 'bs' else 'AR'} "
                f"test against {labels[0]}, sacrebleu {signatures[split]}")
    with open(os.path.join(output_dir, "comparison.json"), "w", encoding="utf-8") as f:
        json.dump({"runs": rows, "baseline": labels[0], "significance": significance,
                   "signatures": signatures}, f, indent=2)
    columns = [c for c in rows[0] if c not in ("run_dir", "dev_bleu_history")]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    lines += [f"\n{split}: sacrebleu {signature}" for split, signature in signatures.items()]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(output_dir, "comparison.md"), "w", encoding="utf-8") as f:
        f.write(table)
    log(table + f"[compare] {output_dir}: nll.svg, dev_bleu.svg, comparison.json, comparison.md")
    return rows
