#!/usr/bin/env bash
# Does a SavedModel exported with the project's TensorFlow (2.21) load and
# translate identically under the TensorFlow of an older TF Serving release?
#
#   bash serving/check_compat.sh                      # TF 2.20 (tensorflow/serving:2.20.*)
#   TF_VERSION=2.19 bash serving/check_compat.sh      # another release
#
# Builds (once) a second venv with tensorflow==$TF_VERSION.* and
# tensorflow-text==$TF_VERSION.* (a few minutes of pip the first time), exports
# a tiny model with the project venv, runs serving/compat_check.py in both
# environments (TensorFlow + tensorflow-text only, no tf_outheads) and compares.
# Not part of the test suite. Exit status 0: identical.
set -euo pipefail
cd "$(dirname "$0")/.."
TF_VERSION="${TF_VERSION:-2.20}"
PROJECT_PYTHON="${PROJECT_PYTHON:-.venv/bin/python}"
COMPAT_VENV="${COMPAT_VENV:-/tmp/tf${TF_VERSION//./}venv}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2

if ! "$COMPAT_VENV/bin/python" -c "import tensorflow, tensorflow_text" 2>/dev/null; then
  echo "[compat] building $COMPAT_VENV: tensorflow==$TF_VERSION.* tensorflow-text==$TF_VERSION.*"
  python3.11 -m venv "$COMPAT_VENV"
  "$COMPAT_VENV/bin/pip" install -q "tensorflow==$TF_VERSION.*" "tensorflow-text==$TF_VERSION.*"
fi

echo "[compat] exporting a tiny model with $("$PROJECT_PYTHON" -c 'import tensorflow as tf; print("TensorFlow", tf.__version__)' 2>/dev/null)"
"$PROJECT_PYTHON" serving/compat_check.py export "$WORK/export"
# Both runs start outside the repository: nothing of tf_outheads is importable.
here="$PWD"
(cd / && "$here/$PROJECT_PYTHON" "$here/serving/compat_check.py" translate "$WORK/export" "$WORK/project.json")
(cd / && "$COMPAT_VENV/bin/python" "$here/serving/compat_check.py" translate "$WORK/export" "$WORK/compat.json")
"$PROJECT_PYTHON" serving/compat_check.py compare "$WORK/project.json" "$WORK/compat.json"

# The gRPC client example, against a loopback PredictionService in the same
# environment (tensorflow-serving-api of the same release, into the compat venv).
if "$COMPAT_VENV/bin/pip" install -q "tensorflow-serving-api==$TF_VERSION.*" 2>/dev/null; then
  (cd / && "$COMPAT_VENV/bin/python" "$here/serving/compat_check.py" grpc "$WORK/export")
else
  echo "[compat] tensorflow-serving-api==$TF_VERSION.* not installable: gRPC client not checked"
fi
