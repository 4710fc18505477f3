"""The words a study's arms output in excess of their references, and their target
tables' hubs: the report's view of a nearest-neighbour decoder's hubness (issue 41)."""

import json
import os


def overproduced_words(run_dirs, split="dev", top=5, references_dirs=None):
    """The words a set of runs outputs most in excess of their references, as
    `[(word, output count, reference count)]` summed over the runs (BLEU's 13a tokens):
    a nearest-neighbour decoder's hubs ("Thus" 723 times against 1), or any head's
    favourite filler. `references_dirs`: the runs whose references each run is read
    against (default: the runs themselves)."""
    import collections

    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    from tf_outheads.metrics import read_lines
    from tf_outheads_zoo.compare import run_references
    from tf_outheads_zoo.study.stats import hyp_name

    tokenize = Tokenizer13a()
    outputs, references = collections.Counter(), collections.Counter()
    for run_dir, references_dir in zip(run_dirs, references_dirs or run_dirs):
        for line in read_lines(os.path.join(run_dir, hyp_name(split, None))):
            outputs.update(tokenize(line).split())
        for line in run_references(references_dir, split):
            references.update(tokenize(line).split())
    excess = sorted(outputs, key=lambda word: (references[word] - outputs[word], word))
    return [(word, outputs[word], references[word]) for word in excess[:top]
            if outputs[word] > references[word]]


def hubness_lines(study, runs):
    """Markdown lines: per arm, the dev words output most in excess of the references
    (summed over seeds), and for arms whose runs recorded a target table
    (`target_table.json`: continuous heads, ReWE) its hubness."""
    lines = []
    # The references the paired tests read: the baseline's runs' (`text_metrics`).
    baseline_runs = runs.get(study.baseline, {}) if study is not None else {}
    for arm_name, arm_runs in runs.items():
        if not arm_runs:
            continue
        seeds = sorted(arm_runs)
        words = overproduced_words([arm_runs[s] for s in seeds], references_dirs=[
            baseline_runs.get(s) or arm_runs[s] for s in seeds])
        cell = ", ".join(f"{word} {out}/{ref}" for word, out, ref in words) or "none"
        tables = []
        for seed in seeds:
            path = os.path.join(arm_runs[seed], "target_table.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    tables.append((seed, json.load(f)))
        table_cell = ""
        if tables:
            table_cell = "; target table (k-occurrence skewness, k = 10): " + ", ".join(
                f"s{seed} {t['hubness']['skewness']:.2f} (hubs "
                + " ".join(f"{p}" for p, _ in t["hubness"]["top"][:3]) + ")"
                for seed, t in tables)
        lines.append(f"- {arm_name}: {cell}{table_cell}")
    if not lines:
        return []
    return ["", "Dev words output most in excess of the references (output / reference "
            "count, summed over seeds; 13a tokens):", ""] + lines
