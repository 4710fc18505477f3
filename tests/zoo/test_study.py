"""tf_outheads_zoo.study: seeded runs on one shared tokenizer, and the results page they produce."""

import dataclasses
import gzip
import json
import os
import re
import subprocess

import pytest

from tests.corpus import write_corpus_slice
from tf_outheads_zoo import study as study_module
from tf_outheads_zoo.study import Arm, Claim, Study
from tf_outheads_zoo.study import runner


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "verses.tsv", 300, 40, 40)


def _toy_study(corpus):
    overrides = (("data.corpus", corpus), ("data.vocab_size", 300))
    return Study(
        title="Toy study", paper="toy",
        arms={"weak": Arm("lstm-tiny", overrides),
              "strong": Arm("lstm-tiny", overrides + (("model.dropout", 0.0),)),
              "sweep": Arm("lstm-tiny", overrides + (("model.dropout", 0.2),), seeds=(1234,))},
        baseline="weak",
        claims=(Claim("strong beats weak", "strong", "weak", "+1 BLEU"),
                Claim("weak beats strong", "weak", "strong", "+1 BLEU"),
                Claim("strong beats sweep", "strong", "sweep", "+1 BLEU")),
        steps=4, eval_every=2, notes="Fabricated runs.")


def _fake_run(run_dir, corpus, hyps_by_split, seconds=60.0, steps=4, dev_loss=4.0):
    """A finished run directory with what `results` reads."""
    from tf_outheads import metrics
    from tf_outheads_zoo.presets import get_preset

    os.makedirs(run_dir)
    preset = get_preset("lstm-tiny", {"data.corpus": corpus})
    with open(os.path.join(run_dir, "preset.json"), "w") as f:
        json.dump({"name": "lstm-tiny", **preset}, f)
    results = {"steps": steps, "train_seconds": seconds}
    from tf_outheads_zoo.compare import run_references

    for split, hyps in hyps_by_split.items():
        with open(os.path.join(run_dir, f"{split}.hyp"), "w", encoding="utf-8") as f:
            f.write("\n".join(hyps) + "\n")
        score = metrics.corpus_bleu(hyps, run_references(run_dir, split)).score
        results[split] = {"bleu[en_web]": {"score": score, "signature": "x"}}
    with open(os.path.join(run_dir, "results.json"), "w") as f:
        json.dump(results, f)
    with open(os.path.join(run_dir, "bleu.jsonl"), "w") as f:
        for step in (2, 4):
            f.write(json.dumps({"step": step, "bleu": results["dev"]["bleu[en_web]"]["score"]
                                * step / 4}) + "\n")
    with open(os.path.join(run_dir, "history.csv"), "w") as f:
        f.write(f"epoch,loss,step,val_bleu,val_loss\n0,6.0,2,1.0,{dev_loss + 1}\n"
                f"1,5.0,4,2.0,{dev_loss}\n")
    with open(os.path.join(run_dir, "loss_curves.csv"), "w") as f:
        f.write("step,epoch,loss,tokens,time\n")
        for step in range(1, 5):
            f.write(f"{step},1,{6.0 - step * 0.1},100,{step}.0\n")


@pytest.fixture()
def toy_runs(corpus, tmp_path, monkeypatch):
    """3 seeds of 'weak' (the Spanish source copied) and 'strong' (the KJV, another
    English Bible), one seed of the sweep arm (the KJV with the first verses dropped)."""
    study = _toy_study(corpus)
    monkeypatch.setitem(study_module.STUDIES, "toy", study)
    runs_dir = str(tmp_path / "runs" / "toy")
    _fake_study_runs(runs_dir, study, corpus)
    return runs_dir


