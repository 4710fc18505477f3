"""The results page: each study's table (mean ± sd over seeds, paired p-values), its
curves as SVG, whether its runs are comparable (`data_differences`) and its claims'
verdicts (`verdicts.claim_verdict`), from run records or run directories."""

import dataclasses
import functools
import json
import math
import os
import platform
import statistics

from tf_outheads_zoo.study.definition import (
    DEFAULT_RUNS_DIR, RECORDS_DIR, Claim, added_seeds, finished_runs)
from tf_outheads_zoo.study.combined import adjusted_verdict, holm, sentence_bleu_statistics
from tf_outheads_zoo.study.file import STUDIES, get_study
from tf_outheads_zoo.study.stall import stall_check
from tf_outheads_zoo.study.winner import choose_winner, winner_text
from tf_outheads_zoo.study.words import hubness_lines
from tf_outheads_zoo.study.stats import (
    ALPHA, POWER, dev_cross_entropy, dev_loss_curve, forced_scores, paired_against,
    paired_tests, variant_score)
from tf_outheads_zoo.study.verdicts import claim_tests, claim_text, stalled_runs


def study_report(name, runs_dir=None, figures_dir=None, samples=1000, study=None,
                 collect=None):
    """The Markdown section of study `name` (or of `study`, a study file's; `name` then
    names its figures) from its runs (or records) `runs_dir/<arm>/s<seed>` (default
    `DEFAULT_RUNS_DIR/<name>`), and its SVG figures in `figures_dir`.

    `collect`: a dict filled with the numbers behind the page (`results.json`): per arm
    and seed the run's scores, per arm its effects against the baseline over seeds
    (`stats.SeedEffect`), and each claim's verdict."""
    from tf_outheads_zoo.plots import write_line_plot

    study = study or get_study(name)
    runs_dir = runs_dir or os.path.join(DEFAULT_RUNS_DIR, name)
    runs = {arm: finished_runs(runs_dir, study, arm) for arm in study.arms}
    budget = (f"{study.minutes:g} minutes of training" if study.minutes
              else f"{study.steps} steps")
    lines = [f"## {study.title}", "", f"{study.notes} Budget: {budget} per run; dev BLEU "
             f"every {study.eval_every} steps; greedy decoding unless marked. Baseline of "
             f"the paired tests: **{study.baseline}** (sacrebleu paired bootstrap, "
             f"{samples} resamples, each seed against the baseline's run of the same "
             "seed).", ""]
    baseline_runs = runs[study.baseline]
    rows = [("arm", "preset", "seeds", "dev BLEU", "test BLEU",
             f"Δ test vs {study.baseline} [95 % CI, seeds and sentences]", "dev cross-entropy",
             "test chrF", "test length ratio", "p test (per seed)", "p dev (per seed)",
             "min / run")
            + (("steps / run",) if study.minutes else ())]
    # Equal wall clock: the steps each arm reached are its training speed (the same
    # batches), against the baseline's.
    baseline_steps = _mean_steps(baseline_runs.values())
    summary = {}
    signature = ""
    # Settings every arm has (a study file's data): said once, above the table.
    shared = _shared_overrides(study)
    if shared:
        lines += ["Every arm: " + " ".join(f"`{k}={json.dumps(v)}`"
                                           for k, v in shared.items()) + ".", ""]
    for arm_name, arm in study.arms.items():
        arm_runs = runs[arm_name]
        stalls = {s: stall_check(run_dir) for s, run_dir in arm_runs.items()}  # every row's
        for variant, _ in ((None, None),) + tuple(arm.decodings):
            label = arm_name + (f" ({variant})" if variant else "")
            if not arm_runs:
                rows.append((label, arm.preset, "not run") + ("",) * (len(rows[0]) - 3))
                continue
            seeds = sorted(arm_runs)
            dev = [variant_score(arm_runs[s], "dev", variant) for s in seeds]
            test = [variant_score(arm_runs[s], "test", variant) for s in seeds]
            minutes, steps = [], []
            dev_ce, kinds = zip(*(dev_cross_entropy(arm_runs[s]) for s in seeds))
            for s in seeds:
                with open(os.path.join(arm_runs[s], "results.json"), encoding="utf-8") as f:
                    results = json.load(f)
                minutes.append(results["train_seconds"] / 60)
                steps.append(results["steps"])
            # The references of the baseline's runs, as the paired tests read them (the
            # arms of a study share them: `data_differences`).
            texts = [text_metrics(arm_runs[s], "test", variant,
                                  baseline_runs.get(s) or arm_runs[s]) for s in seeds]
            deltas, p_test, p_dev = [], [], []
            if arm_name != study.baseline:
                deltas, p_values, arm_signature = paired_tests(
                    arm_runs, dict(zip(seeds, test)), baseline_runs, samples, variant,
                    splits=("test", "dev"))
                p_test, p_dev = p_values["test"], p_values["dev"]
                signature = arm_signature or signature
            # Another decoding of the same runs has the same dev cross-entropy.
            ce_kind = kinds[0] if not variant and len(set(kinds)) == 1 else None
            summary[label] = {"seeds": seeds, "dev": dev, "test": test, "deltas": deltas,
                              "p_test": p_test, "p_dev": p_dev, "dev_ce": list(dev_ce),
                              "ce_kind": ce_kind, "ce_kinds": list(kinds),
                              "test_chrf": [t["chrf"] for t in texts],
                              "test_length_ratio": [t["length_ratio"] for t in texts],
                              "minutes": minutes, "steps_run": steps,
                              "run_dirs": [arm_runs[s] for s in seeds], "arm": arm_name,
                              "variant": variant,
                              "bleu_units": {s: t["bleu_units"] for s, t in zip(seeds, texts)},
                              "ce_units": ({} if variant else
                                           {s: u for s in seeds
                                            if (u := sentence_nll(arm_runs[s])) is not None}),
                              "stalls": stalls}
            rows.append((label, arm.preset + "".join(
                f" `{k}={json.dumps(v)}`" for k, v in arm.overrides if k not in shared),
                ", ".join(f"{s} (stalled)" if stalls[s]["stalled"] else str(s)
                          for s in seeds), _mean_sd(dev), _mean_sd(test),
                label if deltas else "—",
                _mean_sd(dev_ce, digits=3) if ce_kind else "—",
                _mean_sd(summary[label]["test_chrf"]),
                _mean_sd(summary[label]["test_length_ratio"], digits=3),
                " / ".join(f"{p:.3f}" for p in p_test) or "—",
                " / ".join(f"{p:.3f}" for p in p_dev) or "—",
                f"{statistics.fmean(minutes):.1f}")
                + ((_steps_cell(statistics.fmean(steps), baseline_steps,
                                arm_name == study.baseline),) if study.minutes else ()))
            summary[label]["steps"] = statistics.fmean(steps)
    # The Δ column: each arm's test BLEU against the baseline decoded alike, by the
    # interval over seeds and sentences (`stats.claim_tests`).
    row_tests = {}
    for label, values in summary.items():
        if values["arm"] != study.baseline:
            base = summary[_baseline_label(study, values, summary)]
            row_tests[label] = claim_tests(values, base, Claim(label, label, base["arm"], ""),
                                           samples=samples)
    rows = [rows[0]] + [row[:5] + (_interval_cell(row_tests.get(row[5])),) + row[6:]
                        if row[5] in row_tests else row for row in rows[1:]]
    lines += _markdown_table(rows)
    stalled = [line for values in summary.values() if not values["variant"]
               for line in stalled_runs(values)]
    unchecked = [f"{values['arm']} {seed}" for values in summary.values()
                 if not values["variant"]
                 for seed, check in values["stalls"].items() if check["stalled"] is None]
    if stalled:
        lines += ["", "**Stalled runs** (`tf_outheads_zoo.study.stall`; every verdict that "
                  "uses one names it): " + "; ".join(stalled) + "."]
    if unchecked:
        lines += ["", "Not checked for stalls (records from before the check): "
                  + ", ".join(unchecked) + "."]
    added = added_seeds(runs_dir)
    if added:
        lines += ["", "**Seeds added after the study started** (`plan.json`; seeds chosen "
                  "after looking at the intervals make them too narrow): " + "; ".join(
                      f"{e['arm']} {', '.join(map(str, e['seeds']))} ({e['time']})"
                      for e in added) + "."]
    kinds = {}
    for label, values in summary.items():
        if values["ce_kind"]:
            kinds.setdefault(values["ce_kind"], []).append(label)
    if kinds:
        lines += [""] + ["Dev cross-entropy (nats per token): " + "; ".join(
            f"{kind} ({', '.join(labels)})" for kind, labels in kinds.items())
            + (". Only arms of the same kind are compared." if len(kinds) > 1 else ".")]
    if signature:
        lines += ["", f"Test signature: `{signature}`."]
    lines += hubness_lines(study, runs)
    if figures_dir and any(runs.values()):
        os.makedirs(figures_dir, exist_ok=True)
        figures = []
        for suffix, reader, title, ylabel in (
                ("dev_bleu", _bleu_curve, "dev BLEU", "BLEU"),
                ("dev_loss", dev_loss_curve, "dev loss", "loss (nats per token)")):
            curves = {a: _curve_stats(list(r.values()), reader) for a, r in runs.items() if r}
            curves = {a: c for a, c in curves.items() if c[0]}
            if curves:
                path = os.path.join(figures_dir, f"{name}_{suffix}.svg")
                write_line_plot(path, {a: (c[0], c[1]) for a, c in curves.items()},
                                title=f"{study.title}: {title}",
                                subtitle="mean over seeds; band: their range"
                                + ("; the training loss on dev (label smoothing "
                                   "included where training has it)"
                                   if suffix == "dev_loss" else ""),
                                xlabel="training step", ylabel=ylabel,
                                bands={a: (c[0], c[2], c[3]) for a, c in curves.items()
                                       if len(runs[a]) > 1})
                figures.append(path)
        loss = {a: _curve_stats(list(r.values()), _loss_curve)[:2] for a, r in runs.items()
                if r}
        if any(c[0] for c in loss.values()):
            path = os.path.join(figures_dir, f"{name}_loss.svg")
            write_line_plot(path, {a: c for a, c in loss.items() if c[0]},
                            title=f"{study.title}: training loss",
                            subtitle="moving average of 50 steps, mean over seeds",
                            xlabel="training step", ylabel="loss")
            figures.append(path)
        base = os.path.dirname(os.path.dirname(figures[0])) if figures else ""
        lines += [""] + [f"![{os.path.basename(p)}]({os.path.relpath(p, base)})"
                         for p in figures]
    differences = data_differences(runs)
    if differences:
        lines += ["", "**Not comparable yet:** these runs trained on different data settings, "
                  "so no claim is judged until the runs named below are trained again "
                  "with the study's settings:", ""]
        for key, values in differences.items():
            lines.append(f"- `{key}`: " + "; ".join(
                f"{value} ({', '.join(runs_)})" for value, runs_ in values.items()))
    if not differences and summary.get(study.baseline):
        lines += ["", f"Every arm against {study.baseline} (the seeds both ran; the "
                  "claims' tests against 0, Holm-adjusted over each line's own tests):", ""]
        for label, values in summary.items():
            if values["arm"] == study.baseline:
                continue
            base = _baseline_label(study, values, summary)
            tests = row_tests[label]
            adjusted = holm([t["effect"].p_value for t in tests])
            verdict = claim_text(values, summary[base], Claim(label, label, base, ""),
                                 tests, adjusted, f"family of {len(tests)}")
            lines.append(f"- {label} against {base}: {verdict}")
    # The claims' tests are one family (Holm): every claim's test BLEU and dev
    # cross-entropy tests of this study.
    pairs, families = {}, []
    if not differences:
        for claim in study.claims:
            arm = summary.get(claim.arm)
            if arm and claim.baseline != study.baseline and runs[claim.baseline]:
                # The table's tests are against the study's baseline: this claim's pair
                # gets its own, seed by seed.
                arm = paired_against(arm, runs[claim.arm], runs[claim.baseline], samples,
                                     references_runs=baseline_runs)
            base = summary.get(claim.baseline)
            if claim.baseline == study.baseline and not claim.threshold \
                    and claim.arm in row_tests:
                tests = row_tests[claim.arm]  # the table's own tests (the same resamples)
            else:
                tests = claim_tests(arm, base, claim, samples) if arm and base else []
            pairs[claim] = (arm, base, tests)
            families += [t["effect"].p_value for t in pairs[claim][2]]
    adjusted_family = iter(holm(families))
    family = f"family of {len(families)}"
    claims = []
    lines += ["", f"Claims (each verdict by its Holm-adjusted p over the family of this "
              f"study's {len(families)} claim test{'s' if len(families) != 1 else ''}: "
              "test BLEU and, where both arms measure the same kind, dev cross-entropy of "
              "every claim):", ""]
    for claim in study.claims:
        tests, adjusted = [], []
        if differences:
            verdict = ("**not comparable yet** (data settings differ: "
                       f"{', '.join(differences)})")
        else:
            arm, base, tests = pairs[claim]
            adjusted = [next(adjusted_family) for _ in tests]
            verdict = claim_text(arm, base, claim, tests, adjusted, family)
            if study.minutes and arm and summary.get(claim.baseline):
                verdict += (f"; in the same {study.minutes:g} minutes it trained "
                            f"{arm['steps'] / summary[claim.baseline]['steps']:.2f}× the "
                            f"steps of {claim.baseline} ({arm['steps']:,.0f} against "
                            f"{summary[claim.baseline]['steps']:,.0f})")
        lines.append(f"- {claim.text} (paper: {claim.paper_delta}): {verdict}")
        claims.append({"text": claim.text, "arm": claim.arm, "baseline": claim.baseline,
                       "threshold": claim.threshold, "paper": claim.paper_delta,
                       "verdict": verdict, "family": family if tests else None,
                       "tests": [{"metric": t["metric"], "p_holm": p,
                                  "verdict": adjusted_verdict(t["effect"].mean,
                                                              t["effect"].threshold, p),
                                  "interval": ("seeds and sentences"
                                               if hasattr(t["effect"], "se_sentences")
                                               else "seeds only"),
                                  "effect": _effect_dict(t["effect"])}
                                 for t, p in zip(tests, adjusted)]})
    if collect is not None:
        collect.update(_numbers(study, summary, claims, differences, row_tests))
    return "\n".join(lines) + "\n"


