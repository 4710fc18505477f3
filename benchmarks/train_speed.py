"""Training speed read from the logs of finished runs: median target tokens/s over windows.

One mechanism for every training comparison (`peer_opennmt.py`, `train_before_after.py`):
a run's speed is the median, over windows of a fixed number of steps after a warm-up
(tracing, the first batches), of each window's target tokens per second. One slow window
(another process waking up, a checkpoint being written) moves a median little; a sum over
the whole run would take it in whole.

- Ours: `loss_curves.csv` has each step's target tokens and wall-clock time. A window's
  speed is its steps' tokens over the time from the step before the window to its last
  step; a step that opens an epoch is left out, tokens and time (the evaluation between
  epochs is in its time).
- OpenNMT-py: each report line (`report_every` steps) gives the target tokens/s of the
  steps since the previous report (`onmt.utils.Statistics` restarts at each report), so
  each report after the warm-up is one window.
"""

import csv
import re
import statistics

WARMUP = 50
# OpenNMT-py's log line: "Step 50/ 1500; acc: 9.1; ppl: 812.3; xent: 6.7; lr: 0.00500;
# sents: 1234; bsz: 29/34/43; 4096/5904 tok/s; 17 sec;"
STEP_LINE = re.compile(r"Step\s+(\d+)/\s*\d+;.*?xent:\s*([\d.]+);.*?\s(\d+)/\s*(\d+) tok/s;"
                       r"\s*(\d+) sec")


def report_every(steps):
    """Steps per window on both sides (the peer's `report_every`) for a run of `steps`."""
    return 25 if steps >= 100 else 10


def read_curve(path):
    """`[(step, tokens, time, epoch)]` of a run's `loss_curves.csv` (rows without tokens,
    as written by a step that was skipped, are left out)."""
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("tokens") not in (None, ""):
                rows.append((int(row["step"]), float(row["tokens"]), float(row["time"]),
                             row.get("epoch")))
    return rows


def window_speeds(curve, warmup, window):
    """Target tokens per second of each full window of `window` steps after `warmup`
    (steps `warmup + 1 ... warmup + window`, and so on), from `read_curve`'s rows."""
    before = [row for row in curve if row[0] <= warmup]
    if not before:
        raise ValueError(f"no step at or before the warm-up ({warmup}) to time from")
    after = [row for row in curve if row[0] > warmup]
    speeds, previous = [], before[-1]
    for first in range(0, len(after) - window + 1, window):
        tokens = seconds = 0.0
        for row in after[first:first + window]:
            if row[3] == previous[3]:  # a step opening an epoch is left out
                tokens += row[1]
                seconds += row[2] - previous[2]
            previous = row
        if seconds <= 0:
            raise ValueError(f"steps {after[first][0]}-{previous[0]}: time did not advance")
        speeds.append(tokens / seconds)
    if not speeds:
        raise ValueError(f"{len(after)} steps after the warm-up: fewer than one window "
                         f"of {window}")
    return speeds


def our_loss_reports(path, every):
    """Mean training loss of each `every`-step window (OpenNMT-py's report interval)."""
    with open(path, encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if row.get("time")]
    reports = []
    for start in range(0, len(rows), every):
        window = rows[start:start + every]
        reports.append((int(window[-1]["step"]),
                        statistics.fmean(float(r["loss"]) for r in window)))
    return reports


def parse_peer_log(text):
    """OpenNMT-py's report lines → list of `(step, xent, src_tok_s, tgt_tok_s, seconds)`."""
    return [(int(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4)),
             int(m.group(5))) for m in STEP_LINE.finditer(text)]


def peer_window_speeds(reports, warmup=WARMUP):
    """Target tokens/s of each of the peer's reports whose window starts after `warmup`."""
    speeds = [report[3] for previous, report in zip(reports, reports[1:])
              if previous[0] >= warmup]
    if not speeds:
        raise ValueError(f"no report of the peer after step {warmup}: "
                         f"{[r[0] for r in reports]}")
    return speeds