def _fake_study_runs(runs_dir, study, corpus, arms=("weak", "strong", "sweep"), steps=None):
    """Finished runs `runs_dir/<arm>/s<seed>` of the toy study's `arms`, every seed
    (`steps`: {arm: the steps its runs reached}, for a study on a time budget)."""
    from tf_outheads_zoo.study.definition import write_run_settings

    from tf_outheads import data as tfo_data

    verses = {split: tfo_data.read_tsv(corpus, source="es", target="en_web",
                                       references=("en_kjv",), split=split)
              for split in ("dev", "test")}
    systems = {"weak": {s: list(v.sources) for s, v in verses.items()},
               "strong": {s: list(v.references["en_kjv"]) for s, v in verses.items()},
               "sweep": {s: [""] * 10 + list(v.references["en_kjv"][10:])
                         for s, v in verses.items()}}
    run_dirs = []
    for name in arms:
        for seed in study_module.study_seeds(study, name):
            run_dir = study_module.arm_run_dir(runs_dir, name, seed)
            _fake_run(run_dir, corpus, systems[name], steps=(steps or {}).get(name, 4),
                      dev_loss={"weak": 4.5, "strong": 3.25, "sweep": 3.5}[name])
            write_run_settings(run_dir, study_module.run_settings(study, name, seed))
            run_dirs.append(run_dir)
    return run_dirs


def test_results_page_reports_means_p_values_claims_and_figures(toy_runs, tmp_path):
    output = tmp_path / "docs" / "results.md"
    with open(os.path.join(toy_runs, "plan.json"), "w") as f:  # as runner.run_study keeps it
        json.dump({"seeds": {"weak": [1234]}, "added": [
            {"arm": "weak", "seeds": [1, 2], "time": "2026-11-28T10:00:00+0000"}]}, f)
    study_module.write_results(os.path.dirname(toy_runs), str(output), studies=["toy"],
                               samples=200)
    text = output.read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")
            for line in text.splitlines() if line.startswith("| ")}
    assert rows["weak"][2] == "1, 2, 1234" and rows["strong"][2] == "1, 2, 1234"
    assert rows["sweep"][2] == "1234"
    # Identical runs per seed: sd 0, and three paired p-values below 0.05 for 'strong'.
    assert rows["strong"][4].endswith("± 0.00")
    p_values = [float(p) for p in rows["strong"][9].split(" / ")]
    assert len(p_values) == 3 and all(p < 0.05 for p in p_values)
    delta, interval = rows["strong"][5].split(" ", 1)
    low, high = (float(v) for v in interval.strip("[]").split(", "))
    # No spread over seeds: the interval is the noise of the 40 test sentences alone.
    assert float(delta) > 10 and low < float(delta) < high and high - low > 1
    assert rows["weak"][5] == "—"  # the baseline is not tested against itself
    assert rows["strong"][6] == "3.250 ± 0.000"  # the last dev evaluation's loss
    # chrF and the length ratio of the test translations, against the run's references.
    from sacrebleu.metrics import BLEU

    from tf_outheads.metrics import corpus_chrf, read_lines
    from tf_outheads_zoo.compare import run_references

    run_dir = study_module.arm_run_dir(toy_runs, "strong", 1)
    hyps, refs = read_lines(os.path.join(run_dir, "test.hyp")), run_references(run_dir, "test")
    bleu = BLEU().corpus_score(hyps, [refs])
    assert rows["strong"][7] == f"{corpus_chrf(hyps, refs).score:.2f} ± 0.00"
    assert rows["strong"][8] == f"{bleu.sys_len / bleu.ref_len:.3f} ± 0.000"
    assert rows["weak"][7] != rows["strong"][7]
    assert "Dev cross-entropy (nats per token): full cross-entropy, label smoothing" in text
    assert "strong beats weak (paper: +1 BLEU): **holds**: test BLEU Δ +" in text
    # Every arm against the baseline, claimed or not.
    assert "- strong against weak: **holds**: test BLEU Δ +" in text
    assert re.search(r"- sweep against weak: \*\*inconclusive\*\*: test BLEU Δ \+[\d.]+ BLEU "
                     r"\[\+[\d.]+, \+[\d.]+\] \(sentences only: one seed, its training noise "
                     r"unmeasured, so no verdict\) over 1 seed × 40 sentences", text)
    assert "weak beats strong (paper: +1 BLEU): **contradicted**" in text
    # Claims against another arm than the baseline get their own paired tests.
    assert re.search(r"weak beats strong .*paired bootstrap per seed \(test-set noise only\): "
                     r"p = (0\.0\d\d / ){2}0\.0\d\d", text)
    # One seed: no interval, so no verdict either way.
    assert re.search(r"strong beats sweep .*\*\*inconclusive\*\*: test BLEU Δ \+[\d.]+ BLEU "
                     r"\[\+[\d.]+, \+[\d.]+\] \(sentences only: one seed", text)
    # The claims are one Holm family: 3 claims x (test BLEU, dev cross-entropy).
    assert "over the family of this study's 6 claim tests" in text
    assert re.search(r"strong beats weak .*Holm-adjusted p = [\d.e-]+ \(family of 6\)", text)
    assert "Dev cross-entropy (full cross-entropy, label smoothing" in text
    assert "bs:200" in text and "seed:12345" in text
    assert ("**Seeds added after the study started** (`plan.json`; seeds chosen after "
            "looking at the intervals make them too narrow): weak 1, 2 (2026-11-28") in text
    for figure in ("toy_dev_bleu.svg", "toy_loss.svg"):
        assert (tmp_path / "docs" / "results" / figure).exists()
        assert f"(results/{figure})" in text