def _baseline_label(study, values, summary):
    """The row an arm's row is judged against: the baseline decoded the same way (`"softmax
    (beam5)"` for `"vmf (beam5)"`) where it has that row, else the baseline."""
    same = f"{study.baseline} ({values['variant']})" if values["variant"] else study.baseline
    return same if same in summary else study.baseline


def _effect_dict(effect):
    return {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
            for key, value in dataclasses.asdict(effect).items()}


def _numbers(study, summary, claims, differences, row_tests):
    """The dict of `results.json`: what the page shows, as numbers."""
    arms = {}
    for label, values in summary.items():
        arm = study.arms[values["arm"]]
        entry = {"arm": values["arm"], "decoding": values["variant"], "preset": arm.preset,
                 "set": dict(arm.overrides), "runs": {}}
        for index, seed in enumerate(values["seeds"]):
            entry["runs"][str(seed)] = {
                "run_dir": values["run_dirs"][index], "dev_bleu": values["dev"][index],
                "test_bleu": values["test"][index], "test_chrf": values["test_chrf"][index],
                "test_length_ratio": values["test_length_ratio"][index],
                "dev_cross_entropy": values["dev_ce"][index],
                "dev_cross_entropy_kind": values["ce_kinds"][index],
                "forced_decoding": forced_scores(values["run_dirs"][index]),
                "steps": values["steps_run"][index], "train_minutes": values["minutes"][index],
                "p_test_vs_baseline": values["p_test"][index] if values["p_test"] else None,
                "p_dev_vs_baseline": values["p_dev"][index] if values["p_dev"] else None,
                "stall": values["stalls"][seed]}
        baseline = summary.get(_baseline_label(study, values, summary))
        if values["arm"] != study.baseline and baseline:
            entry["baseline"] = _baseline_label(study, values, summary)
            tests = {t["metric"].split(" (")[0]: t["effect"] for t in row_tests[label]}
            entry["test_bleu_vs_baseline"] = (_effect_dict(tests["test BLEU"])
                                              if "test BLEU" in tests else None)
            entry["dev_cross_entropy_vs_baseline"] = (
                _effect_dict(tests["dev cross-entropy"]) if "dev cross-entropy" in tests
                else None)
        arms[label] = entry
    return {"title": study.title, "baseline": study.baseline,
            "budget": ({"minutes": study.minutes} if study.minutes
                       else {"steps": study.steps}),
            "eval_every": study.eval_every, "select_by": study.select_by,
            "not_comparable": dict(differences), "arms": arms, "claims": claims}


