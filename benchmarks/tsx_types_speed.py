"""Throughput of the React reward at ``level=types``: TypeScript 7 (``checker=tsc7``) against TypeScript 6
(``checker=tsc6``), side by side in one run (issue 26: at least 3x).

The same responses (``tsx_reward_speed.component``: 40-80 line components with state, props, a list and labels
in several scripts; every other one with a type error, so half the checks report a diagnostic) go through the
reward (``compute_score``, the process's shared worker, warmed up on both checkers first) through the same
thread pool. Rounds alternate the two checkers, so machine noise hits both alike; each round passes over the
responses until ``--least-seconds`` have gone. Per checker and round: responses per second of wall time and
**per core**, i.e. per CPU-second of this process and its descendants (the Node worker, its TypeScript thread
and, for tsc7, its Go process), read with psutil around the round. The rewards of the two checkers are checked
to be identical. Prints the load average around every round, writes JSON.

    python -m benchmarks.tsx_types_speed --out benchmarks/results/tsx_types_speed.json
"""

import argparse
import contextlib
import functools
import json
import os
import platform
import random
import statistics
import subprocess
import time
from pathlib import Path

import psutil

from benchmarks.tsx_reward_speed import FLAWS, component, load_reward, throughput

CHECKERS = ("tsc6", "tsc7")


def corpus(size: int, seed: int) -> list[str]:
    """Responses whose code passes the syntax check, so every one reaches the type check; odd ones fail it."""
    rng = random.Random(seed)
    codes = [component(rng, rng.randint(15, 50)) for _ in range(size)]
    codes = [FLAWS["type error"](code) if number % 2 else code for number, code in enumerate(codes)]
    return [f"Here is the component.\n```tsx\n{code}```\n" for code in codes]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its live descendants."""
    total = sum(psutil.Process().cpu_times()[:2])
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # ended since the listing
            total += sum(child.cpu_times()[:2])
    return total


def measure(rt, checker: str, responses: list[str], threads: int, least_s: float) -> tuple[dict, list[dict]]:
    """One round of ``checker``: passes over ``responses`` until ``least_s`` seconds have gone."""
    score = functools.partial(rt.compute_score, "bench", ground_truth=None, level="types", checker=checker)
    load = os.getloadavg()[0]
    used, wall, scored, results = cpu_seconds(), 0.0, 0, None
    while wall < least_s:
        started = time.perf_counter()
        _, results = throughput(score, responses, threads)
        wall += time.perf_counter() - started
        scored += len(results)
    cpu = cpu_seconds() - used
    rates = {
        "responses": scored,
        "per_second": scored / wall,
        "per_core": scored / cpu,
        "cpu_ms_per_response": 1000 * cpu / scored,
        "load_average_1min": [load, os.getloadavg()[0]],
    }
    return rates, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/tsx_types_speed.json"))
    parser.add_argument("--threads", type=int, default=8, help="concurrent calls, as verl's reward loop makes")
    parser.add_argument("--responses", type=int, default=32, help="responses per pass")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--least-seconds", type=float, default=5.0, help="each checker's least wall time per round")
    args = parser.parse_args(argv)

    rt = load_reward()
    responses = corpus(args.responses, seed=7)
    for checker in CHECKERS:  # start both checkers' threads and let the JIT warm up, untimed
        throughput(
            functools.partial(rt.compute_score, "bench", level="types", checker=checker), responses, args.threads
        )
    rounds = {checker: [] for checker in CHECKERS}
    results = {}
    for number in range(args.rounds):
        for checker in CHECKERS:
            rates, results[checker] = measure(rt, checker, responses, args.threads, args.least_seconds)
            rounds[checker].append(rates)
            print(
                f"round {number + 1} {checker}: {rates['per_second']:.1f} responses/s, {rates['per_core']:.1f} per "
                f"core ({rates['cpu_ms_per_response']:.1f} CPU ms each), load average "
                f"{rates['load_average_1min'][0]:.1f} -> {rates['load_average_1min'][1]:.1f}",
                flush=True,
            )
        if results["tsc6"] != results["tsc7"]:
            raise SystemExit("the two checkers' rewards differ: the benchmark compares different work")
    rt.shared_checker().close()
    median = {
        checker: {key: statistics.median(r[key] for r in runs) for key in ("per_second", "per_core")}
        for checker, runs in rounds.items()
    }
    speedup = {key: median["tsc7"][key] / median["tsc6"][key] for key in ("per_second", "per_core")}
    print(
        f"median per core: tsc6 {median['tsc6']['per_core']:.1f}, tsc7 {median['tsc7']['per_core']:.1f}/s: "
        f"{speedup['per_core']:.1f}x; wall: {speedup['per_second']:.1f}x"
    )
    report = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
        "threads": args.threads,
        "responses_per_pass": args.responses,
        "compile_rate": sum(result["compiled"] for result in results["tsc7"]) / len(responses),
        "rounds": rounds,
        "median": median,
        "speedup_tsc7_over_tsc6": speedup,
        "identical_rewards": True,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
