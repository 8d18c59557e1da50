#!/usr/bin/env bash
# AIME math (bot_grpo_verl/rewards/math_prm.py): every algorithm with identical settings, one command each.
# Settings: recipes/algorithms.py. Data: python -m recipes.data.prepare_aime (writes data/aime/).
#
#   ALGORITHM=bot_grpo SEED=0 MODEL=qwen2.5-3b bash recipes/aime/run.sh [extra hydra overrides, e.g. trainer.n_gpus_per_node=4]
#   DRY_RUN=1 bash recipes/aime/run.sh        # every algorithm x seed: one command a line, for a scheduler
#
# ALGORITHM, SEED, MODEL, DRY_RUN, SEQUENTIAL, RUNS_DIR, PYTHON: see recipes/run_all.sh (one run unless asked).
exec bash "$(dirname "$0")/../run_all.sh" aime "$@"