def _shared_overrides(study):
    """`{key: value}` of the overrides every arm of `study` sets alike (two or more arms)."""
    arms = [dict(arm.overrides) for arm in study.arms.values()]
    if len(arms) < 2:
        return {}
    return {key: value for key, value in arms[0].items()
            if all(key in other and other[key] == value for other in arms[1:])}


def _mean_steps(run_dirs):
    """The mean number of steps trained by finished runs (their results.json), or None."""
    steps = []
    for run_dir in run_dirs:
        with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
            steps.append(json.load(f)["steps"])
    return statistics.fmean(steps) if steps else None


def _steps_cell(steps, baseline_steps, is_baseline):
    if is_baseline or not baseline_steps:
        return f"{steps:,.0f}"
    return f"{steps:,.0f} (×{steps / baseline_steps:.2f})"


def _mean_sd(values, digits=2):
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def _interval_cell(tests):
    """`+1.00 [-0.52, +2.52]`: the mean per-seed test BLEU Δ of a row's tests
    (`stats.claim_tests`) and its 95 % interval over seeds and sentences (`*` after it:
    over seeds only, records without per-sentence statistics; one seed without them:
    the Δ alone; none: a dash)."""
    effect = next((t["effect"] for t in tests or () if t["metric"] == "test BLEU"), None)
    if effect is None:
        return "—"
    if not math.isfinite(effect.low):
        return f"{effect.mean:+.2f}"
    star = "" if hasattr(effect, "se_sentences") else "*"
    return f"{effect.mean:+.2f} [{effect.low:+.2f}, {effect.high:+.2f}]{star}"