def test_an_equal_wall_clock_study_reports_the_steps_each_arm_reached(corpus, tmp_path,
                                                                     monkeypatch):
    study = dataclasses.replace(
        _toy_study(corpus), minutes=10.0,
        claims=(Claim("strong is not worse than weak", "strong", "weak", "equal BLEU",
                      kind="not_worse"),))
    monkeypatch.setitem(study_module.STUDIES, "clock", study)
    runs_dir = str(tmp_path / "clock")
    _fake_study_runs(runs_dir, study, corpus, arms=("weak", "strong"),
                     steps={"weak": 400, "strong": 1000})
    text = study_module.study_report("clock", runs_dir, samples=100)
    table = [line.split(" | ") for line in text.splitlines() if line.startswith("| ")]
    header, rows = table[0], {row[0].strip("| "): row for row in table[1:]}
    assert header[-1].strip(" |") == "steps / run"
    assert rows["weak"][-1].strip(" |") == "400"
    assert rows["strong"][-1].strip(" |") == "1,000 (×2.50)"
    assert rows["sweep"][2:4] == ["not run", ""] and len(rows["sweep"]) == len(header)
    assert ("in the same 10 minutes it trained 2.50× the steps of weak (1,000 against 400)"
            in text)
    # A study on a step budget has no such column.
    monkeypatch.setitem(study_module.STUDIES, "steps", dataclasses.replace(study, minutes=None))
    runs_dir = str(tmp_path / "steps")
    _fake_study_runs(runs_dir, study_module.STUDIES["steps"], corpus, arms=("weak",))
    text = study_module.study_report("steps", runs_dir, samples=100)
    assert "steps / run" not in text and "the steps of" not in text


def test_unfinished_runs_and_missing_arms_are_reported_as_such(toy_runs, tmp_path):
    study = study_module.STUDIES["toy"]
    unfinished = study_module.arm_run_dir(toy_runs, "strong", 7)
    os.makedirs(unfinished)  # no results.json: not counted
    assert 7 not in study_module._finished_runs(toy_runs, study, "strong")
    import shutil

    shutil.rmtree(os.path.join(toy_runs, "sweep"))
    text = study_module.study_report("toy", toy_runs, str(tmp_path / "figures"), samples=100)
    assert "| sweep | lstm-tiny" in text and "| not run |" in text


