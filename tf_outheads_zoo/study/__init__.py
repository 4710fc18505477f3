"""Seeded head comparisons against sound baselines, and the results page they produce.

A *study* is a set of *arms* (a preset and overrides) trained for the same number
of steps (or the same wall clock) on the same pieces, for several seeds, with one
arm as the baseline of each paired test. Two commands:

    tf-outheads study pappas [--seeds 1234,1,2] [--arms tied,joint-512] [--runs-dir runs/study]
    tf-outheads results [--collect-from runs/study] [--output docs/results.md]

Each built-in study is a study file shipped in `builtin/` (`pappas.yaml`, ...), run
through the same path as a user's (`tf-outheads study --config FILE`). `study` trains
what is missing, one run at a time, each in its own run directory
(`RUNS_DIR/<arm>/s<seed>`; `RUNS_DIR` is `runs/study/<name>` for a built-in study), which
resumes after an interruption and is skipped once finished; a run trained with other
settings than the study file's is refused, naming the key. A finished run is then *recorded*:
its light files (scores, BLEU history, per-step losses, the dev/test
translations and the references they were scored against; not the weights)
are copied to the same place under `RECORDS_DIR/<name>` (`docs/results/study`),
which is committed, so the results page can be rewritten and its paired tests
redone on any checkout, after the machine that trained the runs is gone. Every run of a study copies one
tokenizer (`RUNS_DIR/tokenizers/<data key>`): SentencePiece trained twice on the
same text with the same seed in two processes gives different pieces, which
would confound the comparison. `results` reads the records and writes
the page: mean ± sd over seeds of dev and test BLEU, sacrebleu's paired
bootstrap test of each seed against the baseline's run of the same seed (test
and dev p-values), dev BLEU and training-loss curves as SVG, the time of each
run and the machine, and for each claim of a paper whether it held here.
`benchmarks/peer_opennmt.py` trains its "ours" side through `train_arm`, so
the baselines it checks against OpenNMT-py are the very runs the studies use.

A study file (`tf-outheads study --config study.yaml`, `tf_outheads_zoo.study.file`)
holds the user's data, budget, seeds, arms and claims; its runs and `results.md` go to
its own runs directory.

The package: `definition` (the studies, their seeds, where their runs live), `file`
(study files), `runner`
(training and recording the runs), `stats` (run scores, paired tests, claim verdicts),
`combined` (intervals over seeds and test sentences, Holm's adjustment), `verdicts`
(a claim's tests and verdict), `stall` (runs
that never learned to translate), `report` (the results page) and `winner` (the best
arm, exported). Every name is importable from here.
"""

from tf_outheads_zoo.study.definition import (
    BUILTIN_DIR, DEFAULT_RUNS_DIR, DEFAULT_SEEDS, RECORDS_DIR, TOKENIZER_SEED, Arm, Claim,
    Study, arm_run_dir, budget_name, check_run_settings, finished_runs, run_settings,
    study_seeds)
from tf_outheads_zoo.study.file import STUDIES, builtin_study_path, get_study
from tf_outheads_zoo.study.report import (
    data_differences, machine_description, study_report, write_results, write_study_results)
from tf_outheads_zoo.study.runner import (
    RECORD_FILES, collect_records, record_run, run_study, score_run, tokenizer_dir, train_arm)
from tf_outheads_zoo.study.stats import ALPHA
from tf_outheads_zoo.study.verdicts import claim_verdict
from tf_outheads_zoo.study.winner import choose_winner, export_winner

# The name the tests have read the finished runs of an arm by.
_finished_runs = finished_runs

__all__ = [
    "ALPHA", "BUILTIN_DIR", "DEFAULT_RUNS_DIR", "DEFAULT_SEEDS", "RECORDS_DIR", "RECORD_FILES",
    "STUDIES", "TOKENIZER_SEED", "Arm", "Claim", "Study", "arm_run_dir", "budget_name",
    "builtin_study_path", "check_run_settings", "choose_winner", "claim_verdict",
    "collect_records", "export_winner",
    "data_differences", "finished_runs", "get_study", "run_settings",
    "machine_description", "record_run", "run_study", "score_run", "study_report", "study_seeds",
    "tokenizer_dir", "train_arm", "write_results", "write_study_results"]
