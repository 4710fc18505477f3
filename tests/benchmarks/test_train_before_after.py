"""benchmarks/train_before_after.py: window speeds from a run's loss curve, and rounds
taken in turns whose ratio says after's time over before's (a fake training)."""

import csv
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))

import train_before_after as tba  # noqa: E402


def write_curve(path, seconds_per_step, steps=12, tokens=100.0, skipped=()):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "epoch", "loss", "tokens", "time"])
        now = 1000.0
        for step in range(1, steps + 1):
            now += seconds_per_step(step)
            writer.writerow([step, 1, 5.0, "" if step in skipped else tokens, now])


def test_window_speeds_time_each_window_from_the_step_before_it(tmp_path):
    # Steps 1-2 slow (tracing), then 0.5 s per step; step 7 stalls for 2 s more.
    write_curve(tmp_path / "c.csv", lambda s: 5.0 if s <= 2 else 2.5 if s == 7 else 0.5)
    curve = tba.read_curve(tmp_path / "c.csv")
    speeds = tba.window_speeds(curve, warmup=2, window=5)
    # Steps 3-7: 500 tokens over 0.5 * 4 + 2.5 = 4.5 s; steps 8-12: 500 over 2.5 s.
    assert speeds == pytest.approx([500 / 4.5, 200.0])
    # Steps 3-6 (2 s) and 7-10 (4 s, the stall); 11-12 are not a full window.
    assert tba.window_speeds(curve, warmup=2, window=4) == pytest.approx([200.0, 100.0])
    with pytest.raises(ValueError, match="fewer than one window of 20"):
        tba.window_speeds(curve, warmup=2, window=20)


def test_steps_without_tokens_are_left_out(tmp_path):
    write_curve(tmp_path / "c.csv", lambda s: 1.0, steps=6, skipped=(4,))
    assert [row[0] for row in tba.read_curve(tmp_path / "c.csv")] == [1, 2, 3, 5, 6]


def test_bad_arguments_are_refused_naming_them(capsys):
    with pytest.raises(SystemExit):
        tba.parse_args(["--before", "abc", "--steps", "60", "--warmup", "50", "--window",
                        "25"])
    assert "--steps must leave one window after the warm-up: at least 75" in \
        capsys.readouterr().err
    args = tba.parse_args(["--before", "abc", "--presets", "a,b", "--", "--set", "x=1"])
    assert args.preset_list == ["a", "b"] and args.extra == ["--set", "x=1"]


def test_rounds_alternate_and_the_ratio_is_afters_time_over_befores(tmp_path, monkeypatch):
    """A fake training whose 'after' version takes 10 % longer per step: the ratio is
    1.10 in every round, so the verdict at the 1.03 limit is contradicted; the order
    of the versions alternates between rounds."""
    order = []

    def fake_worktree(revision, root, name):
        path = root / name
        path.mkdir(parents=True)
        return path

    def fake_training(tree, preset, steps, run_dir, extra):
        order.append(tree.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        per_step = 0.2 if tree.name == "before" else 0.22
        write_curve(run_dir / "loss_curves.csv", lambda s: per_step, steps=steps)
        # The older version writes preset.json, the newer run.json.
        name = "preset.json" if tree.name == "before" else "run.json"
        model = {"scaled_attention": tree.name == "after"}
        (run_dir / name).write_text(json.dumps({"preset": preset, "model": model}))

    monkeypatch.setattr(tba, "worktree", fake_worktree)
    monkeypatch.setattr(tba, "check_imports_from", lambda tree: None)
    monkeypatch.setattr(tba, "resolve", lambda revision: f"{revision}-hash")
    monkeypatch.setattr(tba, "run_training", fake_training)
    run = tba.subprocess.run

    def no_worktree_removal(command, *args, **kwargs):
        if command[:1] == ["git"] and "worktree" in command:
            return None
        return run(command, *args, **kwargs)

    monkeypatch.setattr(tba.subprocess, "run", no_worktree_removal)
    output = tmp_path / "out.json"
    record = tba.main(["--before", "abc", "--rounds", "3", "--steps", "40", "--warmup",
                       "5", "--window", "10", "--output", str(output)])
    assert order == ["before", "after", "after", "before", "before", "after"]
    assert record["commits"] == {"before": "abc-hash", "after": "HEAD-hash"}
    (row,) = record["rows"]
    assert row["ratios"] == pytest.approx([1.1] * 3)
    assert row["verdict"] == "contradicted"
    assert row["before_median"] == pytest.approx(500.0)  # 100 tokens per 0.2 s
    assert row["settings_changes"] == {"model.scaled_attention": [False, True]}
    saved = json.loads(output.read_text())
    assert saved["runs"]["lstm-cpu-tied"]["after"][0]["settings"]["preset"] == "lstm-cpu-tied"
    assert saved["config"]["before"] == "abc" and saved["machine"]["cpu_count"] >= 1
