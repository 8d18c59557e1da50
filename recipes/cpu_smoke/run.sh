#!/usr/bin/env bash
# BoT-GRPO through verl's real trainer on a CPU-only machine: the demo as a verl run script to adapt.
#
#   bash recipes/cpu_smoke/run.sh [extra hydra overrides, e.g. trainer.total_training_steps=5]
#
# +preset=[bot_grpo,cpu] is all that differs from a GPU recipe: bot_grpo selects the estimator and the
# token-level reward manager, cpu holds every CPU override (FSDP2 over gloo, sdpa attention, the
# transformers rollout "hf_cpu", logical Ray GPUs, few workers). Add it to any recipe to run it on CPU.
#
# Variables (the defaults build the demo's tiny policy and data locally, cached under .cache/demo):
#   MODEL_PATH                 Hugging Face model directory (weights, config, tokenizer)
#   TRAIN_FILES, VAL_FILES     parquet files in verl's RL format
#   REWARD_PATH, REWARD_NAME   reward function file and function (float, or dict with token spans)
#   STEPS                      training steps (default 20)
#   METRICS                    JSONL file that verl's file logger writes (default outputs/cpu_smoke/metrics.jsonl)
#   PYTHON                     interpreter with verl and bot-grpo-verl (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}

if [[ -z "${MODEL_PATH:-}" || -z "${TRAIN_FILES:-}" || -z "${VAL_FILES:-}" ]]; then
    while IFS='=' read -r name path; do
        case "$name" in
            model_dir) MODEL_PATH=${MODEL_PATH:-$path} ;;
            train_parquet) TRAIN_FILES=${TRAIN_FILES:-$path} ;;
            val_parquet) VAL_FILES=${VAL_FILES:-$path} ;;
        esac
    done < <("$PYTHON" -m demo.assets --cache-dir .cache/demo)
fi
REWARD_PATH=${REWARD_PATH:-bot_grpo_verl/rewards/react_tsx.py}
REWARD_NAME=${REWARD_NAME:-compute_score}
METRICS=${METRICS:-outputs/cpu_smoke/metrics.jsonl}
mkdir -p "$(dirname "$METRICS")"

# Ray keeps AF_UNIX sockets under its temp dir (paths must fit 107 bytes): keep it short, under /tmp.
RAY_DIR=$(mktemp -d /tmp/ray.XXXXXX)
trap 'rm -rf "$RAY_DIR"' EXIT

export VERL_FILE_LOGGER_PATH=$METRICS HF_HOME=${HF_HOME:-$PWD/.cache/huggingface} TOKENIZERS_PARALLELISM=false
# The cpu preset switches the CPU mode on in verl's Ray workers; BOT_GRPO_CPU=1 does it in this driver too.
BOT_GRPO_CPU=1 "$PYTHON" -m verl.trainer.main_ppo \
    +preset=[bot_grpo,cpu] \
    data.train_files="$TRAIN_FILES" \
    data.val_files="$VAL_FILES" \
    data.train_batch_size=8 \
    data.max_prompt_length=256 \
    data.max_response_length=256 \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.model.enable_gradient_checkpointing=false \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.actor.optim.lr=1e-4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 \
    reward.custom_reward_function.path="$REWARD_PATH" \
    reward.custom_reward_function.name="$REWARD_NAME" \
    trainer.total_training_steps="${STEPS:-20}" \
    trainer.val_before_train=false \
    trainer.test_freq=-1 \
    trainer.save_freq=-1 \
    trainer.logger=[console,file] \
    trainer.project_name=bot-grpo-cpu \
    trainer.experiment_name=cpu_smoke \
    trainer.default_local_dir=outputs/cpu_smoke/checkpoints \
    +ray_kwargs.ray_init._temp_dir="$RAY_DIR" \
    "$@"
