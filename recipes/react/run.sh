#!/usr/bin/env bash
# React code generation (reward_models/react_tsx.py): every algorithm with identical settings, one command each.
# Settings: recipes/algorithms.py. Data: python -m recipes.data.prepare_react (writes data/react/).
#
#   MODEL=qwen2.5-3b SEED=0 bash recipes/react/run.sh [extra hydra overrides, e.g. trainer.n_gpus_per_node=4]
#
# MODEL: qwen2.5-3b | smollm3-3b | phi4-mini-reasoning (default qwen2.5-3b). SEED: one seed (default: every
# seed of the task). DRY_RUN=1 prints the commands only. Extra overrides apply to every algorithm alike.
set -euo pipefail
cd "$(dirname "$0")/../.."

run() {
    "${PYTHON:-python}" -m recipes.launch --task react --model "${MODEL:-qwen2.5-3b}" --algorithm "$1" \
        ${SEED:+--seed "$SEED"} ${DRY_RUN:+--dry-run} "${@:2}"
}

run grpo "$@"
run dr_grpo "$@"
run dapo "$@"
run gspo "$@"
run pure "$@"
run bot_grpo "$@"
run bot_grpo_uniform "$@"
run bot_grpo_no_std "$@"
run bot_grpo_return_to_go "$@"