def test_train_arm_copies_the_shared_tokenizer_and_passes_the_budget(corpus, tmp_path,
                                                                     monkeypatch):
    study = _toy_study(corpus)
    commands = []

    def fake_run(command, log_path, what, **kwargs):
        commands.append(command)
        run_dir = command[command.index("--run-dir") + 1]
        assert log_path == os.path.join(run_dir, "train.log")
        with open(os.path.join(run_dir, "results.json"), "w") as f:
            f.write("{}")

    monkeypatch.setattr(runner, "run_child", fake_run)
    scored = []
    monkeypatch.setattr(runner, "score_run", lambda run_dir, log: scored.append(run_dir))
    runs_dir = str(tmp_path / "runs")
    first = study_module.train_arm(runs_dir, study, "strong", 1)
    second = study_module.train_arm(runs_dir, study, "weak", 2)
    # The same tokenizer files in both runs: SentencePiece is trained once.
    for name in ("spm_joint.model", "tokenizer.json"):
        with open(os.path.join(first, name), "rb") as a, open(os.path.join(second, name),
                                                              "rb") as b:
            assert a.read() == b.read()
    (command, _) = commands
    sets = dict(value.split("=", 1) for flag, value in zip(command, command[1:])
                if flag == "--set")
    assert sets["train.seed"] == "1" and sets["train.max_steps"] == "4"
    assert sets["train.steps_per_epoch"] == "2" and sets["train.patience"] == "None"
    assert sets["data.tokenizer_seed"] == str(study_module.TOKENIZER_SEED)
    assert sets["model.dropout"] == "0.0"
    assert first == os.path.join(runs_dir, "strong", "s1")
    assert scored == [first, second]  # each finished run is scored by forced decoding
    # A finished run is not trained again.
    study_module.train_arm(runs_dir, study, "strong", 1)
    assert len(commands) == 2
    # Nor trained, nor mixed in, with other settings: the error names the study's key.
    from tf_outheads_zoo.schema import ConfigError

    changes = [
        (dataclasses.replace(study, steps=8), "budget.steps=4, but the study now says 8"),
        (dataclasses.replace(study, eval_every=4), "eval_every=2, but the study now says 4"),
        (dataclasses.replace(study, arms=dict(study.arms, strong=Arm(
            "lstm-tiny", study.arms["strong"].overrides[:-1] + (("model.dropout", 0.1),)))),
         "arms.strong.set.model.dropout=0.0, but the study now says 0.1"),
        (dataclasses.replace(study, arms=dict(study.arms, strong=Arm(
            "lstm-tiny", (("data.corpus", corpus), ("data.vocab_size", 200),
                          ("model.dropout", 0.0))))),
         "data.vocab_size=300, but the study now says 200"),
    ]
    for changed, message in changes:
        with pytest.raises(ConfigError, match=re.escape(message)) as error:
            study_module.train_arm(runs_dir, changed, "strong", 1)
        assert str(error.value).startswith(first) and "--runs-dir" in str(error.value)
        with pytest.raises(ConfigError, match=re.escape(message)):
            study_module.finished_runs(runs_dir, changed, "strong")
        with pytest.raises(ConfigError, match=re.escape(message)):
            study_module.run_study("toy", runs_dir, study=changed, arms=["weak", "strong"],
                                   seeds=[2, 1], log=lambda *_: None)
    assert len(commands) == 2
    # A finished run whose model its preset no longer gives (the preset changed since,
    # as lstm-cpu's scaled_attention did) is refused too, before anything trains.
    from tf_outheads_zoo.presets import get_preset

    stored = get_preset("lstm-tiny", study.arms["strong"].override_dict())
    stored["model"]["scaled_attention"] = not stored["model"]["scaled_attention"]
    with open(os.path.join(first, "preset.json"), "w") as f:
        json.dump({"name": "lstm-tiny", **stored}, f)
    message = (f"was trained with model.scaled_attention="
               f"{json.dumps(stored['model']['scaled_attention'])}, but preset lstm-tiny")
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_module.train_arm(runs_dir, study, "strong", 1)
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_module.run_study("toy", runs_dir, study=study, arms=["weak", "strong"],
                               seeds=[2, 1], log=lambda *_: None)
    stored["model"]["scaled_attention"] = not stored["model"]["scaled_attention"]
    with open(os.path.join(first, "preset.json"), "w") as f:
        json.dump({"name": "lstm-tiny", **stored}, f)
    study_module.train_arm(runs_dir, study, "strong", 1)  # the same model: reused
    assert len(commands) == 2


