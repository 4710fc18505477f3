"""Decoding speed before and after a change: two commits, one machine, rounds taken in turns.

A speed goal such as "greedy decoding no more than 3 % slower than before this issue"
needs the two versions timed side by side, and more than once: on this 2-core
machine two runs of the *same* code differ by up to ~5 %. This script

1. checks out `--before` and `--after` (default: the working tree's HEAD) as
   detached git worktrees in a temporary folder (the working tree is not touched);
2. runs `benchmarks/decode.py` of each version with the same arguments (everything
   after `--`), `--rounds` times each, in the order A B, B A, A B, ... (each run a
   fresh process; the library is imported from that version's worktree);
3. for each row of decode.py's table present in both versions (decoder and beam
   width: `translator`, `savedmodel`, ...), takes the per-round ratio
   after / before of the median seconds of a pass, and reports the mean ratio with a
   95 % t-interval over rounds, and the verdict on `--limit` (default 1.03):
   `holds` (the interval's upper end is at or below it), `contradicted` (its lower end
   is above it) or `inconclusive` with the rounds that would settle it at the
   spread seen.

    python benchmarks/before_after.py --before 43daf42 --rounds 5 -- --beams 1,4 --sentences 200

Before the rounds, `graph_fingerprint.py` traces each version's Translator at the
`--beams` given to decode.py and says whether the graphs are the same op for op: where
they are, a pass differs only by the Python around the graph (0.6–3 % of a pass: measure
it with cProfile if it changed), so a timing ratio away from 1 is the machine.
2026-11-30: c947608 against efbdb5f traced the same graphs at beams 1 and 5, and 25
rounds gave 1.013 [0.978, 1.049] and 1.019 [0.997, 1.042] for the Translator.

With `--control DECODER` (e.g. `translator`, when a change leaves that path's code
untouched), every other row also gets its per-round ratio divided by the control's
ratio of the same round, whose processes ran both: what the machine did to that
round cancels. Two runs of the same commits (2026-11-28) gave the unchanged
Translator 0.993 and 1.024 after / before, the SavedModel 1.011 and 1.042, and the
SavedModel relative to the Translator 1.017 and 1.018.

Each round's records and the summary go to `--output` (JSON, default
benchmarks/results/before_after.json). Run it on a quiet machine: the rounds take
turns so that drift hits both versions alike, but another job's load still widens
the interval.
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
# Two-sided 95 % quantiles of Student's t by degrees of freedom (then ~1.96).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t95(df):
    """The two-sided 95 % t quantile for `df` degrees of freedom (a table; the next
    smaller tabulated df, conservative, past 30: 1.96)."""
    if df > 30:
        return 1.96
    return T95[max(d for d in T95 if d <= df)]


def interval(ratios, limit):
    """`{"mean", "low", "high", "verdict", "rounds_needed"}` of per-round ratios."""
    n = len(ratios)
    mean = statistics.fmean(ratios)
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "verdict": "inconclusive",
                "rounds_needed": None}
    sd = statistics.stdev(ratios)
    half = t95(n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if high <= limit:
        verdict, needed = "holds", None
    elif low > limit:
        verdict, needed = "contradicted", None
    else:
        # Rounds for the half-width to reach the distance to the limit (normal approx.).
        distance = abs(limit - mean)
        needed = (math.ceil((1.96 * sd / distance) ** 2) if distance > 0 and sd > 0
                  else None)
        verdict = "inconclusive"
    return {"mean": mean, "low": low, "high": high, "verdict": verdict,
            "rounds_needed": needed}


def add_relative(rows, control, limit):
    """`rows` with, on every row but the control's, `"relative"`: `interval` of its
    per-round ratios divided by the control's ratios of the same rounds (the
    control row of the same beam width, else width 1's)."""
    controls = {row["beam_size"]: row["ratios"] for row in rows if row["decoder"] == control}
    if not controls:
        raise ValueError(f"--control {control!r} is not a row of both versions' tables: "
                         f"{sorted({row['decoder'] for row in rows})}")
    out = []
    for row in rows:
        row = dict(row)
        if row["decoder"] != control:
            base = controls.get(row["beam_size"], controls.get(1))
            if base is not None:
                row["relative"] = interval([r / c for r, c in zip(row["ratios"], base)], limit)
        out.append(row)
    return out


def worktree(revision, root, name):
    path = root / name
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet",
                    str(path), revision], check=True)
    return path


