"""Throughput of the TSX compile reward: the long-lived worker against one Node process per response.

Both checkers run the same worker script (bot_grpo_verl/rewards/tsx/worker.mjs) on the same responses through
the same thread pool, in one run, and the same scoring turns their answers into rewards (checked to be
identical). The only difference is the process lifetime: ``worker`` is the reward function itself
(``compute_score``, one shared worker per process, started and warmed up on other responses before the
timing, as it is during training); ``subprocess`` starts ``node worker.mjs`` for every response, sends
one request and closes it. Each level gets its own corpus of realistic components
(valid ones and ones with syntax, JSX and type errors, some with CJK and emoji). Writes JSON and a PNG.

    python benchmarks/tsx_reward_speed.py --out benchmarks/results/tsx_reward_speed.json
"""

import argparse
import concurrent.futures
import functools
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "bot_grpo_verl" / "rewards" / "tsx" / "worker.mjs"


def load_reward():
    spec = importlib.util.spec_from_file_location("react_tsx", ROOT / "bot_grpo_verl" / "rewards" / "react_tsx.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FLAWS = {
    "valid": lambda code: code,
    "missing brace": lambda code: code.rstrip().removesuffix("}"),
    "unclosed tag": lambda code: code.replace("</li>", "", 1),
    "bad attribute": lambda code: code.replace('className="item"', "className=", 1),
    "type error": lambda code: code.replace("useState<number>(0)", 'useState<number>("0")', 1),
}


def component(rng: random.Random, items: int) -> str:
    """A 40-80 line React component with state, props, a list and labels in several scripts."""
    labels = ["Save", "保存", "Сохранить", "저장 ✨", "Enregistrer 😀", "حفظ"]
    rows = "\n".join(
        f'        <li key="{i}" className="item" onClick={{() => setCount(count + {i})}}>'
        f"{{props.prefix}} {rng.choice(labels)} #{i}</li>"
        for i in range(items)
    )
    return f"""import {{ useState, useEffect }} from "react";

type Props = {{ prefix: string; limit?: number }};

function useTicker(limit: number) {{
  const [tick, setTick] = useState(0);
  useEffect(() => {{
    const id = setInterval(() => setTick((t) => (t + 1) % limit), 1000);
    return () => clearInterval(id);
  }}, [limit]);
  return tick;
}}

export default function Panel(props: Props) {{
  const [count, setCount] = useState<number>(0);
  const tick = useTicker(props.limit ?? 10);
  const title = `${{props.prefix}}: ${{count}} / ${{tick}}`;
  return (
    <section aria-label="panel">
      <h2>{{title}}</h2>
      <ul>
{rows}
      </ul>
      <button disabled={{count > 100}} onClick={{() => setCount(0)}}>reset</button>
    </section>
  );
}}
"""


def make_corpus(size: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    names = list(FLAWS)
    return [
        f"Here is the component.\n```tsx\n{FLAWS[names[i % len(names)]](component(rng, rng.randint(15, 50)))}```\n"
        for i in range(size)
    ]


def check_in_new_process(codes: list[str], level: str, elements: bool, max_diagnostics: int, timeout: float):
    """The baseline checker: one ``node worker.mjs`` per call (a response), same protocol and answers."""
    requests = "".join(
        json.dumps({"id": n, "code": code, "level": level, "elements": elements, "max_diagnostics": max_diagnostics})
        + "\n"
        for n, code in enumerate(codes)
    )
    run = subprocess.run(
        ["node", str(WORKER)], input=requests, capture_output=True, text=True, timeout=timeout, check=True
    )
    answers = {message["id"]: message for message in map(json.loads, run.stdout.splitlines()) if "id" in message}
    return [answers[n] for n in range(len(codes))]


def score_with_subprocess(rt, text: str, options) -> dict:
    blocks, final = rt.precheck(text, options)
    if final is not None:
        return final
    codes = [text[start:end] for start, end in blocks]
    answers = check_in_new_process(codes, options.level, options.region == "element", options.max_diagnostics, 120)
    return rt.score_answers(text, blocks, answers, options)


def throughput(score, responses: list[str], threads: int) -> tuple[float, list[dict]]:
    """Responses per second of ``score`` over ``responses`` through a pool of ``threads``, and the results."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        start = time.perf_counter()
        results = list(pool.map(score, responses))
        seconds = time.perf_counter() - start
    return len(responses) / seconds, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/tsx_reward_speed.json"))
    parser.add_argument("--threads", type=int, default=8, help="concurrent calls, as verl's reward loop makes")
    parser.add_argument("--syntax-responses", type=int, default=120)
    parser.add_argument("--types-responses", type=int, default=48)
    parser.add_argument("--warm-up", type=int, default=16, help="responses scored (untimed) to start the worker")
    args = parser.parse_args()

    rt = load_reward()
    checker = rt.shared_checker()
    results = {}
    for level, size in (("syntax", args.syntax_responses), ("types", args.types_responses)):
        options = rt.parse_options({"level": level})
        responses = make_corpus(size, seed=len(level))
        score = functools.partial(rt.compute_score, "bench", ground_truth=None, level=level)
        # A reward worker lives for the whole training run: start it and let Node's JIT warm up first.
        started = time.perf_counter()
        throughput(score, make_corpus(args.warm_up, seed=99), args.threads)
        warm_up = time.perf_counter() - started
        print(f"[{level}] {size} responses, {args.threads} threads ...", end=" ", flush=True)
        worker_rate, worker_results = throughput(score, responses, args.threads)
        subprocess_rate, subprocess_results = throughput(
            lambda text, options=options: score_with_subprocess(rt, text, options), responses, args.threads
        )
        if worker_results != subprocess_results:
            raise SystemExit(f"[{level}] the two checkers disagree: the benchmark compares different work")
        results[level] = {
            "responses": size,
            "compile_rate": sum(r["compiled"] for r in worker_results) / size,
            "mean_response_chars": sum(map(len, responses)) / size,
            "worker_responses_per_second": worker_rate,
            "subprocess_responses_per_second": subprocess_rate,
            "speedup": worker_rate / subprocess_rate,
            "worker_warm_up_seconds": warm_up,
            "worker_warm_up_responses": args.warm_up,
        }
        print(
            f"worker {worker_rate:.1f}/s, subprocess {subprocess_rate:.1f}/s, "
            f"speedup {results[level]['speedup']:.1f}x (worker warm-up {warm_up:.2f} s)"
        )
    checker.close()

    report = {
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
        "threads": args.threads,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    plot(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(results)
    figure, axis = plt.subplots(figsize=(7, 4))
    for offset, (key, label) in enumerate(
        [
            ("worker_responses_per_second", "long-lived worker"),
            ("subprocess_responses_per_second", "process per response"),
        ]
    ):
        values = [results[level][key] for level in levels]
        bars = axis.bar([i + offset * 0.4 for i in range(len(levels))], values, 0.4, label=label)
        axis.bar_label(bars, fmt="%.1f")
    axis.set_yscale("log")
    axis.set_xticks([i + 0.2 for i in range(len(levels))], [f"{level} level" for level in levels])
    axis.set_ylabel("responses per second (log)")
    axis.set_title("TSX compile reward throughput (same responses, same thread pool, one run)", fontsize=10)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
