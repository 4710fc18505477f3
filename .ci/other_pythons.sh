#!/usr/bin/env bash
# CI, after README's test command (Python 3.11): a smoke subset of the tests on the
# other Pythons that setup.cfg admits (python_requires >=3.11,<3.14), each in its own
# git-ignored venv (.venv-3.13; .venv-3.12 when asked). CI checks the two ends of the
# range: 3.11 (the main suite) and 3.13 (this smoke set); 3.12 left the default list
# when the whole CI run reached 30 minutes (2026-11-25; it passed 672 smoke tests then).
# Check it with CI_OTHER_PYTHONS="3.12 3.13" bash .ci/other_pythons.sh. A missing interpreter is reported on one
# line and skipped, as is a version whose venv would not fit on the disk; a failed install, import, `tf-outheads --help` or test fails CI.
#
# Every line of a smoke run is prefixed with "[python 3.X]" so that its pytest summary
# cannot be taken for the main suite's; the script ends with one line per version,
#   CI [python 3.X]: <pytest summary> (exit N)
# after the line "CI: other Pythons, per version:", that .ci/run gathers into its summary.
#
# Knobs (environment): CI_OTHER_PYTHONS (default "3.13"), CI_SMOKE_TESTS (space-separated
# pytest arguments, default below), CI_MIN_FREE_MB (default 4096: the disk a new venv
# needs; with less free the version is skipped on one line, see below).
set -uo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"

versions=(${CI_OTHER_PYTHONS:-3.13})
CI_MIN_FREE_MB=${CI_MIN_FREE_MB:-4096}
# Fast, CPU-only, and touching every dependency: TF / TF-Text / Keras (layers, the
# cross-entropy and vMF losses, linalg and Bessel ops, metrics), sentencepiece
# (tokenizer), eflomal (word_pairs, the one dependency built from source), gensim
# (word_vectors), keras-hub (beam), mpmath (Bessel, vMF). The fused LSTM's and the
# sampled softmax's tests left it on 2026-11-27 (the whole smoke set took 299 s then,
# and CI 1,845 s on a quiet 2-core machine): they use no other dependency.
smoke=(${CI_SMOKE_TESTS:-tests/layers tests/losses/test_cross_entropy.py tests/losses/test_vmf.py
  tests/ops/test_linalg.py tests/ops/test_bessel.py tests/metrics
  tests/data/test_tokenizer.py tests/data/test_word_pairs.py tests/data/test_word_vectors.py
  tests/decoding/test_beam.py::test_top_beams_match_keras_hub_beam_sampler})

# A CPython X.Y interpreter that runs (a pyenv shim of a version that is not selected
# fails) and is not a free-threaded build (TensorFlow has no cp313t wheels).
find_python() {
  local v=$1 c root=${PYENV_ROOT:-$HOME/.pyenv}
  local -a candidates=()
  c=$(command -v "python$v" 2>/dev/null) && candidates+=("$c")
  if command -v pyenv >/dev/null 2>&1; then
    c=$(pyenv which "python$v" 2>/dev/null) && candidates+=("$c")
  fi
  while IFS= read -r c; do candidates+=("$c"); done < <(
    ls -d "$root"/versions/"$v"*/bin/"python$v" /root/.pyenv/versions/"$v"*/bin/"python$v" \
      2>/dev/null | sort -rV | uniq)
  for c in "${candidates[@]}"; do
    if "$c" -c "import sys, sysconfig; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))) or bool(sysconfig.get_config_var('Py_GIL_DISABLED')))" \
        >/dev/null 2>&1; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

summary_of() {  # the closing pytest line of a log, without the "[python 3.X] " prefix
  sed -E 's/^\[python [0-9.]+\] //' "$1" |
    grep -E '\b(passed|failed|errors?|skipped|deselected|xfailed|xpassed|no tests ran)\b.* in [0-9.]+s' |
    tail -n 1 || true
}

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
declare -A result
status=0
for v in "${versions[@]}"; do
  tag="[python $v]"
  if ! py=$(find_python "$v"); then
    echo "CI $tag: SKIPPED, no python$v interpreter found (PATH, pyenv, ~/.pyenv/versions)"
    result[$v]="skipped: no interpreter"
    continue
  fi
  venv=".venv-$v"
  start=$SECONDS
  echo "CI $tag: $("$py" -VV | head -n 1) at $py -> $venv"
  # A venv with TensorFlow takes ~2.7 GB, and pip unpacks the wheels beside it. With too
  # little disk left (what the main suite's venv and the tests leave), the set is skipped
  # on one line that says so, like a missing interpreter; an install that still fails is
  # a failure. (2026-11-25: a CI run died in pip with "No space left on device".)
  if [ ! -x "$venv/bin/python" ]; then
    free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
    echo "CI $tag: $((free_kb / 1024)) MiB free on $(df -P . | awk 'NR == 2 {print $6}') before the install"
    if [ "$free_kb" -lt $((CI_MIN_FREE_MB * 1024)) ]; then
      echo "CI $tag: SKIPPED, $((free_kb / 1024)) MiB of disk free; a venv needs ${CI_MIN_FREE_MB} MiB (CI_MIN_FREE_MB)"
      result[$v]="skipped: $((free_kb / 1024)) MiB of disk free, ${CI_MIN_FREE_MB} MiB needed"
      continue
    fi
  fi
  if ! { "$py" -m venv "$venv" &&
         "$venv/bin/python" -m pip install -q --no-cache-dir -e ".[test]"; }; then
    echo "CI $tag: FAILED: venv or pip install -e \".[test]\""
    df -h . | sed "s/^/$tag /"
    result[$v]="FAILED: install"; status=1; continue
  fi
  echo "CI $tag: installed in $((SECONDS - start)) s"
  # TensorFlow logs to stderr on import: shown only if the check fails.
  if ! { "$venv/bin/python" -c "import tensorflow, tensorflow_text, keras, keras_hub, sentencepiece, sacrebleu, numpy, gensim, eflomal, mpmath" &&
         "$venv/bin/tf-outheads" --help; } >"$log_dir/check-$v.log" 2>&1; then
    sed "s/^/$tag /" "$log_dir/check-$v.log"
    echo "CI $tag: FAILED: an import or tf-outheads --help"
    result[$v]="FAILED: import or tf-outheads --help"; status=1; continue
  fi
  echo "CI $tag: python -m pytest ${smoke[*]} -q -x --durations=10"
  start=$SECONDS
  "$venv/bin/python" -m pytest "${smoke[@]}" -q -x --durations=10 -p no:cacheprovider 2>&1 |
    sed -u "s/^/$tag /" | tee "$log_dir/$v.log"
  rc=${PIPESTATUS[0]}
  line=$(summary_of "$log_dir/$v.log")
  if [ "$rc" -eq 5 ]; then
    echo "CI $tag: FAILED: the smoke subset collected no tests (pytest exit 5)"
    status=1
  elif [ "$rc" -ne 0 ]; then
    echo "CI $tag: FAILED: pytest exit $rc"
    status=1
  fi
  echo "CI $tag: smoke subset took $((SECONDS - start)) s"
  result[$v]="${line:-no pytest summary} (exit $rc)"
done

echo "CI: other Pythons, per version:"
for v in "${versions[@]}"; do
  echo "CI [python $v]: ${result[$v]}"
done
exit $status
