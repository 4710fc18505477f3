"""Training speed before and after a change: two commits, one machine, rounds taken in turns.

The training counterpart of `before_after.py` (issue 58). For each round, in the order
A B, B A, A B, ..., it runs `tf-outheads train --preset P --max-steps N` of each version
(a fresh process and run directory; the library imported from a detached worktree of
that commit, as `before_after.py` does) and reads the run's `loss_curves.csv`, which
every version since the CLI's first release writes with each step's target tokens and
wall-clock time. A run's speed (`train_speed.py`) is the median over windows of
`--window` steps, after `--warmup` steps (tracing, the first batches), of the window's
target tokens per second: one slow window (another process waking up) moves a median
little. The per-round ratio is before / after of those speeds, i.e. after's time over
before's for the same tokens (above 1: slower after), reported as a mean with a 95 %
t-interval over rounds (`before_after.interval`) and its verdict on `--limit`.

    python benchmarks/train_before_after.py --before 2aa41f2 --rounds 5 \\
        --presets lstm-cpu-tied,transformer-cpu --steps 200

The runs' training data, tokenizers and settings are each version's own for the preset:
where a change altered the preset (its model, its batches), the ratio measures that too,
and the record keeps both versions' settings (`preset.json`) and tokens per step to say
so. Records of every run and the summary go to `--output` (JSON). Run it alone: the
rounds take turns so that drift hits both versions alike, but another job's load still
widens the interval.
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from before_after import check_imports_from, interval, worktree  # noqa: E402
from common import machine_info, write_record  # noqa: E402
from train_speed import read_curve, window_speeds  # noqa: E402

REPO = HERE.parent


def settings_changes(before, after):
    """`{"section.key": [before, after]}` where two runs' settings differ (paths and the
    description left out), or None when either is unknown."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    changes = {}
    for section in ("data", "model", "train", "decode"):
        old, new = before.get(section) or {}, after.get(section) or {}
        for key in sorted(set(old) | set(new)):
            if key != "corpus" and old.get(key, "<absent>") != new.get(key, "<absent>"):
                changes[f"{section}.{key}"] = [old.get(key, "<absent>"),
                                               new.get(key, "<absent>")]
    return changes


def run_training(tree, preset, steps, run_dir, extra):
    """`tf-outheads train` of `tree`'s library for `steps` steps; its log in run_dir."""
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2",
               TF_OUTHEADS_QUIET="1")
    command = [sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", preset,
               "--run-dir", str(run_dir), "--max-steps", str(steps),
               "--set", f"train.steps_per_epoch={steps}", "--set", "train.max_minutes=None",
               *extra]
    os.makedirs(run_dir, exist_ok=True)
    with open(run_dir / "benchmark.log", "w", encoding="utf-8") as out:
        result = subprocess.run(command, env=env, cwd=str(tree), stdout=out,
                                stderr=subprocess.STDOUT)
    if result.returncode != 0:
        log = (run_dir / "benchmark.log").read_text(encoding="utf-8")[-3000:]
        raise SystemExit(f"train_before_after: {' '.join(command)} failed:\n{log}")


def resolve(revision):
    """The commit hash of `revision` in this repository (recorded: HEAD moves)."""
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", revision], check=True,
                          capture_output=True, text=True).stdout.strip()


