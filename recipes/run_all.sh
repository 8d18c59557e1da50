#!/usr/bin/env bash
# Every algorithm of one task with identical settings, one command each: bash recipes/run_all.sh TASK [overrides]
# (recipes/react/run.sh and recipes/aime/run.sh call it). Settings: recipes/algorithms.py.
#
# MODEL: qwen2.5-3b | smollm3-3b | phi4-mini-reasoning (default qwen2.5-3b). SEED: one seed (default: every
# seed of the task). DRY_RUN=1 prints the commands only. Extra overrides apply to every algorithm alike.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "PROBLEM: no task given; usage: bash recipes/run_all.sh TASK [overrides] (TASK: react or aime)" >&2
    exit 2
fi
task="$1"
shift

"${PYTHON:-python}" -m recipes.launch --task "$task" --model "${MODEL:-qwen2.5-3b}" --algorithm all \
    ${SEED:+--seed "$SEED"} ${DRY_RUN:+--dry-run} "$@"
