"""What a study is: its arms, claims, budget and seeds (`STUDIES`: one per paper), and
where its runs live (`arm_run_dir`, `finished_runs`).

`tf_outheads_zoo.study.runner` trains and records the runs named here;
`tf_outheads_zoo.study.report` reads them back.
"""

import dataclasses
import hashlib
import json
import os

DEFAULT_RUNS_DIR = os.path.join("runs", "study")
# The committed copy of every finished run's light files (`runner.record_run`).
RECORDS_DIR = os.path.join("docs", "results", "study")
# SentencePiece's seed for every run of every study (data.tokenizer_seed).
TOKENIZER_SEED = 1234
CORE_SEEDS = (1234, 1, 2)
SWEEP_SEEDS = (1234,)


@dataclasses.dataclass(frozen=True)
class Arm:
    """One system of a study: a preset, dotted overrides, and optional extra decodings.

    `decodings` maps a suffix to `translate` options run after training on dev
    and test (`{"beam5": {"beam_size": 5}}` writes `dev.beam5.hyp`); each is
    reported as its own row, `"<arm> (<suffix>)"`.
    """

    preset: str
    overrides: tuple = ()
    core: bool = True
    decodings: tuple = ()
    seeds: tuple = None  # its own seeds (a study file's arm), else the study's

    def override_dict(self):
        return dict(self.overrides)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A paper's claim about `arm` against `baseline` on test BLEU (`paper_delta`: what
    the paper reports). `kind` `"better"`: the arm beats the baseline; `"not_worse"`:
    the arm is within a margin of it. `threshold`: the improvement the interval over
    seeds must exceed for the claim to hold (0 for "better"; minus the margin for
    "not_worse"); below it, the claim is contradicted (`stats.claim_verdict`)."""

    text: str
    arm: str
    baseline: str
    paper_delta: str
    kind: str = "better"
    threshold: float = 0.0


@dataclasses.dataclass(frozen=True)
class Study:
    title: str
    paper: str
    arms: dict
    baseline: str
    claims: tuple = ()
    steps: int = 1500
    minutes: float = None  # equal wall clock instead of equal steps
    eval_every: int = 300
    notes: str = ""
    seeds: tuple = None  # every arm's seeds; None: CORE_SEEDS (SWEEP_SEEDS for core=False)
    select_by: str = "dev_bleu"  # how a winner is chosen (study files)


def _pappas_arm(head, core=False):
    from tf_outheads_zoo.presets import PAPPAS_HEADS

    return Arm("lstm-cpu-tied", (("model.head", PAPPAS_HEADS[head]),), core=core)


STUDIES = {
    "pappas": Study(
        title="Joint input-output embeddings (Pappas et al. 2018)",
        paper="pappas2018",
        arms={
            "untied": Arm("lstm-cpu-softmax"),
            "tied": Arm("lstm-cpu-tied"),
            "joint-512": Arm("lstm-cpu-joint-512"),
            "joint-256": Arm("lstm-cpu-joint", core=False),
            "joint-1024": Arm("lstm-cpu-joint-1024", core=False),
            "bilinear": _pappas_arm("bilinear"),
            "output-structure": _pappas_arm("output-structure"),
            "context-structure": _pappas_arm("context-structure"),
        },
        baseline="tied",
        claims=(
            Claim("The joint head (d_j = 512) beats weight tying", "joint-512", "tied",
                  "+0.5 to +1.2 BLEU (Table 2, 32K BPE, en-de/en-fi/en-ro)"),
            Claim("The joint head (d_j = 512) beats the untied softmax", "joint-512",
                  "untied", "+0.6 to +1.7 BLEU (Table 2)"),
            Claim("Weight tying beats the untied softmax", "tied", "untied",
                  "+0.1 to +0.6 BLEU (Table 2)"),
        ),
        notes="CPU size (1-layer biLSTM/LSTM 256, 4K joint BPE, 2,048-token batches), "
              "not the paper's 2-layer 512 LSTM with 32K/128K vocabularies. The three "
              "ablations (Eq. 6, 7a, 7b) and d_j 256/1024 run one seed. The context-"
              "structure ablation (Eq. 7b, E·tanh(W·h̃ + b)) stalls here: its training "
              "loss stays at the unigram level (6.6) for ~100 steps and is 5.16 at step "
              "300 (bilinear 4.07); by step 160, 26 % of tanh(W·h̃ + b) is saturated "
              "(|·| > 0.99). The same head without the tanh leaves the plateau by step 40, "
              "and global clipping makes no difference (measured with clipnorm 1000). "
              "At the paper's Adam rate, 1e-3 (we use the peer's 5e-3), tied and "
              "context-structure follow the same curve for 160 steps (6.37 and 6.39 at "
              "step 101, against 5.57 for tied at 5e-3); whether Eq. 7b catches up at "
              "1e-3 over a whole run was not measured.",
    ),
    "liu": Study(
        title="Shared-private bilingual embeddings (Liu et al. 2019)",
        paper="liu2019",
        arms={
            "vanilla": Arm("transformer-cpu"),
            "decoder-wt": Arm("transformer-cpu-decoder-wt"),
            "shared-private": Arm("transformer-cpu-shared-private"),
        },
        baseline="decoder-wt",
        claims=(
            Claim("Shared-private beats decoder weight tying", "shared-private",
                  "decoder-wt", "+0.7 to +1.3 BLEU (Table 1)"),
            Claim("Shared-private beats the vanilla Transformer", "shared-private",
                  "vanilla", "+0.9 to +1.8 BLEU (Table 1)"),
        ),
        steps=900,
        notes="transformer-cpu (pre-norm 3+3 layers, 256/1024, 4K joint BPE). 900 steps, "
              "not the other studies' 1,500: a transformer-cpu step takes ~2.5 s on these 2 "
              "CPU cores (4,096-token batches, the dev evaluations included; a 900-step run "
              "takes 37-44 minutes alone on the machine), and 9 runs of 1,500 steps would "
              "take ~9.5 hours, the whole study's budget. The learning rate peaks at step "
              "800, so these are models early in training (dev BLEU 12.2-13.6 at step 900). "
              "Code 4555569; decoder-wt seed 1234 ran beside other jobs (its min / run is "
              "not comparable), every other run alone on the machine.",
    ),
    "jauregi": Study(
        title="ReWE: regressing word embeddings (Jauregi Unanue et al. 2019)",
        paper="jauregi2019",
        arms={
            # lstm-cpu is lstm-cpu-joint-512 (the same model): the Pappas study's runs.
            "plain": Arm("lstm-cpu-joint-512"),
            "rewe-1": Arm("lstm-cpu-rewe", (("train.rewe", {"weight": 1.0,
                                                            "distance": "cosine"}),),
                          core=False),
            "rewe-5": Arm("lstm-cpu-rewe", (("train.rewe", {"weight": 5.0,
                                                            "distance": "cosine"}),),
                          core=False),
            "rewe-20": Arm("lstm-cpu-rewe"),
        },
        baseline="plain",
        claims=(
            Claim("ReWE (λ = 20, cosine) beats the plain model", "rewe-20", "plain",
                  "+0.4 to +1.5 BLEU (Table 2)"),
        ),
        notes="The plain model is lstm-cpu (joint head, d_j = 512: the runs of the Pappas "
              "study's joint-512 arm); ReWE regresses frozen 300-d "
              "FastText vectors trained on the target side. λ 1 and 5 run one seed, "
              "trained later than the rest (code 4555569, which changed only the "
              "order of float sums) beside the test suite and other jobs: their min / "
              "run is not comparable with the other rows' (λ 1's excludes 8.4 minutes "
              "for which its process was stopped).",
    ),
    "kumar": Study(
        title="Continuous outputs with the vMF loss (Kumar & Tsvetkov 2019)",
        paper="kumar2019",
        arms={
            "softmax": Arm("lstm-cpu-vmf-softmax",
                           decodings=(("beam5", {"beam_size": 5}),)),
            "vmf": Arm("lstm-cpu-vmf", decodings=(("beam5", {"beam_size": 5}),)),
        },
        baseline="softmax",
        claims=(
            Claim("vMF outputs reach the softmax's BLEU (within 1 BLEU) in the same wall "
                  "clock", "vmf", "softmax", "about equal BLEU, 2.5x faster training "
                  "(Tables 2-3)", kind="not_worse", threshold=-1.0),
        ),
        minutes=10.0,
        notes="Equal wall clock (10 minutes of training each, the greedy dev evaluation "
              "every 300 steps included) on 2 CPU cores; separate 4K vocabularies; greedy "
              "and beam-5 decoding. The target vectors are 300-d FastText vectors trained "
              "on the target side of the training set (~30K verses), not on a large "
              "monolingual corpus as in the paper. Per seed (1 / 2 / 1234), test BLEU: "
              "softmax 22.37 / 21.13 / 4.16, vMF 14.43 / 13.69 / 12.65. The softmax's "
              "seed 1234 stalls on the language-model plateau (dev BLEU 1.0 / 1.9 / 3.1 "
              "at steps 300 / 600 / 900; a rerun repeats its losses to two decimals; "
              "OpenNMT-py at that seed on the same pieces reaches 9.0 / 11.8 at steps "
              "300 / 600, benchmarks/docs/peer_opennmt.md). The seeds were fixed before the "
              "study and "
              "that run is kept: it is the one seed vMF wins, and it pulls the softmax "
              "mean down and its sd up. Most of vMF's gap is length: its greedy dev "
              "outputs are 0.74-0.82 of the reference length (brevity penalty "
              "0.70-0.80; the softmax's are 1.05-1.17 of it), while its n-gram "
              "precisions are close to the softmax's (seed 1: 45.1/19.5/10.0/5.5 "
              "against 48.0/23.9/12.9/7.3); beam 5, with no length penalty, shortens "
              "them further (test words -17% at seed 1). At seed 1, 579 of its 1,068 "
              "dev outputs hold the piece .”’ (in 125 of 27,952 training verses, in no "
              "dev reference): the FastText vectors of sentence-final punctuation "
              "pieces form a tight cluster (cosines 0.74-0.95), which nearest-neighbour "
              "decoding confuses, before an early EOS. The EOS vector (the VIVO "
              "report: results are very sensitive to it) and a length penalty are untuned. "
              "Code 4555569, every run alone on the machine.",
    ),
}


def get_study(name):
    if name not in STUDIES:
        raise ValueError(f"Unknown study {name!r}. Available: {', '.join(STUDIES)}")
    return STUDIES[name]


def study_seeds(study, arm_name, seeds=None):
    """The seeds an arm runs: `seeds` (the command's), the arm's own, the study's, or
    `CORE_SEEDS` (`SWEEP_SEEDS` for an arm that is not `core`)."""
    arm = study.arms[arm_name]
    for chosen in (seeds, arm.seeds, study.seeds):
        if chosen is not None:
            return tuple(chosen)
    return CORE_SEEDS if arm.core else SWEEP_SEEDS


# -- where the runs live -----------------------------------------------------------------
def short_hash(value):
    """10 hex digits of the SHA-256 of `value`'s JSON (keys sorted): names a directory."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]


def budget_name(steps=None, minutes=None):
    return f"{minutes:g}min" if minutes else f"{steps}"


def arm_run_dir(runs_dir, arm, seed, steps=None, minutes=None):
    """`RUNS_DIR/runs/<preset>[+<overrides key>]/s<seed>-<budget>`."""
    name = arm.preset + (f"+{short_hash(arm.overrides)}" if arm.overrides else "")
    return os.path.join(runs_dir, "runs", name, f"s{seed}-{budget_name(steps, minutes)}")


def finished_runs(runs_dir, study, arm_name):
    """`{seed: run_dir}` of the finished runs of one arm at the study's budget."""
    arm = study.arms[arm_name]
    found = {}
    parent = os.path.dirname(arm_run_dir(runs_dir, arm, 0, study.steps, study.minutes))
    suffix = "-" + budget_name(study.steps, study.minutes)
    if not os.path.isdir(parent):
        return found
    for entry in sorted(os.listdir(parent)):
        if entry.startswith("s") and entry.endswith(suffix):
            run_dir = os.path.join(parent, entry)
            if os.path.exists(os.path.join(run_dir, "results.json")):
                found[int(entry[1:-len(suffix)])] = run_dir
    return found