def text_metrics(run_dir, split, variant=None, references_dir=None):
    """`{"chrf", "length_ratio", "bleu_units"}` of a run's `split` translations against
    the references it was scored on, or those of `references_dir` (sacrebleu's chrF;
    output length / reference length in BLEU's 13a tokens, as its brevity penalty reads
    them; BLEU's per-sentence statistics, `combined.sentence_bleu_statistics`)."""
    from sacrebleu.metrics import BLEU

    from tf_outheads.metrics import corpus_chrf, read_lines
    from tf_outheads_zoo.compare import run_references
    from tf_outheads_zoo.study.stats import hyp_name

    hypotheses = read_lines(os.path.join(run_dir, hyp_name(split, variant)))
    references = run_references(references_dir or run_dir, split)
    bleu = BLEU().corpus_score(hypotheses, [references])
    return {"chrf": corpus_chrf(hypotheses, references).score,
            "length_ratio": bleu.sys_len / max(bleu.ref_len, 1),
            "bleu_units": sentence_bleu_statistics(hypotheses, references)}


def sentence_nll(run_dir):
    """`(sentences, 2)` rows of (negative log-probability, tokens) of a run's dev
    references by forced decoding (`runner.score_run`), or None (scored before they were
    kept, or not scored)."""
    import numpy as np

    dev = (forced_scores(run_dir) or {}).get("dev") or {}
    if "sentence_nll" not in dev:
        return None
    return np.column_stack([dev["sentence_nll"], dev["sentence_tokens"]])


