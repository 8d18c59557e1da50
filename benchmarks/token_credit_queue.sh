#!/usr/bin/env bash
# The token-credit study's learning-rate sweep (issue 43, benchmarks/PROTOCOL.md) as ONE sequential queue: the warm
# start is built and checked (python -m benchmarks.token_credit warm-start; the queue stops when it is outside the
# registered range), then the 32 sweep runs, one at a time, each summary committed as it finishes. Finished runs are
# skipped, so the same command resumes the queue. Start it in the background from the repository root:
#
#     setsid nohup nice -n 10 benchmarks/token_credit_queue.sh > /dev/null 2>&1 &
#
# Its log: runs/token-credit/queue.log; each run's CPU seconds: its summary's cpu_seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
# One torch thread per process: on a shared 2-core machine threads of one process only wait for each other.
export PYTHONPATH=$PWD OMP_NUM_THREADS=1
mkdir -p runs/token-credit
exec >>runs/token-credit/queue.log 2>&1
echo "== queue $$ started $(date -Is)"
"$PY" -m benchmarks.token_credit warm-start --results benchmarks/results/token-credit --commit
"$PY" -m benchmarks.matrix --task token_credit \
    --algorithms grpo,grpo_token_mean,bot_grpo,bot_grpo_uniform,bot_grpo_shuffled,dapo,ps_grpo,pure \
    --lrs 3e-5,1e-4,3e-4,1e-3 --seeds 0 --steps 200 --validate val --test-freq 50 --val-n 4 \
    --runs runs/token-credit/sweep --results benchmarks/results/token-credit/sweep --commit --no-report
echo "== queue $$ done $(date -Is)"