def test_the_study_s_children_run_where_the_study_runs(corpus, tmp_path, monkeypatch):
    """A study started away from the package's directory, with a relative runs directory,
    trains into the directory it then reads (the children once ran in the package's
    parent: a run trained there, and the study failed on a missing model)."""
    import sys

    from tf_outheads_zoo.study.process import run_child

    here = tmp_path / "experiments"
    here.mkdir()
    monkeypatch.chdir(here)
    calls = []

    def fake_run(command, log_path, what, **kwargs):
        calls.append(kwargs)
        run_dir = command[command.index("--run-dir") + 1]
        with open(os.path.join(run_dir, "results.json"), "w") as f:
            f.write("{}")

    monkeypatch.setattr(runner, "run_child", fake_run)
    monkeypatch.setattr(runner, "score_run", lambda run_dir, log: None)
    study_module.train_arm("runs", _toy_study(corpus), "weak", 1)
    (kwargs,) = calls
    assert kwargs.get("cwd") in (None, str(here))
    # The real child: in the study's directory, importing the study's copy of the package.
    probe = ("import os, tf_outheads_zoo\n"
             "print(os.getcwd()); print(os.path.dirname(os.path.dirname("
             "os.path.abspath(tf_outheads_zoo.__file__))))")
    log = here / "probe.log"
    run_child([sys.executable, "-c", probe], str(log), "probe", env=kwargs["env"],
              cwd=kwargs.get("cwd"))
    where, package_parent = log.read_text().split()[-2:]
    assert where == str(here)
    assert package_parent == os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(runner.__file__))))


def test_unknown_study_or_arm_is_refused():
    with pytest.raises(ValueError, match="Unknown study 'nope'"):
        study_module.run_study("nope")
    with pytest.raises(ValueError, match="has no arm 'nope'; its arms: untied, tied"):
        study_module.run_study("pappas", arms=["nope"])


def test_every_study_arm_names_a_valid_preset_and_overrides():
    from tf_outheads_zoo.presets import get_preset

    for name, study in study_module.STUDIES.items():
        assert study.baseline in study.arms, name
        for arm in study.arms.values():
            get_preset(arm.preset, arm.override_dict())  # raises on an unknown key
        for claim in study.claims:
            assert claim.arm in study.arms and claim.baseline in study.arms


def test_claim_verdicts_come_from_the_interval_over_seeds():
    better = Claim("a beats b", "a", "b", "+1")
    not_worse = Claim("a matches b", "a", "b", "=", kind="not_worse", threshold=-1.0)
    base = {"seeds": [1, 2, 3], "test": [20.0, 20.0, 20.0], "p_test": [], "deltas": []}

    def arm(test, p_values=(0.01, 0.01, 0.01)):
        return {"seeds": [1, 2, 3], "test": test, "p_test": list(p_values)}

    ahead = arm([21.0, 21.2, 20.9])
    assert study_module.claim_verdict(ahead, base, better).startswith(
        "**holds**: test BLEU Δ +1.03 BLEU [+0.65, +1.41] over 3 seeds")
    # Ahead in every seed, each one significant by the paired bootstrap, but the seeds
    # spread: the interval contains 0, and the verdict says how many seeds would settle it.
    spread = arm([22.5, 20.2, 20.6])
    verdict = study_module.claim_verdict(spread, base, better)
    assert verdict.startswith("**inconclusive**") and "would settle it" in verdict
    assert "p = 0.010 / 0.010 / 0.010" in verdict  # listed, deciding nothing
    behind = arm([18.0, 18.5, 18.2])
    assert study_module.claim_verdict(behind, base, better).startswith("**contradicted**")
    # Not worse, within a margin of 1 BLEU: behind by 0.2 holds, behind by 1.8 does not.
    assert study_module.claim_verdict(arm([19.8, 19.9, 19.7]), base, not_worse).startswith(
        "**holds** (threshold -1)")
    assert study_module.claim_verdict(behind, base, not_worse).startswith("**contradicted**")
    assert study_module.claim_verdict(None, base, better) == "**not measured yet**"
    # The arm's seed pairs with the baseline's run of that seed, not with its mean.
    uneven = {"seeds": [1, 2], "test": [20.0, 24.0]}
    one = {"seeds": [2], "test": [25.0], "p_test": [0.01]}
    verdict = study_module.claim_verdict(one, uneven, better)
    assert verdict.startswith("**inconclusive**: test BLEU Δ +1.00 BLEU [-inf, +inf]")


