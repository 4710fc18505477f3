#!/usr/bin/env bash
# GPU throughput of the zoo's training step and decoding, in one command (issue 22).
#
#   bash benchmarks/gpu.sh                 # a GPU machine: every measurement (~30-60 min)
#   bash benchmarks/gpu.sh --dry-run       # anywhere: the same commands at --quick sizes
#   bash benchmarks/gpu.sh --out DIR --python .venv/bin/python
#
# Training (benchmarks/training.py; target tokens/s, fixed-shape batches of 64 x 30 / 30):
#   - lstm-pappas shape: 2-layer LSTM 512, left-to-right encoder, |V| 32000, dropout 0.3;
#     heads softmax (full), tied, joint512 and sampled5 (a 5 % sampled softmax on joint512);
#   - transformer-base shape: 6+6 layers, 512 / 2048, 8 heads, |V| 32000, dropout 0.1;
#   each in float32, mixed_float16 and mixed_bfloat16, with the trainer's graph step
#   (tf_outheads) and its XLA step (tf_outheads-xla).
# First, on a GPU, the tests of the cuDNN paths against the loops (values and gradients).
# Decoding (benchmarks/decode.py; sentences/s, greedy and beam 4): untrained lstm-pappas and
#   transformer-base models on 512 dev sentences (an untrained model rarely stops early, so
#   sentences/s are a lower bound; tokens/s compare).
#
# Each measurement writes its JSON to --out (default benchmarks/results/gpu), and
# gpu.json there gathers them with the GPU's name (nvidia-smi). --dry-run runs every
# command at the scripts' --quick sizes, on whatever device there is, into --out
# (tests/benchmarks/test_gpu_script.py runs it); without --dry-run and without a GPU it
# stops before measuring anything.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python}"
out="$here/results/gpu"
dry_run=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry_run=1 ;;
        --out) out="$2"; shift ;;
        --python) python="$2"; shift ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$out"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

gpus="$("$python" -c 'import tensorflow as tf; print(len(tf.config.list_physical_devices("GPU")))' 2>/dev/null | tail -1)"
if [ "$dry_run" = 0 ] && [ "${gpus:-0}" = 0 ]; then
    echo "gpu.sh: TensorFlow sees no GPU here; run it on a GPU machine, or --dry-run to check the commands" >&2
    exit 1
fi

precisions="float32,mixed_float16,mixed_bfloat16"
loops="tf_outheads,tf_outheads-xla"
if [ "$dry_run" = 1 ]; then
    quick="--quick"
    lstm_sizes=(--num-layers 2 --unidirectional-encoder)
    lstm_heads="softmax,tied,joint32,sampled5"
    transformer_sizes=(--num-layers 1)
    decode_lstm=(--preset lstm-tiny)
    decode_transformer=(--preset transformer-cpu --vocab-size 500)
else
    quick=""
    lstm_sizes=(--num-layers 2 --unidirectional-encoder --embedding-dim 512 --hidden-dim 512
                --vocab-size 32000 --dropout 0.3 --batch-size 64 --steps 20 --repeats 3)
    lstm_heads="softmax,tied,joint512,sampled5"
    transformer_sizes=(--num-layers 6 --hidden-dim 512 --ffn-dim 2048 --num-heads 8
                       --vocab-size 32000 --dropout 0.1 --batch-size 64 --steps 20 --repeats 3)
    decode_lstm=(--preset lstm-pappas --vocab-size 8000 --sentences 512 --beams 1,4)
    decode_transformer=(--preset transformer-base --vocab-size 8000 --sentences 512 --beams 1,4)
fi

run() {
    local name="$1"; shift
    echo "== $name: $*"
    "$python" "$@" --output "$out/$name.json"
}

if [ "$dry_run" = 0 ]; then
    # The cuDNN paths (the encoder's Keras layers, the decoder without input feeding
    # through tf_outheads.ops.sequence_lstm) against the loops, on this GPU: values and
    # gradients. On a CPU these tests exercise the fallbacks only.
    echo "== cuDNN paths against the loops (pytest)"
    (cd "$here/.." && "$python" -m pytest -q -p no:cacheprovider tests/ops/test_recurrent.py \
        -k "whole_sequence or sequence_lstm or fused_encoder")
fi

run training-lstm-pappas "$here/training.py" $quick --model lstm "${lstm_sizes[@]}" \
    --loops "$loops" --heads "$lstm_heads" --precision "$precisions"
run training-transformer-base "$here/training.py" $quick --model transformer \
    "${transformer_sizes[@]}" --loops "$loops" --heads softmax,tied --precision "$precisions"
run decode-lstm-pappas "$here/decode.py" $quick "${decode_lstm[@]}"
run decode-transformer-base "$here/decode.py" $quick "${decode_transformer[@]}"

"$python" - "$out" "$dry_run" <<'EOF'
import json, os, subprocess, sys
out, dry_run = sys.argv[1], sys.argv[2] == "1"
names = ["training-lstm-pappas", "training-transformer-base", "decode-lstm-pappas",
         "decode-transformer-base"]
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True,
                         timeout=30).stdout.strip().splitlines()
except (OSError, subprocess.SubprocessError):
    gpu = []
record = {"dry_run": dry_run, "gpus": gpu,
          "runs": {name: json.load(open(os.path.join(out, name + ".json"))) for name in names}}
with open(os.path.join(out, "gpu.json"), "w") as f:
    json.dump(record, f, indent=1)
print(f"wrote {os.path.join(out, 'gpu.json')} ({len(names)} runs; GPUs: {gpu or 'none'})")
EOF
