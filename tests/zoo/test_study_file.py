"""A study on the user's own data, written as a file (`tf-outheads study --config`)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.corpus import text_data, write_corpus_slice, write_text_files
from tf_outheads_zoo import cli
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.study import arm_run_dir, study_seeds
from tf_outheads_zoo.study.file import read_study_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STUDY = """
title: Tied against joint on my corpus
data:
  train: {source: corpora/train.es, target: corpora/train.en.gz}
  dev:   {source: corpora/dev.es,   target: corpora/dev.en}
  test:  {source: corpora/test.es,  target: corpora/test.en}
  vocab_size: 300
budget: {steps: 4}
seeds: [1, 2]
eval_every: 2
arms:
  tied:  {preset: lstm-tiny}
  joint: {preset: lstm-tiny, set: {model.head: {class_name: joint, config: {joint_dim: 16}}}}
baseline: tied
claims:
  - {arm: joint, expect: +0.5}
"""


def write(tmp_path, text, name="study.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_study_file_is_read_into_arms_that_carry_its_data(tmp_path):
    study = read_study_file(write(tmp_path, STUDY))
    assert list(study.arms) == ["tied", "joint"] and study.baseline == "tied"
    assert (study.steps, study.minutes, study.eval_every) == (4, None, 2)
    assert study_seeds(study, "joint") == (1, 2) and study_seeds(study, "tied", [7]) == (7,)
    joint = dict(study.arms["joint"].overrides)
    # Relative paths are the study file's.
    assert joint["data.train"] == {"source": str(tmp_path / "corpora" / "train.es"),
                                   "target": str(tmp_path / "corpora" / "train.en.gz")}
    assert joint["data.vocab_size"] == 300 and joint["model.head"]["class_name"] == "joint"
    (claim,) = study.claims
    assert (claim.arm, claim.baseline, claim.threshold, claim.kind) == ("joint", "tied", 0.5,
                                                                         "better")
    # Each arm's runs are named by it.
    assert arm_run_dir("R", "joint", 2) == os.path.join("R", "joint", "s2")


@pytest.mark.parametrize("change, message", [
    (("seeds: [1, 2]", "sedes: [1, 2]"), "study.yaml: unknown key 'sedes'; did you mean 'seeds'?"),
    (("preset: lstm-tiny}", "preset: lstm-tinny}"), "arms.tied.preset: unknown preset "
                                                      "(did you mean 'lstm-tiny'?)"),
    (("joint_dim: 16", "joint_dims: 16"), "arms.joint"),
    (("{steps: 4}", "{steps: 4, minutes: 2}"), "budget is {steps: N} or {minutes: M}"),
    (("{arm: joint, expect: +0.5}", "{arm: jiont}"), "claims[0].arm must be one of the arms"),
    (("baseline: tied", "baseline: plain"), "baseline must be one of the arms (tied, joint)"),
    (("  tied:  {", "  tokenizers:  {"), "arms: an arm's name is its runs' directory"),
    (("  tied:  {", "  ../tied:  {"), "Received: '../tied'"),
    (("vocab_size: 300", "vocab_sise: 300"), "data.vocab_sise; did you mean data.vocab_size?"),
    (("seeds: [1, 2]", "seeds: [1, 2, 1]"), "seeds must name each seed once; repeated: 1"),
    (("tied:  {preset: lstm-tiny}", "tied:  {preset: lstm-tiny, seeds: [3, 3]}"),
     "arms.tied.seeds must name each seed once; repeated: 3"),
    # PyYAML keeps the last of a key given twice: two arms "tied" were one ("needs at
    # least two arms"), a second budget silently replaced the first (issue 54).
    (("  joint: {preset", "  tied: {preset"),
     "arms.tied is given twice, and YAML would keep only the last: give each key once. "
     "Received: arms.tied on lines 12 and 13"),
    (("baseline: tied", "budget: {steps: 8}"), "budget is given twice"),
    (("joint_dim: 16", "joint_dim: 16, joint_dim: 8"),
     "arms.joint.set.model.head.config.joint_dim is given twice"),
])
def test_a_wrong_study_file_names_the_file_and_the_key(tmp_path, change, message):
    old, new = change
    assert old in STUDY
    with pytest.raises(ConfigError) as error:
        read_study_file(write(tmp_path, STUDY.replace(old, new)))
    assert message in str(error.value) and "study.yaml" in str(error.value)


def test_a_study_file_that_is_a_list_names_the_study_keys(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("- tied\n- joint\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"study.yaml: a study file is a mapping of .*arms.*"
                                          r"Received: list") as error:
        read_study_file(str(path))
    assert "preset" not in str(error.value)  # a run file's keys


def test_seeds_given_twice_on_the_command_line_are_refused(tmp_path):
    study = read_study_file(write(tmp_path, STUDY))
    with pytest.raises(ConfigError, match="--seeds must name each seed once; repeated: 1 .*"
                                          "Received: 1,2,1"):
        study_seeds(study, "joint", [1, 2, 1])


def test_a_margin_makes_a_not_worse_claim(tmp_path):
    study = read_study_file(write(tmp_path, STUDY.replace(
        "{arm: joint, expect: +0.5}", "{arm: joint, margin: 1 BLEU, paper: '≈ equal'}")))
    (claim,) = study.claims
    assert (claim.kind, claim.threshold, claim.paper_delta) == ("not_worse", -1.0, "≈ equal")
    assert claim.text == "joint is within 1 BLEU of tied"


@pytest.mark.slow  # 5 CLI trainings in subprocesses (about 4 minutes on 2 cores)
def test_a_study_file_trains_every_arm_and_seed_on_text_files_and_reports(tmp_path, capsys):
    """The issue's first "done when": a study on plain-text files, 2 arms × 2 seeds, killed
    after its first run and restarted, trains no run twice, writes results.md /
    results.json / plots and exports the winner."""
    corpus = write_corpus_slice(tmp_path / "small.tsv", 400, 20, 20)
    files = write_text_files(corpus, str(tmp_path / "corpora"))
    assert text_data(files)["train"]["source"].endswith("train.es")
    study_file = write(tmp_path, STUDY)
    runs_dir = tmp_path / "runs"
    argv = ["study", "--config", study_file, "--runs-dir", str(runs_dir), "--samples", "50"]
    # Killed once its first run has finished (the second may be midway).
    first = runs_dir / "tied" / "s1"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with open(tmp_path / "killed.log", "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "tf_outheads_zoo.cli", *argv],
                                   stdout=log, stderr=subprocess.STDOUT, env=env,
                                   cwd=ROOT, start_new_session=True)
        deadline = time.monotonic() + 600
        while not (first / "results.json").exists() or not (first / "cross_entropy.json"
                                                              ).exists():
            assert process.poll() is None, (tmp_path / "killed.log").read_text()
            assert time.monotonic() < deadline, "the first run did not finish in 10 minutes"
            time.sleep(0.5)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # The training it ran (in its own process group) got SIGTERM as the study died
    # (PR_SET_PDEATHSIG): it writes its backup and ends; a rerun before is refused.
    from tf_outheads_zoo.runs import RunDirectoryError, run_directory_lock

    for lock in runs_dir.glob("*/s*/.lock"):
        while True:
            try:
                with run_directory_lock(str(lock.parent)):
                    break
            except RunDirectoryError:
                assert time.monotonic() < deadline, "the killed study's training ran on"
                time.sleep(0.5)
    finished_at = os.path.getmtime(first / "results.json")
    assert not (runs_dir / "joint" / "s2" / "results.json").exists()

    cli.main(argv + ["--export-winner", str(tmp_path / "winner")])
    # No run trained twice: the first run's training started once.
    assert os.path.getmtime(first / "results.json") == finished_at
    assert (first / "train.log").read_text().count("[train] strategy") == 1
    mtimes = {}
    for arm_name in ("tied", "joint"):
        for seed in (1, 2):
            run_dir = arm_run_dir(str(runs_dir), arm_name, seed)
            with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
                assert json.load(f)["steps"] == 4
            with open(os.path.join(run_dir, "study_run.json"), encoding="utf-8") as f:
                assert json.load(f)["budget"] == {"steps": 4}
            with open(os.path.join(run_dir, "cross_entropy.json"), encoding="utf-8") as f:
                scores = json.load(f)
            assert scores["dev"]["tokens"] > 100 and scores["dev"]["cross_entropy"] > 0
            assert scores["log_probabilities"] and not scores["continuous"]
            mtimes[run_dir] = os.path.getmtime(os.path.join(run_dir, "results.json"))
    text = (runs_dir / "results.md").read_text(encoding="utf-8")
    assert "# Tied against joint on my corpus" in text
    assert "- joint beats tied by more than +0.5 BLEU (paper: —): **" in text
    assert "cross-entropy by forced decoding, no label smoothing (tied, joint)" in text
    for figure in ("study_dev_bleu.svg", "study_dev_loss.svg", "study_loss.svg"):
        assert (runs_dir / "results" / figure).exists()
    assert "<polygon" in (runs_dir / "results" / "study_dev_loss.svg").read_text()
    numbers = json.loads((runs_dir / "results.json").read_text(encoding="utf-8"))
    assert set(numbers["arms"]) == {"tied", "joint"}
    assert set(numbers["arms"]["joint"]["runs"]) == {"1", "2"}
    forced = numbers["arms"]["joint"]["runs"]["1"]["forced_decoding"]
    assert forced["test"]["tokens"] > 100 and forced["test"]["cross_entropy"] > 0
    assert "- joint against tied: **" in text
    effect = numbers["arms"]["joint"]["dev_cross_entropy_vs_baseline"]
    assert effect["seeds"] == 2 and effect["verdict"] in ("holds", "contradicted",
                                                          "inconclusive")
    # Issue 53's statistics on a user's study: intervals over seeds and sentences (BLEU
    # from the test translations, cross-entropy from the forced decoding's sentences),
    # Holm over the claims' tests, and 4-step runs (which cannot read their sources yet)
    # flagged as stalled, in results.json, on the page and in the printed lines.
    assert len(forced["dev"]["sentence_nll"]) == forced["dev"]["sentences"] == 20
    assert forced["dev"]["mismatched_source_cross_entropy"] > 0
    assert effect["levels"] == "seeds and sentences" and effect["se_sentences"] > 0
    assert numbers["arms"]["joint"]["test_bleu_vs_baseline"]["sentences"] == 20
    (claim,) = numbers["claims"]
    assert claim["family"] == "family of 2" and len(claim["tests"]) == 2
    assert all(t["interval"] == "seeds and sentences" and t["p_holm"] >= t["effect"]["p_value"]
               for t in claim["tests"])
    assert "over the family of this study's 2 claim tests" in text
    assert "(seeds and sentences; seeds alone [" in text
    stall = numbers["arms"]["tied"]["runs"]["1"]["stall"]
    assert stall["stalled"] is True and stall["source_gain"] < 1.0
    assert "**Stalled runs**" in text and "**uses stalled runs**: " in text
    printed = capsys.readouterr().out
    assert "STALLED (does not read its source" in printed
    assert "[stall] tied seed 1: does not read its source" in printed
    assert "[claim] joint beats tied by more than +0.5 BLEU: **" in printed
    # The winner: the best arm by mean dev BLEU, its best seed; exported and named.
    winner = numbers["winner"]
    means = {arm: sum(r["dev_bleu"] for r in entry["runs"].values()) / 2
             for arm, entry in numbers["arms"].items()}
    assert winner["arm"] == max(means, key=means.get)
    assert (tmp_path / "winner" / "saved_model.pb").exists()
    stored = json.loads((tmp_path / "winner" / "winner.json").read_text(encoding="utf-8"))
    assert (stored["arm"], stored["seed"], stored["metric"]) == (winner["arm"],
                                                                 winner["seed"], "dev_bleu")
    # One shared tokenizer for the two arms' identical data settings.
    assert len(os.listdir(runs_dir / "tokenizers")) == 1
    # Run again: every run is finished, none is trained again.
    cli.main(argv)
    for run_dir, mtime in mtimes.items():
        assert os.path.getmtime(os.path.join(run_dir, "results.json")) == mtime
    # A changed study file that would change a finished run is refused, naming the key.
    changed = write(tmp_path, STUDY.replace("joint_dim: 16", "joint_dim: 8"))
    with pytest.raises(SystemExit):
        cli.main(argv[:2] + [changed] + argv[3:])
    error = capsys.readouterr().err
    assert "arms.joint.set.model.head=" in error and "--runs-dir" in error


@pytest.mark.slow  # 2 trainings of lstm-cpu presets on the embedded corpus (~3 minutes)
def test_a_built_in_study_runs_from_its_shipped_file(tmp_path):
    """`tf-outheads study pappas --steps 20 --seeds 1`: the shipped pappas.yaml, through the
    study-file path, with the command's budget and seeds (two of its arms, to keep CI
    short: every arm goes through the same code)."""
    from tf_outheads_zoo.study import builtin_study_path

    runs_dir = tmp_path / "pappas"
    cli.main(["study", "pappas", "--steps", "20", "--seeds", "1", "--arms", "tied,joint-512",
              "--runs-dir", str(runs_dir), "--samples", "20"])
    shipped = read_study_file(builtin_study_path("pappas"))
    for arm in ("tied", "joint-512"):
        run_dir = runs_dir / arm / "s1"
        settings = json.loads((run_dir / "study_run.json").read_text(encoding="utf-8"))
        assert settings["budget"] == {"steps": 20} and settings["seed"] == 1
        assert settings["preset"] == shipped.arms[arm].preset
        assert json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["steps"] == 20
    text = (runs_dir / "results.md").read_text(encoding="utf-8")
    assert text.startswith("# Joint input-output embeddings (Pappas et al. 2018)")
    assert "- The joint head (d_j = 512) beats weight tying (paper: +0.5 to +1.2 BLEU" in text
    assert "| untied | lstm-cpu-softmax | not run |" in text
    # A budget given on the command line records nothing in the committed records.
    assert not (tmp_path / "docs").exists()