def measure(tree, preset, args, run_dir):
    """One run's record: window speeds, their median, tokens per step, the settings."""
    run_training(tree, preset, args.steps, run_dir, args.extra)
    curve = read_curve(run_dir / "loss_curves.csv")
    speeds = window_speeds(curve, args.warmup, args.window)
    settings = None
    for name in ("run.json", "preset.json"):  # the run's settings (older versions: preset.json)
        if (run_dir / name).exists():
            settings = json.loads((run_dir / name).read_text(encoding="utf-8"))
            break
    return {"speeds": speeds, "median": statistics.median(speeds),
            "tokens_per_step": statistics.fmean(row[1] for row in curve),
            "steps": len(curve), "settings": settings}


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after `--` go to every `tf-outheads train` (e.g. -- --set "
               "data.batch_tokens=1024).")
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it (default HEAD)")
    parser.add_argument("--presets", default="lstm-cpu-tied",
                        help="comma-separated presets (default lstm-cpu-tied)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each version")
    parser.add_argument("--steps", type=int, default=200, help="training steps per run")
    parser.add_argument("--warmup", type=int, default=50, help="steps left out first")
    parser.add_argument("--window", type=int, default=25, help="steps per timed window")
    parser.add_argument("--limit", type=float, default=1.03,
                        help="the largest acceptable after/before time ratio (default 1.03)")
    parser.add_argument("--output", default=str(HERE / "results" / "train_before_after.json"))
    args = parser.parse_args(own)
    args.extra = extra
    args.preset_list = [p for p in args.presets.split(",") if p]
    if args.rounds < 1 or args.window < 1 or args.warmup < 1:
        parser.error(f"--rounds, --window and --warmup must be >= 1. Received: "
                     f"{args.rounds}, {args.window}, {args.warmup}")
    if args.steps < args.warmup + args.window:
        parser.error(f"--steps must leave one window after the warm-up: at least "
                     f"{args.warmup + args.window}. Received: {args.steps}")
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    root = pathlib.Path(tempfile.mkdtemp(prefix="train-before-after-"))
    trees, runs = {}, {p: {"before": [], "after": []} for p in args.preset_list}
    commits = {"before": resolve(args.before), "after": resolve(args.after)}
    try:
        trees = {side: worktree(commit, root, side) for side, commit in commits.items()}
        for tree in trees.values():
            check_imports_from(tree)
        for round_index in range(args.rounds):
            order = ("before", "after") if round_index % 2 == 0 else ("after", "before")
            for preset in args.preset_list:
                for side in order:
                    run_dir = root / "runs" / f"{preset}-{side}-{round_index}"
                    record = measure(trees[side], preset, args, run_dir)
                    runs[preset][side].append(record)
                    shutil.rmtree(run_dir, ignore_errors=True)
                    print(f"round {round_index + 1}/{args.rounds} {preset} {side}: "
                          f"{record['median']:,.0f} tokens/s (median of "
                          f"{len(record['speeds'])} windows; {record['tokens_per_step']:,.0f} "
                          "tokens per step)", flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(tree)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    print(f"\n=== AFTER / BEFORE (time for the same tokens; {args.rounds} rounds; limit "
          f"{args.limit}) ===")
    print(f"{'preset':<18} {'before tok/s':>12} {'after tok/s':>12} {'mean':>7} "
          f"{'95% interval':>17}  verdict")
    for preset in args.preset_list:
        before, after = runs[preset]["before"], runs[preset]["after"]
        ratios = [b["median"] / a["median"] for b, a in zip(before, after)]
        summary = interval(ratios, args.limit)
        rows.append({"preset": preset, "ratios": ratios, **summary,
                     "settings_changes": settings_changes(before[0]["settings"],
                                                          after[0]["settings"]),
                     "before_median": statistics.median(r["median"] for r in before),
                     "after_median": statistics.median(r["median"] for r in after)})
        span = (f"[{summary['low']:.3f}, {summary['high']:.3f}]"
                if summary["low"] is not None else "-")
        more = (f" (~{summary['rounds_needed']} rounds would settle it)"
                if summary["rounds_needed"] else "")
        print(f"{preset:<18} {rows[-1]['before_median']:>12,.0f} "
              f"{rows[-1]['after_median']:>12,.0f} {summary['mean']:>7.3f} {span:>17}  "
              f"{summary['verdict']}{more}")
        if rows[-1]["settings_changes"]:
            print(f"  {preset} settings that differ (before -> after): " + "; ".join(
                f"{key} {old!r} -> {new!r}"
                for key, (old, new) in rows[-1]["settings_changes"].items()))
    return write_record("train_before_after", args, machine_info(), started,
                        {"commits": commits, "rows": rows, "runs": runs})


if __name__ == "__main__":
    main()