def _curve_stats(run_dirs, reader):
    """`(xs, means, lows, highs)` over runs at each x all runs share."""
    curves = [dict(zip(*reader(d))) for d in run_dirs]
    curves = [c for c in curves if c]
    if not curves:
        return [], [], [], []
    xs = sorted(set.intersection(*(set(c) for c in curves)))
    return (xs, [statistics.fmean(c[x] for c in curves) for x in xs],
            [min(c[x] for c in curves) for x in xs], [max(c[x] for c in curves) for x in xs])


def _loss_curve(run_dir, window=50):
    from tf_outheads_zoo.compare import moving_average, nll_curve

    steps, values = nll_curve(run_dir)
    return steps, moving_average(values, window)


def _bleu_curve(run_dir):
    path = os.path.join(run_dir, "bleu.jsonl")
    if not os.path.exists(path):
        return [], []
    records = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                records[record["step"]] = record["bleu"]
    return list(records), list(records.values())


def _data_settings(data, sizes=None):
    """The `DataConfig` `data` a run trained with (`_stored_data`) as a plain dict,
    compared as: the
    corpus by file name only (the same corpus sits at another path on another machine).

    `sizes`: `{corpus file name: training split size}` of corpora readable here; a
    shuffle buffer or tokenizer sample at least that large (or None: all of it) is
    the same setting, `"all"`: the same batches, the same pieces."""
    data = dataclasses.asdict(data)
    # ReWE's frozen target vectors are its method's input (trained on the same
    # training targets), not a difference in the data every arm sees.
    data.pop("target_vectors", None)
    data["corpus"] = os.path.basename(str(data["corpus"]))
    size = (sizes or {}).get(data["corpus"]) if data.get("train") is None else None
    for key in ("shuffle_buffer", "tokenizer_sample"):
        if size is not None and (data.get(key) is None or data[key] >= size):
            data[key] = "all"
    return data


