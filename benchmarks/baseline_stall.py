"""Do the studies' baselines stall? Each preset × seed trained for a few hundred steps,
its dev BLEU at every evaluation, its dev loss, and the stall check of the study tool
(`tf_outheads_zoo.study.stall`: how much its dev references lose after mismatched
sources, the unigram plateau), plus the attention's shape on dev: its entropy over the
source (normalised by log of the source length) and the share of its mass on the last
source position (`</s>`), where a stalled attentional LSTM puts nearly all of it.

    python benchmarks/baseline_stall.py --seeds 1234,1,2,3,4,5 --steps 600
    python benchmarks/baseline_stall.py --set "train.learning_rate=2e-3" --runs-dir runs/bs-lr2

Runs are `tf-outheads train` subprocesses in `RUNS_DIR/<preset>/s<seed>` (one at a time;
a finished run is reused, so the command resumes), scored by `runner.score_run`. The
table flags a run below `--floor` × `--peer-bleu` at the last step (the issue's bar: half
of OpenNMT-py's healthy-seed dev BLEU at step 600, 13.0). BLEU does not depend on the
machine's load; the minutes do.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO_ROOT, described_machine, setup, write_record  # noqa: E402

PRESETS = ("lstm-cpu-tied", "lstm-cpu-softmax", "lstm-cpu-vmf-softmax")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS),
                        help="comma-separated presets (default: the studies' LSTM baselines)")
    parser.add_argument("--seeds", default="1234,1,2,3,4,5", help="comma-separated seeds")
    parser.add_argument("--steps", type=int, default=600, help="training steps per run")
    parser.add_argument("--eval-every", type=int, default=300, help="steps between dev BLEU")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a dotted override for every run (as tf-outheads train --set)")
    parser.add_argument("--runs-dir", default=os.path.join("runs", "baseline_stall"))
    parser.add_argument("--peer-bleu", type=float, default=13.0,
                        help="the peer's healthy-seed dev BLEU at the last step")
    parser.add_argument("--floor", type=float, default=0.5,
                        help="a run below floor x peer-bleu is flagged")
    parser.add_argument("--attention-sentences", type=int, default=64,
                        help="dev sentences of the attention statistics (0: none)")
    parser.add_argument("--output", default=os.path.join("benchmarks", "results",
                                                         "baseline_stall.json"))
    args = parser.parse_args(argv)
    args.preset_list = [p for p in args.presets.split(",") if p]
    args.seed_list = [int(s) for s in args.seeds.split(",") if s]
    if args.steps < 1 or args.eval_every < 1:
        parser.error(f"--steps and --eval-every must be at least 1. Received: "
                     f"--steps {args.steps}, --eval-every {args.eval_every}")
    return args


def train(run_dir, preset, seed, args):
    """`tf-outheads train` of one run unless it finished; its log in `train.log`."""
    if os.path.exists(os.path.join(run_dir, "results.json")):
        return 0.0
    os.makedirs(run_dir, exist_ok=True)
    command = [sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", preset,
               "--run-dir", run_dir, "--set", f"train.seed={seed}",
               "--set", f"train.max_steps={args.steps}",
               "--set", f"train.steps_per_epoch={args.eval_every}",
               "--set", "train.max_minutes=None", "--set", "train.patience=None"]
    for item in args.set:
        command += ["--set", item]
    started = time.perf_counter()
    env = dict(os.environ, TF_OUTHEADS_QUIET="1", TF_CPP_MIN_LOG_LEVEL="2")
    with open(os.path.join(run_dir, "train.log"), "a", encoding="utf-8") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=True,
                       cwd=str(REPO_ROOT))
    return time.perf_counter() - started


def attention_shape(run_dir, sentences):
    """`{"entropy", "last_source_mass"}` of the model's attention over `sentences` dev
    pairs, teacher-forced (means over target positions), or {} for a model without."""
    import numpy as np

    from tf_outheads.decoding.scoring import Scorer
    from tf_outheads.decoding.translator import string_tensor
    from tf_outheads_zoo.runs import load_run
    from tf_outheads_zoo.splits import read_split

    model, source_tokenizer, target_tokenizer, config = load_run(run_dir)
    if not sentences or not hasattr(model, "teacher_forced"):
        return {}
    pairs = read_split(config.data, "dev", log=lambda *_: None)
    scorer = Scorer(model, source_tokenizer, target_tokenizer)
    source_ids, target_in, target_out, _ = (t.numpy() for t in scorer.encode(
        string_tensor(pairs.sources[:sentences], "sources"),
        string_tensor(pairs.targets[:sentences], "targets")))
    outputs = model.teacher_forced(source_ids, target_in, return_alignments=True)
    if not isinstance(outputs, tuple):
        return {}
    weights = np.asarray(outputs[1])  # (B, T, S)
    lengths = (source_ids != 0).sum(axis=1)
    present = target_out != 0
    entropy = -(weights * np.log(weights + 1e-12)).sum(-1) / np.log(
        np.maximum(lengths, 2))[:, None]
    last = weights[np.arange(len(lengths)), :, lengths - 1]
    return {"entropy": float(entropy[present].mean()),
            "last_source_mass": float(last[present].mean())}


def measure(run_dir, args):
    """What a finished run shows: dev BLEU per evaluation, the last dev loss, the stall
    check and the attention's shape."""
    from tf_outheads_zoo.study.runner import score_run
    from tf_outheads_zoo.study.stall import stall_check

    score_run(run_dir, log=lambda *_: None)
    with open(os.path.join(run_dir, "bleu.jsonl"), encoding="utf-8") as f:
        bleu = {int(r["step"]): r["bleu"] for r in map(json.loads, f) if r}
    check = stall_check(run_dir)
    from tf_outheads_zoo.study.stats import dev_loss_curve

    losses = dev_loss_curve(run_dir)[1]
    return {"dev_bleu": bleu, "dev_loss": losses[-1] if losses else None,
            "source_gain": check["source_gain"], "stalled": check["stalled"],
            "reasons": check["reasons"],
            "attention": attention_shape(run_dir, args.attention_sentences)}


