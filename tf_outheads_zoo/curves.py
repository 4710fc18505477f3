"""`LossCurves`: the training loss of every step → CSV, and its plot at the end."""

import csv
import os
import time

import keras

from tf_outheads.training import backup as tfo_backup
from tf_outheads_zoo.plots import write_line_plot


class LossCurves(keras.callbacks.Callback):
    """Per-step training losses → CSV, and a plot at the end of training.

    Without ReWE (`rewe_weight=None`) one column, `loss` (the output layer's loss
    as compiled: the NLL, label smoothing included). With ReWE the curves of its
    Figure 3 (Jauregi Unanue et al. 2019): training loss (Eq. 7), NLL
    (`logits_loss`), ReWE loss (`rewe_loss`) and λ·ReWE. Keras logs running
    means over the epoch; the loss of each step is the increment of its loss
    tracker's sums (a Keras `Mean`: `total`, `count`). Rows are appended to
    `path` (`step,epoch,loss[,logits_loss,rewe_loss,weighted_rewe_loss],tokens,time`:
    the step's target tokens and the wall clock at its end), so a resumed run
    continues the file. At the end, the plot (`.svg` next to `path`,
    `tf_outheads_zoo.plots.write_line_plot`). `tf_outheads_zoo.compare.nll_curve` reads either form back.
    """

    def __init__(self, path, rewe_weight=None, log=print):
        super().__init__()
        self.path = path
        self.rewe_weight = None if rewe_weight is None else float(rewe_weight)
        self.names = ("loss",) if rewe_weight is None else ("loss", "logits_loss", "rewe_loss")
        self.columns = ("step", "epoch") + self.names + (
            () if rewe_weight is None else ("weighted_rewe_loss",)) + ("tokens", "time")
        self.log = log
        self._sums = {}
        self._epoch = 0

    def on_train_begin(self, logs=None):
        """A resumed run drops the rows of steps after its backup (it trains them again)."""
        if not os.path.exists(self.path):
            return
        step = int(self.model.optimizer.iterations.numpy())
        with open(self.path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        kept = rows[:1] + [row for row in rows[1:] if row and int(row[0]) <= step]
        if len(kept) != len(rows):
            def write(path):
                with open(path, "w", encoding="utf-8", newline="") as f:
                    csv.writer(f).writerows(kept)
            tfo_backup.write_atomically(self.path, write)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._sums = {}  # Keras resets its trackers at every epoch

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        trackers = {metric.name: metric for metric in self.model.metrics}
        row = {"step": int(self.model.optimizer.iterations.numpy()), "epoch": self._epoch + 1,
               # Target tokens of the step and the wall clock at its end: tokens/s
               # between two steps of one epoch (benchmarks/peer_opennmt.py).
               "tokens": logs.get("tokens", ""), "time": round(time.time(), 4)}
        for name in self.names:
            if name == "loss" and "step_loss" in logs:  # tf_outheads.training.fit
                row[name] = float(logs["step_loss"])
                continue
            sums = {v.name: float(v.numpy()) for v in getattr(trackers.get(name), "variables", ())}
            if {"total", "count"} <= set(sums):
                total, count = self._sums.get(name, (0.0, 0.0))
                self._sums[name] = (sums["total"], sums["count"])
                if sums["count"] > count:
                    row[name] = (sums["total"] - total) / (sums["count"] - count)
                    continue
            row[name] = float(logs.get(name, float("nan")))  # the running mean
        if self.rewe_weight is not None:
            row["weighted_rewe_loss"] = self.rewe_weight * row["rewe_loss"]
        columns = self.columns
        new_file = not os.path.exists(self.path)
        if not new_file:  # a resumed run keeps the columns its file has
            with open(self.path, encoding="utf-8", newline="") as f:
                columns = next(csv.reader(f), None) or columns
        with open(self.path, "a", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            if new_file:
                writer.writeheader()
            writer.writerow(row)

    def on_train_end(self, logs=None):
        if not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            return
        steps = [int(row["step"]) for row in rows]
        if self.rewe_weight is None:
            labels = (("loss", "training loss (NLL)"),)
            title = "Training loss per step"
        else:
            labels = (("loss", "training loss (NLL + λ·ReWE, Eq. 7)"),
                      ("logits_loss", "NLL"),
                      ("rewe_loss", "ReWE"),
                      ("weighted_rewe_loss", f"λ·ReWE (λ = {self.rewe_weight:g})"))
            title = "Training losses per step (ReWE, Figure 3)"
        series = {label: (steps, [float(row[column]) for row in rows]) for column, label in labels}
        image = os.path.splitext(self.path)[0] + ".svg"
        write_line_plot(image, series, title=title, xlabel="training step", ylabel="loss")
        self.log(f"[curves] {image}")