def _stored_data(run_dir):
    """The `DataConfig` of a run's `run.json` (`preset.json`), read through the schema:
    records from before a key get the value they trained with."""
    from tf_outheads_zoo.stored import read_stored_run, stored_settings_path

    return read_stored_run(stored_settings_path(run_dir))[1].data


@functools.lru_cache(maxsize=None)
def _train_split_size(path, split, source, target):
    from tf_outheads import data as tfo_data

    return len(tfo_data.read_tsv(path, source=source, target=target, references=(),
                                 split=split, id_column=None))


def _corpus_sizes(stored):
    """`{corpus file name: pairs of its train split}` for the TSV corpora of the `data`
    sections `stored` found here (at the stored path, or the embedded corpus by name)."""
    from tf_outheads_zoo.config import EMBEDDED_CORPUS, data_set

    sizes = {}
    for data in stored:
        spec = data_set(data, "train")
        name = os.path.basename(str(data.corpus))
        if spec["kind"] != "tsv" or name in sizes:
            continue
        path = spec["path"]
        if not os.path.exists(path) and name == os.path.basename(EMBEDDED_CORPUS):
            path = EMBEDDED_CORPUS
        if os.path.exists(path):
            sizes[name] = _train_split_size(path, spec["split"], spec["source"],
                                            spec["target"])
    return sizes


def data_differences(runs):
    """`{"data.key": {value: ["arm seed", ...]}}` for every data setting on which the
    finished runs `{arm: {seed: run_dir}}` of one study disagree (pieces, batches,
    filters): arms trained on other data are not a comparison of output layers."""
    stored = {run_dir: _stored_data(run_dir)
              for arm_runs in runs.values() for run_dir in arm_runs.values()}
    sizes = _corpus_sizes(stored.values())
    seen = {}
    for arm_name, arm_runs in runs.items():
        for seed, run_dir in sorted(arm_runs.items()):
            for key, value in _data_settings(stored[run_dir], sizes).items():
                seen.setdefault(key, {}).setdefault(json.dumps(value, sort_keys=True), []
                                                    ).append(f"{arm_name} {seed}")
    return {f"data.{key}": values for key, values in sorted(seen.items()) if len(values) > 1}