def test_claims_compare_dev_cross_entropy_of_the_same_loss_only():
    better = Claim("a beats b", "a", "b", "+1")
    base = {"seeds": [1, 2, 3], "test": [20.0, 20.5, 19.5], "dev_ce": [3.50, 3.57, 3.55],
            "ce_kind": "full cross-entropy, label smoothing 0.1"}
    # The joint-512 vs tied numbers of issue 39: BLEU inconclusive, cross-entropy ahead.
    arm = {"seeds": [1, 2, 3], "test": [19.0, 19.5, 20.8], "dev_ce": [3.453, 3.468, 3.473],
           "ce_kind": base["ce_kind"], "p_test": []}
    verdict = study_module.claim_verdict(arm, base, better)
    assert verdict.startswith("**inconclusive**")
    # Alone, its interval over seeds clears 0 (p = 0.042); with test BLEU it is one of
    # the claim's two tests, and Holm's adjustment (x 2) leaves it inconclusive.
    assert "Dev cross-entropy (full cross-entropy, label smoothing 0.1; Δ = baseline − arm, " \
           "lower is better): **inconclusive**, Δ +0.075 nats [+0.007, +0.144]" in verdict
    assert "p = 0.0418" in verdict and "Holm-adjusted p = 0.0835 (family of 2)" in verdict
    assert "(seeds only: these records have no per-sentence statistics)" in verdict
    other = dict(arm, ce_kind="vmf")
    assert "Dev cross-entropy not compared: vmf against full cross-entropy" in (
        study_module.claim_verdict(other, base, better))


def test_records_rewrite_the_same_page_without_the_corpus_or_the_weights(corpus, tmp_path,
                                                                         monkeypatch):
    """A run record (`record_run`) holds what `results` needs: the page written from the
    records, with the corpus gone, equals the page written from the run directories."""
    import shutil

    own_corpus = str(tmp_path / "own.tsv")
    shutil.copyfile(corpus, own_corpus)
    study = _toy_study(own_corpus)
    monkeypatch.setitem(study_module.STUDIES, "toy", study)
    runs_dir = str(tmp_path / "runs")
    for run_dir in _fake_study_runs(os.path.join(runs_dir, "toy"), study, own_corpus,
                                    arms=("weak", "strong")):
        with open(os.path.join(run_dir, "model.keras"), "wb") as f:
            f.write(b"weights")
    output = str(tmp_path / "docs" / "results.md")
    study_module.write_results(runs_dir, output, studies=["toy"], samples=100)
    from_runs = open(output, encoding="utf-8").read()

    records = str(tmp_path / "records")
    assert study_module.collect_records(os.path.join(runs_dir, "toy"),
                                        os.path.join(records, "toy"), log=lambda *_: None) == 6
    os.remove(own_corpus)
    shutil.rmtree(runs_dir)
    study_module.write_results(records, output, studies=["toy"], samples=100)
    assert open(output, encoding="utf-8").read() == from_runs
    record = study_module.arm_run_dir(os.path.join(records, "toy"), "strong", 1)
    assert sorted(os.listdir(record)) == [
        "bleu.jsonl", "dev.hyp", "dev.ref", "history.csv", "loss_curves.csv", "preset.json",
        "results.json", "study_run.json", "test.hyp", "test.ref"]


def test_an_unfinished_run_is_not_recorded(tmp_path):
    run_dir = tmp_path / "runs" / "tied" / "s1"
    run_dir.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="has not finished"):
        study_module.record_run(str(run_dir), str(tmp_path / "runs"), str(tmp_path / "rec"))
    assert study_module.collect_records(str(tmp_path / "runs"), str(tmp_path / "rec")) == 0


def test_what_an_interrupted_restore_left_is_not_recorded(tmp_path, monkeypatch):
    """`s1.tmp` (a restore cut short) holds a `results.json` but is not a run."""
    for name in ("s1", "s1.tmp", "s--1"):
        run_dir = tmp_path / "runs" / "tied" / name
        run_dir.mkdir(parents=True)
        (run_dir / "results.json").write_text("{}")
    recorded = []
    monkeypatch.setattr(runner, "record_run",
                        lambda run_dir, *args, **kwargs: recorded.append(run_dir))
    assert study_module.collect_records(str(tmp_path / "runs"), str(tmp_path / "rec")) == 1
    assert recorded == [str(tmp_path / "runs" / "tied" / "s1")]


def test_the_records_directory_is_not_git_ignored():
    """Records are committed: no ignore rule (such as one for `runs/`) may hide them."""
    import shutil

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if shutil.which("git") is None or not os.path.exists(os.path.join(repo, ".git")):
        pytest.skip("not a git checkout")
    record = os.path.join(study_module.RECORDS_DIR, "pappas", "tied", "s1", "dev.hyp")
    result = subprocess.run(["git", "check-ignore", "-q", record], cwd=repo)
    assert result.returncode == 1, f"{record} is ignored by git"


