"""Cost of the React render check beside the compile check, per response, side by side in one run.

The same valid components (``tsx_reward_speed.make_corpus``, every flaw removed) are scored three ways by the
reward function itself, each with its long-lived worker warmed up first, through the same thread pool:
``syntax`` (esbuild), ``types`` (esbuild + TypeScript) and ``syntax+render`` (esbuild, then headless Chromium).
The rounds alternate, so machine noise hits all three alike; the headline is the ratio of render to types
time per response (issue 26 asks for at most 2x). Writes JSON and a PNG.

    python -m benchmarks.react_render_speed --out benchmarks/results/react_render_speed.json
"""

import argparse
import json
import os
import platform
import statistics
from pathlib import Path

from benchmarks.tsx_reward_speed import component, load_reward, throughput

STAGES = {
    "syntax": {"level": "syntax"},
    "types": {"level": "types"},
    "syntax+render": {"level": "syntax", "render": True},
}


def corpus(size: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    body = (component(rng, rng.randint(15, 50)) for _ in range(size))
    return [f"Here is the component.\n```tsx\n{code}```\n" for code in body]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/react_render_speed.json"))
    parser.add_argument("--threads", type=int, default=8, help="concurrent calls, as verl's reward loop makes")
    parser.add_argument("--responses", type=int, default=32, help="responses per stage and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    rt = load_reward()
    responses = corpus(args.responses, seed=1)
    for options in STAGES.values():  # warm up every worker (and the browser) on other responses
        throughput(lambda text, options=options: rt.compute_score("bench", text, None, **options), corpus(8, 2), 4)
    rates = {stage: [] for stage in STAGES}
    for round_number in range(args.rounds):
        for stage, options in STAGES.items():
            rate, results = throughput(
                lambda text, options=options: rt.compute_score("bench", text, None, **options), responses, args.threads
            )
            expected = "rendered" if "render" in options else "compiled"
            assert all(result[expected] == 1 for result in results), f"{stage}: not every component passed"
            rates[stage].append(rate)
            print(f"round {round_number + 1}: {stage:14s} {rate:7.1f} responses/s", flush=True)
    median = {stage: statistics.median(values) for stage, values in rates.items()}
    result = {
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()},
        "threads": args.threads,
        "responses_per_round": args.responses,
        "responses_per_second": rates,
        "median_responses_per_second": median,
        "render_cost_over_types": median["types"] / median["syntax+render"],
        "render_cost_over_syntax": median["syntax"] / median["syntax+render"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(median, args.out.with_suffix(".png"))
    print(json.dumps({key: result[key] for key in ("median_responses_per_second", "render_cost_over_types")}, indent=2))
    return 0


def plot(median: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 3))
    axis.bar(list(median), list(median.values()), color=["#4c72b0", "#dd8452", "#55a868"])
    axis.set_ylabel("responses / s (median of rounds)")
    axis.set_title("React reward stages, one run, 2-core machine")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
