"""`benchmarks/profile_train.py`: its `--quick` run end to end (a smoke test, no timing
asserted), and the sums of a small hand-made trace, kind by kind."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "profile_train.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
PS = 1e12  # picoseconds a second: the trace's starts


@pytest.fixture(scope="module")
def profile_train():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import profile_train
    finally:
        sys.path.remove(str(BENCHMARKS))
    return profile_train


def process(start, seconds, iteration=0, thread=1):
    """An executor `Process` event of `op_events(details=True)` (start in seconds)."""
    return ("ExecutorState::Process", "ExecutorState::Process", seconds, thread,
            start * PS, iteration)


def kernel(name, op_type, start, seconds, thread=1):
    return (name, op_type, seconds, thread, start * PS, None)


# Two steps of a made-up training step, on two executor threads (times in seconds).
PHASES = {"model/dense/MatMul": "forward", "model/decoder/while": "forward",
          "while": "backward", "gradient_tape/model/dense/MatMul": "backward",
          "cond": "rest"}
EVENTS = [
    # thread 1: a Process holding the forward product, and a nested Process (which
    # the busy time must not count twice) holding the loss.
    process(0.0, 10.0),
    kernel("model/dense/MatMul", "_MklMatMul", 1.0, 3.0),
    ("ParallelFor", "ParallelFor", 2.0, 1, 1.5 * PS, None),  # inside the kernel: no part
    process(5.0, 4.0),
    kernel("LogSoftmax", "LogSoftmax", 5.5, 2.0),
    # the forward loop's body: iteration 1, a product and a softmax
    process(20.0, 5.0, iteration=1),
    kernel("model/decoder/while/body/_7/model/decoder/while/MatMul", "_MklMatMul",
           20.5, 1.0),
    kernel("model/decoder/while/body/_7/model/decoder/while/Softmax", "_MklSoftmax",
           22.0, 2.0),
    # iteration 0 of the backward loop: in a loop by its kernel's name
    process(30.0, 2.0),
    kernel("while/body/_9/while/BatchMatMulV3", "BatchMatMulV3", 30.5, 1.0),
    # thread 2: the backward product, the update (Adam, and an embedding gradient's
    # segment sum in its scope), and an XLA executable whose fusion nests in it
    process(0.0, 8.0, thread=2),
    kernel("gradient_tape/model/dense/MatMul", "_MklMatMul", 0.5, 4.0, thread=2),
    kernel("cond/then/_3/cond/adam/Sqrt_2", "Sqrt", 5.0, 1.0, thread=2),
    kernel("cond/then/_3/cond/adam/Sum/input", "UnsortedSegmentSum", 6.0, 1.0, thread=2),
    process(10.0, 6.0, thread=2),
    ("ExecutorState::ProcessAsync::Start", "ExecutorState::ProcessAsync::Start", 5.0, 2,
     10.5 * PS, None),
    ("loop_fusion.3", "loop_fusion.3", 3.0, 2, 11.0 * PS, None),
    ("ThreadpoolListener::Record", "ThreadpoolListener::Record", 0.0, 2, 12.0 * PS, None),
]


def test_kinds_of_op_types(profile_train):
    kind = profile_train.kind_of
    assert kind("_MklMatMul") == kind("MatMul") == kind("_FusedMatMul") == "dense products"
    assert kind("BatchMatMulV3") == kind("_MklBatchMatMulV2") == "batch matmuls"
    assert kind("LogSoftmax") == kind("SoftmaxCrossEntropyWithLogits") == kind("OneHot") == (
        "softmax, cross-entropy, reductions")
    assert kind("UnsortedSegmentSum") == kind("GatherV2") == "gathers, scatters, segment sums"
    assert kind("Sigmoid") == kind("Mul") == kind("SelectV2") == "element-wise"
    assert kind("TensorListStack") == "loop bookkeeping (tensor lists, control flow)"
    assert kind("bitcast_transpose_fusion.1") == kind("MatMul.32") == profile_train.XLA_KIND
    assert kind("BlockUntilReady") == kind("ExecutorState::ProcessAsync::Start") == (
        profile_train.RUNTIME_KIND)
    assert kind("SomethingNew") == "other"


def test_rows_follow_the_graph_the_scope_and_the_loops(profile_train):
    row = profile_train.row_of
    # Forward and backward loops: the op that holds the inlined body decides.
    assert row("model/decoder/while/body/_7/model/decoder/while/MatMul", "_MklMatMul",
               PHASES) == ("forward", "loop", "dense products, forward")
    assert row("while/body/_9/while/BatchMatMulV3", "BatchMatMulV3", PHASES) == (
        "backward", "loop", "batch matmuls, backward")
    # A Grappler rewrite is traced back to the op it came from.
    assert row("gradient_tape/model/dense/ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul",
               "_MklMatMul", {"gradient_tape/model/dense/MatMul": "backward"})[0] == "backward"
    # The optimizer's scope wins over the graph; a segment sum there keeps its kind.
    assert row("cond/then/_3/cond/adam/Sqrt_2", "Sqrt", PHASES) == (
        "update", "outside", "optimizer update")
    assert row("cond/then/_3/cond/adam/Sum/input", "UnsortedSegmentSum", PHASES)[2] == (
        "gathers, scatters, segment sums")
    # Without the graph: the tape's scope, else forward.
    assert row("gradient_tape/x/MatMul", "MatMul")[0] == "backward"
    assert row("x/MatMul", "MatMul")[0] == "forward"


def test_summing_a_hand_made_trace(profile_train):
    summary = profile_train.summarize(EVENTS, steps=2, phases=PHASES)
    # Busy: the outermost Process events only (10 + 5 + 2 + 8 + 6), per step.
    assert summary["executor_ms_per_step"] == pytest.approx(31e3 / 2)
    # Kernels at their own time: the XLA launch less the fusion it holds (5 - 3).
    assert summary["kernel_ms_per_step"] == pytest.approx(
        (3 + 2 + 1 + 2 + 1 + 4 + 1 + 1 + 2 + 3) * 1e3 / 2)
    rows = {(r["where"], r["kind"]): r for r in summary["table"]}
    ms = {key: r["ms_per_step"] / 1e3 * 2 for key, r in rows.items()}  # seconds, 2 steps
    assert ms[("outside", "dense products, forward")] == pytest.approx(3)
    assert ms[("outside", "dense products, backward")] == pytest.approx(4)
    assert ms[("loop", "dense products, forward")] == pytest.approx(1)
    assert ms[("loop", "batch matmuls, backward")] == pytest.approx(1)
    assert ms[("loop", "softmax, cross-entropy, reductions")] == pytest.approx(2)
    assert ms[("outside", "softmax, cross-entropy, reductions")] == pytest.approx(2)
    assert ms[("outside", "optimizer update")] == pytest.approx(1)
    assert ms[("outside", "gathers, scatters, segment sums")] == pytest.approx(1)
    assert ms[("outside", profile_train.XLA_KIND)] == pytest.approx(3)
    assert ms[("outside", profile_train.RUNTIME_KIND)] == pytest.approx(2)
    # The executor beyond its kernels: in the loops (5 - 3, 2 - 1: iteration 0 too, by
    # its kernel) and outside (10 - 3 - 4, 4 - 2, 8 - 6, 6 - 5).
    executor = profile_train.EXECUTOR_KIND
    assert ms[("loop", executor)] == pytest.approx(2 + 1)
    assert ms[("outside", executor)] == pytest.approx(3 + 2 + 2 + 1)
    assert rows[("loop", executor)]["calls_per_step"] == 1.0  # 2 Process events, 2 steps
    assert rows[("outside", executor)]["calls_per_step"] == 2.0
    assert sum(r["share"] for r in summary["table"]) == pytest.approx(1.0)  # kernels + rest
    table_ms = [r["ms_per_step"] for r in summary["table"]]
    assert table_ms == sorted(table_ms, reverse=True)  # the most expensive first
    assert summary["product_ms_per_step"] == pytest.approx((3 + 4 + 1 + 1) * 1e3 / 2)
    assert summary["phases_ms_per_step"] == pytest.approx(
        {"forward": (3 + 2 + 1 + 2) * 1e3 / 2, "backward": (4 + 1) * 1e3 / 2,
         "update": (1 + 1) * 1e3 / 2, "XLA, async": (2 + 3) * 1e3 / 2})
    top = {r["op_type"]: r for r in summary["top_op_types"]}
    assert top["_MklMatMul"]["ms_per_step"] == pytest.approx((3 + 1 + 4) * 1e3 / 2)
    assert top["_MklMatMul"]["calls_per_step"] == 1.5
    assert top["_MklMatMul"]["us_per_call"] == pytest.approx(8 / 3 * 1e6)
    assert summary["top_op_types"][0]["op_type"] == "_MklMatMul"


def test_a_kernel_outside_the_executors_events_counts_as_busy(profile_train):
    events = [process(0.0, 4.0), kernel("x/MatMul", "_MklMatMul", 1.0, 2.0),
              kernel("y/MatMul", "_MklMatMul", 6.0, 3.0)]  # after the Process ends
    summary = profile_train.summarize(events, steps=1)
    assert summary["executor_ms_per_step"] == pytest.approx(7e3)
    assert summary["kernel_ms_per_step"] == pytest.approx(5e3)
    assert summary["beyond_kernels_ms_per_step"] == pytest.approx(2e3)


def test_events_that_outlast_their_enclosing_one_count_once(profile_train):
    # In loops, a Process often begins inside another and ends after it: busy is the
    # union of the events, each instant the innermost one's (the latest begun).
    events = [process(0.0, 10.0), kernel("x/MatMul", "_MklMatMul", 1.0, 3.0),
              process(8.0, 4.0, iteration=1), kernel("while/MatMul", "_MklMatMul", 9.0, 2.0),
              process(11.5, 3.0, iteration=2)]
    summary = profile_train.summarize(events, steps=1)
    assert summary["executor_ms_per_step"] == pytest.approx(14.5e3)
    assert summary["kernel_ms_per_step"] == pytest.approx(5e3)
    rows = {(r["where"], r["kind"]): r["ms_per_step"] for r in summary["table"]}
    # outside: 0-1 and 4-8; in the loop: 8-9, 11-11.5, then the last one's 11.5-14.5
    assert rows[("outside", profile_train.EXECUTOR_KIND)] == pytest.approx(5e3)
    assert rows[("loop", profile_train.EXECUTOR_KIND)] == pytest.approx(4.5e3)
    assert min(rows.values()) >= 0


def test_the_tape_marks_the_backward_pass(profile_train):
    import tensorflow as tf

    variable, original = tf.Variable(2.0), tf.GradientTape.gradient

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.square(variable * x, name="forward_square")
        gradient = tape.gradient(loss, variable)
        return tf.add(gradient, 1.0, name="after")

    with profile_train.tape_ranges([]) as ranges:
        step(tf.constant(3.0))
    phases = profile_train.graph_phases(ranges)
    assert phases["forward_square"] == "forward"
    assert phases["after"] == "rest"
    assert "backward" in phases.values()
    assert all(phase == "backward" for name, phase in phases.items()
               if name.startswith("gradient_tape/"))
    assert tf.GradientTape.gradient is original  # restored after the block


@pytest.mark.slow  # a subprocess: tokenizer, tiny model, a few profiled steps (~15 s)
def test_quick_run_profiles_the_trainers_step(tmp_path):
    output = tmp_path / "profile.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--output", str(output)],
                            env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    assert record["preset"] == "lstm-tiny" and record["batches"] == 4
    assert record["tokens_per_second"] > 0 and record["step_ms"]["median"] > 0
    assert record["pipeline_ms_per_batch"] > 0
    assert 0 < record["train_gflops"] and 0 < record["share_of_peak"]
    kinds = {(row["where"], row["kind"]) for row in record["table"]}
    # The tied head's products, both ways, and the loops' (the LSTM's recurrences).
    assert {("outside", "dense products, forward"), ("outside", "dense products, backward"),
            ("outside", "optimizer update")} <= kinds
    assert any(where == "loop" for where, _ in kinds)
    assert {"forward", "backward", "update"} <= set(record["phases_ms_per_step"])
    # Kernels and the executor's time beyond them make up its busy time. (That time can
    # be negative in loops, where kernels overlap their `Process`: kernels alone can
    # exceed the busy time.)
    assert record["kernel_ms_per_step"] > 0
    assert record["kernel_ms_per_step"] + record["beyond_kernels_ms_per_step"] == (
        pytest.approx(record["executor_ms_per_step"]))
    assert sum(row["share"] for row in record["table"]) == pytest.approx(1.0, abs=0.02)
    assert record["top_op_types"] and "target tokens/s" in result.stdout
