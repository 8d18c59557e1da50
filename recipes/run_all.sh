#!/usr/bin/env bash
# Every algorithm of one task with identical settings, one command each: bash recipes/run_all.sh TASK [overrides]
# (recipes/react/run.sh and recipes/aime/run.sh call it). Settings: recipes/algorithms.py.
#
# MODEL: qwen2.5-3b | smollm3-3b | phi4-mini-reasoning (default qwen2.5-3b). ALGORITHM: one row of the table
# (default: all of them). SEED: one seed (default: every seed of the task). More than one run is refused unless
# DRY_RUN=1 (print the commands only, one per scheduler job) or SEQUENTIAL=1 (run them one after the other).
# RUNS_DIR: where runs keep metrics and validation samples (default runs/recipes). Extra overrides apply to every
# algorithm alike.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "PROBLEM: no task given; usage: bash recipes/run_all.sh TASK [overrides] (TASK: react or aime)" >&2
    exit 2
fi
task="$1"
shift

"${PYTHON:-python}" -m recipes.launch --task "$task" --model "${MODEL:-qwen2.5-3b}" --algorithm "${ALGORITHM:-all}" \
    ${SEED:+--seed "$SEED"} ${RUNS_DIR:+--runs-dir "$RUNS_DIR"} ${DRY_RUN:+--dry-run} ${SEQUENTIAL:+--sequential} "$@"