def check_imports_from(tree):
    """Fails unless a process with `PYTHONPATH=tree` imports the library from `tree`
    (not from an installed or editable copy elsewhere)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    origin = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; "
         "print(u.find_spec('tf_outheads').origin)"],
        env=env, cwd=str(tree), capture_output=True, text=True, check=True).stdout.strip()
    if not pathlib.Path(origin).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"before_after: the library of {tree} would be imported from "
                         f"{origin}")


def run_decode(tree, args, output):
    env = dict(os.environ, PYTHONPATH=str(tree), TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, str(tree / "benchmarks" / "decode.py"), *args,
               "--output", str(output)]
    result = subprocess.run(command, env=env, cwd=str(tree), capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"before_after: {' '.join(command)} failed:\n{result.stderr[-3000:]}")
    with open(output, encoding="utf-8") as f:
        return json.load(f)


def graph_fingerprints(tree, args):
    """`graph_fingerprint.py` (this version's script) with `tree`'s library and decode.py:
    `{beam: {function: [fingerprints]}}` of the graphs its `Translator` traces."""
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'benchmarks'}",
               TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, str(HERE / "graph_fingerprint.py"), *args]
    result = subprocess.run(command, env=env, cwd=str(tree), capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"before_after: {' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def same_graphs(before, after):
    """`{beam: bool}`: whether both versions traced the same graphs at that beam width."""
    return {beam: before.get(beam) == after.get(beam) for beam in sorted(set(before) | set(after))}


def medians(record):
    """`{(decoder, beam_size): median seconds of a pass}` of a decode.py record."""
    return {(row["decoder"], row["beam_size"]): row["seconds"]["median"]
            for row in record["throughput"]["rows"]}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    decode_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it (default HEAD)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each version")
    parser.add_argument("--limit", type=float, default=1.03,
                        help="the largest acceptable after/before time ratio (default 1.03)")
    parser.add_argument("--output", default=str(HERE / "results" / "before_after.json"))
    parser.add_argument("--control", default=None,
                        help="a decoder whose code the change leaves alone: the other rows "
                             "are also reported relative to its ratio of the same round")
    args = parser.parse_args(own)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1. Received: {args.rounds}")
    started = time.perf_counter()
    root = pathlib.Path(tempfile.mkdtemp(prefix="before-after-"))
    trees = {}
    try:
        trees = {"before": worktree(args.before, root, "before"),
                 "after": worktree(args.after, root, "after")}
        for tree in trees.values():
            check_imports_from(tree)
        graphs = {side: graph_fingerprints(tree, decode_args) for side, tree in trees.items()}
        identical = same_graphs(graphs["before"], graphs["after"])
        print("decode graphs before and after: " + ", ".join(
            f"beam {beam} {'identical' if same else 'different'}"
            for beam, same in identical.items()), flush=True)
        runs = {"before": [], "after": []}
        for round_index in range(args.rounds):
            order = ("before", "after") if round_index % 2 == 0 else ("after", "before")
            for side in order:
                record = run_decode(trees[side], decode_args,
                                    root / f"{side}-{round_index}.json")
                runs[side].append(record)
                print(f"round {round_index + 1}/{args.rounds} {side}: " + ", ".join(
                    f"{decoder}/{beam} {seconds:.3f} s" for (decoder, beam), seconds
                    in sorted(medians(record).items())), flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(tree)], check=False)
        shutil.rmtree(root, ignore_errors=True)  # the records are in `runs`
    rows = []
    shared = sorted(set(medians(runs["before"][0])) & set(medians(runs["after"][0])))
    print(f"\n=== AFTER / BEFORE (seconds of a pass; {args.rounds} rounds; limit "
          f"{args.limit}) ===")
    print(f"{'decoder':<12} {'beam':>4} {'mean':>7} {'95% interval':>17}  verdict")
    for key in shared:
        ratios = [medians(after)[key] / medians(before)[key]
                  for before, after in zip(runs["before"], runs["after"])]
        summary = interval(ratios, args.limit)
        rows.append({"decoder": key[0], "beam_size": key[1], "ratios": ratios, **summary})
        span = (f"[{summary['low']:.3f}, {summary['high']:.3f}]"
                if summary["low"] is not None else "-")
        more = (f" (~{summary['rounds_needed']} rounds would settle it)"
                if summary["rounds_needed"] else "")
        print(f"{key[0]:<12} {key[1]:>4} {summary['mean']:>7.3f} {span:>17}  "
              f"{summary['verdict']}{more}")
    if args.control:
        rows = add_relative(rows, args.control, args.limit)
        print(f"\n=== RELATIVE TO {args.control} (each round's ratio over its ratio) ===")
        for row in rows:
            if "relative" in row:
                summary = row["relative"]
                span = (f"[{summary['low']:.3f}, {summary['high']:.3f}]"
                        if summary["low"] is not None else "-")
                print(f"{row['decoder']:<12} {row['beam_size']:>4} {summary['mean']:>7.3f} "
                      f"{span:>17}  {summary['verdict']}")
    record = {"benchmark": "before_after", "before": args.before, "after": args.after,
              "control": args.control,
              "decode_args": decode_args, "rounds": args.rounds, "limit": args.limit,
              "rows": rows, "runs": runs, "graphs": graphs, "identical_graphs": identical,
              "load_average_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg")
              else None,
              "wall_seconds": time.perf_counter() - started}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {args.output}")
    return record


if __name__ == "__main__":
    main()
