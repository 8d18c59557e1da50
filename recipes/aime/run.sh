#!/usr/bin/env bash
# AIME math (reward_models/math_prm.py): every algorithm with identical settings, one command each.
# Settings: recipes/algorithms.py. Data: python -m recipes.data.prepare_aime (writes data/aime/).
#
#   MODEL=qwen2.5-3b SEED=0 bash recipes/aime/run.sh [extra hydra overrides, e.g. trainer.n_gpus_per_node=4]
#
# MODEL, SEED, DRY_RUN, PYTHON: see recipes/run_all.sh.
exec bash "$(dirname "$0")/../run_all.sh" aime "$@"
