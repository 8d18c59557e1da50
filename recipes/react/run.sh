#!/usr/bin/env bash
# React code generation (bot_grpo_verl/rewards/react_tsx.py): every algorithm with identical settings, one command each.
# Settings: recipes/algorithms.py. Data: python -m recipes.data.prepare_react (writes data/react/).
#
#   ALGORITHM=bot_grpo SEED=0 MODEL=qwen2.5-3b bash recipes/react/run.sh [extra hydra overrides, e.g. trainer.n_gpus_per_node=4]
#   DRY_RUN=1 bash recipes/react/run.sh        # every algorithm x seed: one command a line, for a scheduler
#
# ALGORITHM, SEED, MODEL, DRY_RUN, SEQUENTIAL, RUNS_DIR, PYTHON: see recipes/run_all.sh (one run unless asked).
exec bash "$(dirname "$0")/../run_all.sh" react "$@"