def main(argv=None):
    args = parse_args(argv)
    setup(None)
    started = time.perf_counter()
    machine = described_machine()
    bar = args.floor * args.peer_bleu
    rows = []
    print(f"{'preset':22} {'seed':>5} " + " ".join(
        f"{'@' + str(s):>7}" for s in range(args.eval_every, args.steps + 1, args.eval_every))
        + f" {'dev loss':>8} {'src gain':>8} {'attn H':>6} {'</s>':>5}  flags", flush=True)
    for preset in args.preset_list:
        for seed in args.seed_list:
            run_dir = os.path.join(args.runs_dir, preset, f"s{seed}")
            seconds = train(run_dir, preset, seed, args)
            row = dict(preset=preset, seed=seed, run_dir=run_dir, train_seconds=seconds,
                       **measure(run_dir, args))
            last = row["dev_bleu"].get(max(row["dev_bleu"])) if row["dev_bleu"] else None
            row["below_bar"] = last is not None and last < bar
            rows.append(row)
            flags = (["below bar"] if row["below_bar"] else []) + (
                ["stalled"] if row["stalled"] else [])
            attention = row["attention"]
            print(f"{preset:22} {seed:>5} " + " ".join(
                f"{row['dev_bleu'].get(s, float('nan')):7.2f}"
                for s in range(args.eval_every, args.steps + 1, args.eval_every))
                + f" {row['dev_loss'] or float('nan'):8.3f}"
                f" {row['source_gain'] if row['source_gain'] is not None else float('nan'):8.2f}"
                f" {attention.get('entropy', float('nan')):6.3f}"
                f" {attention.get('last_source_mass', float('nan')):5.2f}  "
                + ", ".join(flags), flush=True)
    summary = {}
    for preset in args.preset_list:
        finals = [r["dev_bleu"][max(r["dev_bleu"])] for r in rows if r["preset"] == preset]
        summary[preset] = {"min": min(finals), "median": statistics.median(finals),
                           "below_bar": sum(f < bar for f in finals), "runs": len(finals)}
        print(f"{preset}: dev BLEU at step {args.steps} min {min(finals):.2f}, median "
              f"{statistics.median(finals):.2f}; {summary[preset]['below_bar']} of "
              f"{len(finals)} below {bar:.2f} ({args.floor:g} × the peer's {args.peer_bleu:g})")
    write_record("baseline_stall", args, machine, started, {"rows": rows, "summary": summary,
                                                            "bar": bar})


if __name__ == "__main__":
    main()