def test_arms_trained_on_other_data_settings_are_not_compared(toy_runs, tmp_path):
    # One arm's runs batched otherwise (as records from before data.bucket_width): the
    # page names the setting and the runs, and judges no claim.
    study = study_module.STUDIES["toy"]
    for seed in study_module.study_seeds(study, "strong"):
        path = os.path.join(study_module.arm_run_dir(toy_runs, "strong", seed), "preset.json")
        with open(path) as f:
            stored = json.load(f)
        del stored["data"]["bucket_width"]  # read as the legacy 8
        with open(path, "w") as f:
            json.dump(stored, f)
    text = study_module.study_report("toy", toy_runs, None, samples=100)
    assert "**Not comparable yet:**" in text
    assert "- `data.bucket_width`: 1 (weak 1, weak 2, weak 1234, sweep 1234); " \
           "8 (strong 1, strong 2, strong 1234)" in text
    assert not any(f"**{verdict}**" in text for verdict in ("holds", "contradicted",
                                                           "inconclusive"))
    # Every claim.
    assert text.count("**not comparable yet** (data settings differ: data.bucket_width)") == 3


def test_the_same_corpus_at_another_path_is_the_same_data(toy_runs, tmp_path):
    study = study_module.STUDIES["toy"]
    path = os.path.join(study_module.arm_run_dir(toy_runs, "strong", 1), "preset.json")
    with open(path) as f:
        stored = json.load(f)
    stored["data"]["corpus"] = "/elsewhere/" + os.path.basename(stored["data"]["corpus"])
    with open(path, "w") as f:
        json.dump(stored, f)
    stored["data"]["target_vectors"] = {"dim": 300, "epochs": 5, "path": None}  # ReWE's
    with open(path, "w") as f:
        json.dump(stored, f)
    runs = {arm: study_module._finished_runs(toy_runs, study, arm) for arm in study.arms}
    assert study_module.data_differences(runs) == {}
    assert "Not comparable" not in study_module.study_report("toy", toy_runs, None, samples=50)


def test_the_report_names_the_words_each_arm_overproduces(tmp_path):
    # The first Kumar study's seed-1 vMF dev outputs (the paper's plain target table,
    # code 4555569): its nearest-neighbour decoding repeated its hubs ("Thus" 723 times
    # against 1 in the references).
    from tf_outheads_zoo.study.words import hubness_lines, overproduced_words

    record = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                          "kumar_plain_table_vmf_s1")
    vmf = tmp_path / "vmf" / "s1"
    vmf.mkdir(parents=True)
    for name in ("dev.hyp", "dev.ref"):
        with gzip.open(os.path.join(record, name + ".gz"), "rb") as f:
            (vmf / name).write_bytes(f.read())
    words = overproduced_words([str(vmf)])
    assert words[0][0] == "Thus" and words[0][1] >= 700 and words[0][2] <= 3
    assert all(out > ref for _, out, ref in words)
    # A run whose outputs are its references overproduces nothing.
    run = tmp_path / "arm" / "s1"
    run.mkdir(parents=True)
    (run / "dev.ref").write_text("In the beginning .\nGod said .\n", encoding="utf-8")
    (run / "dev.hyp").write_text("In the beginning .\nGod said .\n", encoding="utf-8")
    assert overproduced_words([str(run)]) == []
    (run / "dev.hyp").write_text("In the the beginning .\nGod God God said\n",
                                 encoding="utf-8")
    assert overproduced_words([str(run)]) == [("God", 3, 1), ("the", 2, 1)]
    (run / "target_table.json").write_text(json.dumps(
        {"hubness": {"skewness": 4.5, "top": [["▁Thus", 90], [".”", 80]]}}), encoding="utf-8")
    lines = hubness_lines(None, {"vmf": {1: str(run)}, "softmax": {}})
    assert lines[-1] == ("- vmf: God 3/1, the 2/1; target table (k-occurrence skewness, "
                         "k = 10): s1 4.50 (hubs ▁Thus .”)")