def _markdown_table(rows):
    header, *body = rows
    return (["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in body])


def machine_description():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    import tensorflow as tf

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"TensorFlow {tf.__version__}")


def write_study_results(name, study, runs_dir, samples=1000, log=print):
    """`runs_dir/results.md` (its figures in `runs_dir/results/`) and `results.json` (the
    numbers, and the `winner` by `study.select_by`: `choose_winner`) of a study's runs;
    returns the numbers."""
    output = os.path.join(runs_dir, "results.md")
    numbers = {}
    section = study_report(name, runs_dir, os.path.join(runs_dir, "results"), samples,
                           study=study, collect=numbers)
    numbers["winner"] = choose_winner(numbers, study.select_by)
    winner = numbers["winner"]
    text = "\n".join([f"# {study.title}", "", _method_text(), "",
                      f"Machine: {machine_description()}.", "", section,
                      "", winner_text(winner, study.select_by)])
    for path, content in ((output, text), (os.path.join(runs_dir, "results.json"),
                                           json.dumps(numbers, indent=2) + "\n")):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
    for label, entry in numbers["arms"].items():
        for seed, run in entry["runs"].items():
            if entry["decoding"] is None and run["stall"]["stalled"]:
                log(f"[stall] {label} seed {seed}: " + "; ".join(run["stall"]["reasons"]))
    for claim in numbers["claims"]:
        log(f"[claim] {claim['text']}: {claim['verdict']}")
    log(f"[results] {output}, {os.path.join(runs_dir, 'results.json')}")
    return numbers


def _method_text():
    return (
        "Mean ± sd over seeds. A claim is judged by the seeds, each of which trains both "
        "arms, and by the test sentences, which every seed shares: the interval of the "
        "per-seed difference counts both noises (`tf_outheads_zoo.study.combined`: the "
        "seeds' t interval, and the test set's noise from a paired bootstrap of its "
        "sentences, one resample for every seed and both arms, joined on "
        "Welch–Satterthwaite degrees of freedom and never narrower than the seeds' "
        "interval; BLEU from sacrebleu's per-sentence statistics, the dev cross-entropy "
        "from each sentence's forced-decoding log-probability). The seeds alone, the "
        "t interval of earlier pages, sit beside it. A test **holds** when its p-value, "
        f"adjusted by Holm–Bonferroni over the family of the study's claim tests (test "
        f"BLEU and dev cross-entropy of every claim), is below {ALPHA:g} with the effect "
        "above the claim's threshold (0, or minus a stated margin), is **contradicted** "
        "when below it, and is **inconclusive** otherwise; the raw p is beside it. One "
        "seed gives no verdict (its training noise is unmeasured). Inconclusive tests say "
        f"the seeds that would give {POWER:.0%} power at the observed spread, and at the "
        "80 % upper confidence bound of that spread (three seeds can underestimate it "
        "several times over), or that no number of seeds would, the test set's noise "
        "alone being larger than the effect. The seeds of a study are fixed in its file "
        "before it runs: adding seeds after looking at an interval until it clears 0 is "
        "optional stopping and makes these intervals too narrow. The dev cross-entropy "
        "is that of forced decoding without label smoothing, per token, for runs scored "
        "since issue 53 and the Kumar study; older records give the training loss on "
        "dev (label-smoothed) and are marked as such and never compared with the "
        "former. A run that has not learned to read its source (the unigram or "
        "language-model plateau) is flagged **stalled** (`tf_outheads_zoo.study.stall`) "
        "and every verdict that uses it names it; records from before the check are "
        "\"not checked\". sacrebleu's paired bootstrap p-values per seed measure the "
        "test set's noise for one pair of runs; they are listed, and decide nothing. "
        "\"min / run\" is the wall clock of training (dev evaluations included), which "
        "grows when other jobs share the machine.")


def write_results(runs_dir=RECORDS_DIR, output=os.path.join("docs", "results.md"),
                  studies=None, samples=1000, log=print):
    """Writes the results page from the run records (or run directories); returns its path."""
    figures_dir = os.path.join(os.path.dirname(output) or ".", "results")
    sections = [study_report(name, os.path.join(runs_dir, name), figures_dir, samples)
                for name in (studies or STUDIES)]
    text = "\n".join([
        "# Results: which output layer is better?", "",
        "Written by `tf-outheads results` from the run records of `tf-outheads study` "
        f"(`{RECORDS_DIR}`: each run's scores, curves and translations; do not edit by hand). Every arm of a study trains on the same pieces for the same "
        "budget; seeds are the model's (the tokenizer is shared). The baselines are checked "
        "against OpenNMT-py by `benchmarks/peer_opennmt.py` "
        "(benchmarks/docs/peer_opennmt.md). " + _method_text(), "",
        f"Machine: {machine_description()}.", "",
        *sections,
    ])
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(output + ".tmp", output)
    log(f"[results] {output}")
    return output
