#!/usr/bin/env bash
# Makes the OpenNMT-py 3.5.1 environment of benchmarks/peer_opennmt.py (CPU only).
#   bash benchmarks/peer_setup.sh [VENV_DIR] [TORCH]
# VENV_DIR defaults to runs/peer-venv (what peer_opennmt.py looks for); TORCH is what pip
# installs torch from: a CPU wheel file, or a requirement such as "torch==2.13.0" given
# with PIP_INDEX_URL / PIP_EXTRA_INDEX_URL pointing at a CPU build (default: "torch").
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-runs/peer-venv}
torch=${2:-torch}
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$torch"
"$venv/bin/pip" install -q -r benchmarks/peer_requirements.txt
"$venv/bin/pip" install -q --no-deps opennmt-py==3.5.1
"$venv/bin/onmt_train" -h > /dev/null
echo "OpenNMT-py ready: $venv/bin/python (pass it as --peer-python, or set TF_OUTHEADS_PEER_PYTHON)"
