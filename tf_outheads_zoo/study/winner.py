"""The winner of a study: the best arm by a dev metric and its best seed
(`choose_winner`, never chosen on test), its line on the page (`winner_text`) and its
export as a SavedModel (`export_winner`)."""

import json
import os
import statistics


def choose_winner(numbers, select_by="dev_bleu"):
    """The best arm by the mean over its seeds of `select_by` on dev (`"dev_bleu"`: the
    highest; `"dev_cross_entropy"`: the lowest, among arms of one kind of cross-entropy),
    and its best seed by the same: `{"arm", "seed", "run_dir", "metric", "arm_mean",
    "value", "dev_bleu", "test_bleu", "arm_means"}`, or None without a finished run.
    Never chosen on test; extra decodings of an arm are not candidates (the export is of
    the run, with its own decoding settings).

    Raises:
        ValueError: `select_by` unknown, or cross-entropies of different kinds.
    """
    from tf_outheads_zoo.study.file import SELECT_BY

    if select_by not in SELECT_BY:
        raise ValueError(f"select_by must be one of {', '.join(SELECT_BY)}. "
                         f"Received: {select_by!r}")
    key = select_by
    sign = 1.0 if key == "dev_bleu" else -1.0
    candidates = {label: entry for label, entry in numbers["arms"].items()
                  if entry["decoding"] is None and entry["runs"]
                  and all(r[key] is not None for r in entry["runs"].values())}
    if key == "dev_cross_entropy":
        kinds = {r["dev_cross_entropy_kind"] for entry in candidates.values()
                 for r in entry["runs"].values()}
        if len(kinds) > 1:
            raise ValueError("select_by: dev_cross_entropy compares the arms' dev "
                             f"cross-entropies, but they measure different things: "
                             f"{sorted(kinds)}. Choose by dev_bleu.")
    if not candidates:
        return None
    means = {label: statistics.fmean(r[key] for r in entry["runs"].values())
             for label, entry in candidates.items()}
    best = max(means, key=lambda label: sign * means[label])
    runs = candidates[best]["runs"]
    seed = max(runs, key=lambda s: sign * runs[s][key])
    return {"arm": best, "seed": int(seed), "run_dir": runs[seed]["run_dir"],
            "metric": select_by, "arm_mean": means[best], "value": runs[seed][key],
            "seeds": len(runs), "dev_bleu": runs[seed]["dev_bleu"],
            "test_bleu": runs[seed]["test_bleu"], "arm_means": means}


def winner_text(winner, select_by):
    if winner is None:
        return "Winner: none yet (no finished run)."
    others = ", ".join(f"{label} {value:.3f}" for label, value in sorted(
        winner["arm_means"].items(), key=lambda item: item[1], reverse=select_by == "dev_bleu"))
    return (f"Winner by {select_by} (mean over each arm's seeds, then its best seed; never "
            f"on test): **{winner['arm']}**, seed {winner['seed']} ({select_by} "
            f"{winner['value']:.3f}; test BLEU {winner['test_bleu']:.2f}). Arm means: "
            f"{others}. The intervals above say whether its lead is more than the seeds' "
            "noise.")


def export_winner(numbers, directory, log=print):
    """Exports the winner of a study's `results.json` numbers (`choose_winner`) as the
    SavedModel of `tf-outheads export` in `directory`, with `winner.json` beside it
    naming the arm, seed, metric and scores; returns the SavedModel's path."""
    from tf_outheads_zoo.runs import export_run

    winner = numbers.get("winner")
    if not winner:
        raise ValueError("No winner to export: the study has no finished run")
    path = export_run(winner["run_dir"], directory)
    with open(os.path.join(directory, "winner.json"), "w", encoding="utf-8") as f:
        json.dump(dict(winner, study=numbers["title"]), f, indent=2)
    log(f"[study] winner {winner['arm']} seed {winner['seed']} ({winner['metric']} "
        f"{winner['value']:.3f}) exported to {path}")
    return path
