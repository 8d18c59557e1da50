#!/usr/bin/env bash
# The token-credit study's runs (issue 43, benchmarks/PROTOCOL.md) as a sequential queue, one stage at a time:
#
#   sweep [CELLS]  the warm start built and checked unless kept (the queue stops when it is outside the registered
#                  range), then the learning-rate sweep (validation split, seed 0)
#   edge [CELLS]   the registered edge rule: each cell whose chosen rate is its grid's smallest (largest) runs at a
#                  third (three times) of it, seed 0; needs the sweep's choice (protocol_report, PROTOCOL.md)
#   final [CELLS]  the final matrix (test split, seeds 100-104) at the chosen rates, for the steps the plateau rule
#                  gave (threshold.json: python -m benchmarks.token_credit threshold)
#
# CELLS (comma-separated, default all) splits a stage into two queues on disjoint cells, one per worktree at the same
# commit: a run takes ~0.9 of a core, so two queues nearly double the rate on 2 cores. Each summary is committed as
# its run finishes and finished runs are skipped, so the same command resumes. Start it in the background from the
# repository root:
#
#     setsid nohup nice -n 10 benchmarks/token_credit_queue.sh final grpo,bot_grpo > /dev/null 2>&1 &
#
# TASK=token_credit_prefix runs the same stages on the free-length family (H4's task: cells grpo, bot_grpo and
# bot_grpo_uniform; its warm start built by the first sweep and kept beside the main task's):
#
#     TASK=token_credit_prefix setsid nohup nice -n 10 benchmarks/token_credit_queue.sh sweep > /dev/null 2>&1 &
#
# Its log: runs/token-credit/queue.log; each run's CPU seconds: its summary's cpu_seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
STAGE=${1:?"stage: sweep, edge or final"}
TASK=${TASK:-token_credit}
RESULTS=benchmarks/results/token-credit
kept_warm_start() { # the kept build whose manifest names $TASK, if any
    grep -l "\"task\": \"$TASK\"" "$RESULTS"/warm-starts/*/manifest.json 2>/dev/null | head -n 1 | xargs -r dirname || true
}
case "$TASK" in
token_credit)
    SWEPT=grpo,grpo_token_mean,bot_grpo,bot_grpo_uniform,bot_grpo_shuffled,dapo,ps_grpo,pure
    FINAL=$SWEPT,bot_grpo@flip10,bot_grpo@flip30
    WARM_START=$RESULTS/warm-starts/c2dea09be119fd63
    ;;
token_credit_prefix)
    SWEPT=grpo,bot_grpo,bot_grpo_uniform
    FINAL=$SWEPT
    WARM_START=$(kept_warm_start)
    ;;
*)
    echo "unknown TASK $TASK: token_credit or token_credit_prefix" >&2
    exit 2
    ;;
esac
CELLS=${2:-$([ "$STAGE" = final ] && echo "$FINAL" || echo "$SWEPT")}
CHOSEN=$RESULTS/$TASK/sweep.json
# One torch thread per process: on a shared 2-core machine threads of one process only wait for each other.
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p runs/token-credit
exec >>runs/token-credit/queue.log 2>&1
echo "== queue $$ $TASK $STAGE $CELLS started $(date -Is) at $(git rev-parse --short HEAD)"
if [ -z "$WARM_START" ]; then # built and checked once, by the first sweep
    [ "$STAGE" = sweep ] || { echo "no kept warm start of $TASK: run its sweep first" >&2 && exit 1; }
    "$PY" -m benchmarks.token_credit --task "$TASK" warm-start --results "$RESULTS" --commit
    WARM_START=$(kept_warm_start)
fi
# The kept warm start, installed under the key today's code computes (no rebuild; its weights are checked).
KEPT=(--warm-start "$WARM_START")
SWEEP=(--seeds 0 --steps 200 --validate val --test-freq 50 --val-n 4 --runs runs/token-credit/sweep
    --results "$RESULTS/sweep" --commit --no-report "${KEPT[@]}")
case "$STAGE" in
sweep)
    "$PY" -m benchmarks.matrix --task "$TASK" --algorithms "$CELLS" --lrs 3e-5,1e-4,3e-4,1e-3 "${SWEEP[@]}"
    ;;
edge)
    mapfile -t EDGES < <("$PY" -m benchmarks.token_credit edge-rates --sweep "$CHOSEN" --cells "$CELLS")
    for edge in "${EDGES[@]}"; do
        read -r cell lr <<<"$edge"
        "$PY" -m benchmarks.matrix --task "$TASK" --algorithms "$cell" --lrs "$lr" "${SWEEP[@]}"
    done
    ;;
final)
    STEPS=$("$PY" -c "import json; print(json.load(open('$RESULTS/$TASK/threshold.json'))['final_steps'])")
    "$PY" -m benchmarks.matrix --task "$TASK" --algorithms "$CELLS" --chosen-lrs "$CHOSEN" \
        --seeds 100,101,102,103,104 --steps "$STEPS" --validate test --test-freq 25 --val-n 4 \
        --runs runs/token-credit/final --results "$RESULTS" --commit --no-report "${KEPT[@]}"
    ;;
*)
    echo "unknown stage $STAGE: sweep, edge or final" >&2
    exit 2
    ;;
esac
echo "== queue $$ $STAGE done $(date -Is)"
