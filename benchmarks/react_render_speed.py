"""Cost of each stage of the React reward per response, side by side in one run, per second and per core.

The same valid components (``tsx_reward_speed.make_corpus``, every flaw removed) go through four stages, each
with its long-lived worker warmed up first, through the same thread pool:

- ``syntax``: the reward at ``level=syntax`` (esbuild);
- ``types``: the reward at ``level=types`` (esbuild + TypeScript 7, the default checker);
- ``types tsc6``: the same with ``checker="tsc6"``, TypeScript 6, the type check issue 26 measured when it set the
  render's budget (2x the cost of ``level=types``);
- ``syntax+render``: the reward at ``level=syntax, render=True`` (esbuild, then headless Chromium);
- ``judge``: one judge round trip per response (``JudgeClient.score``: prompt, HTTP, strict parse) against a
  local fake OpenAI-compatible server in its own process that answers at once, a fresh client (empty cache)
  every pass: the reward's side of the judge, not the judge model's inference.

Each round of a stage passes over the responses until ``--least-seconds`` have gone. The rounds alternate, so
machine noise hits every stage alike. Per stage: responses per second of wall time and
**per core**, i.e. per CPU-second of this process and its descendants (the Node workers and Chromium; not the
fake judge server), read with psutil around each round. From the per-core medians, the CPU cost of one
paper-scale step (``--paper-responses``, 1,024) and its wall time on a ``--node-cores`` node (16) with the
reward spread over every core. Writes JSON and a PNG.

    python -m benchmarks.react_render_speed --out benchmarks/results/react_render_speed.json
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import random
import statistics
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

from benchmarks.tsx_reward_speed import component, load_reward, throughput
from bot_grpo_verl.rewards.react_judge import JudgeClient, JudgeConfig
from bot_grpo_verl.rewards.react_render import shared_renderer
from bot_grpo_verl.rewards.tsx_setup import worker_script

TYPES_CHECKER = "tsc7"  # the reward's default checker at level=types
STAGES = {
    "syntax": {"level": "syntax"},
    "types": {"level": "types", "checker": TYPES_CHECKER},
    "types tsc6": {"level": "types", "checker": "tsc6"},
    "syntax+render": {"level": "syntax", "render": True},
    "judge": None,  # a judge round trip, see judge_stage
}


def corpus(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    body = (component(rng, rng.randint(15, 50)) for _ in range(size))
    return [f"Here is the component.\n```tsx\n{code}```\n" for code in body]


class FakeJudge(BaseHTTPRequestHandler):
    """Serves the model ``fake`` and answers every chat completion at once with one score line."""

    def do_GET(self):  # noqa: N802
        self.answer({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer({"choices": [{"message": {"role": "assistant", "content": "SCORE: 7"}}]})

    def answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def serve_fake_judge(ports) -> None:
    """The fake judge server's process: tells its port through ``ports``, then serves until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeJudge)
    ports.put(server.server_address[1])
    server.serve_forever()


def process_kind(process: psutil.Process) -> str:
    """What a process of the benchmark is: ``python`` (this one), ``node`` (a worker), ``chromium <type>`` (the
    browser process, its renderers, its GPU and utility processes), else its name (esbuild's and TypeScript 7's
    Go processes)."""
    if process.pid == os.getpid():
        return "python"
    if process.name().startswith("node"):
        return "node"
    command = process.cmdline()
    if not any("chrom" in part for part in command[:1]):
        return process.name()
    kinds = [part.removeprefix("--type=") for part in command if part.startswith("--type=")]
    return f"chromium {kinds[0] if kinds else 'browser'}"


def cpu_seconds(exclude: set[int]) -> dict[str, float]:
    """User + system CPU seconds of this process and its live descendants, except the pids in ``exclude``, per
    :func:`process_kind`."""
    totals: dict[str, float] = {}
    for process in (psutil.Process(), *psutil.Process().children(recursive=True)):
        if process.pid not in exclude:
            with contextlib.suppress(psutil.Error):  # ended since the listing
                kind = process_kind(process)
                totals[kind] = totals.get(kind, 0.0) + sum(process.cpu_times()[:2])
    return totals


def stage_scorer(rt, stage: str, endpoint: str):
    """The function scoring one response in ``stage`` (the judge stage: a fresh client, so nothing is cached)."""
    if STAGES[stage] is None:
        client = JudgeClient(JudgeConfig(endpoint=endpoint, model="fake", concurrency=64))
        return lambda text: {"judged": int(client.score("a component", text) == 0.7)}
    options = STAGES[stage]
    return lambda text: rt.compute_score("bench", text, None, **options)


def expected_key(stage: str) -> str:
    return {"judge": "judged", "syntax+render": "rendered"}.get(stage, "compiled")


def measure(rt, stage: str, endpoint: str, responses: list[str], threads: int, exclude: set[int], least_s: float):
    """One round of ``stage``: passes over ``responses`` until ``least_s`` seconds have gone (CPU time is read in
    clock ticks), with responses per second of wall time and per CPU-second, and the CPU milliseconds per response
    of each kind of process (:func:`process_kind`; a process that ended within the round is not counted)."""
    used, wall, scored = cpu_seconds(exclude), 0.0, 0
    while wall < least_s:
        started = time.perf_counter()
        _, results = throughput(stage_scorer(rt, stage, endpoint), responses, threads)
        wall += time.perf_counter() - started
        scored += len(results)
        assert all(result[expected_key(stage)] == 1 for result in results), f"{stage}: not every response passed"
    spent = {kind: seconds - used.get(kind, 0.0) for kind, seconds in sorted(cpu_seconds(exclude).items())}
    return {
        "responses": scored,
        "per_second": scored / wall,
        "per_core": scored / sum(spent.values()),
        "cpu_ms_per_response": {kind: 1000 * seconds / scored for kind, seconds in spent.items() if seconds > 0},
    }


def paper_scale(per_core: dict, responses: int, cores: int) -> dict:
    """CPU seconds of one step of ``responses`` per stage, and of the composed reward (types, then the render and
    the judge of every response: the render stage's own cost is its time less the syntax check it repeats), with
    the wall seconds when ``cores`` share it."""
    cpu = {stage: responses / rate for stage, rate in per_core.items()}
    composed = cpu["types"] + (cpu["syntax+render"] - cpu["syntax"]) + cpu["judge"]
    return {
        "responses": responses,
        "node_cores": cores,
        "cpu_seconds": cpu,
        "composed_cpu_seconds": composed,
        "composed_wall_seconds_on_node": composed / cores,
        "types_wall_seconds_on_node": cpu["types"] / cores,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/react_render_speed.json"))
    parser.add_argument("--threads", type=int, default=8, help="concurrent calls, as verl's reward loop makes")
    parser.add_argument("--responses", type=int, default=32, help="responses per stage and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--least-seconds", type=float, default=3.0, help="each stage's least wall time per round")
    parser.add_argument("--paper-responses", type=int, default=1024, help="responses scored per paper-scale step")
    parser.add_argument("--node-cores", type=int, default=16, help="cores of the node the paper-scale step runs on")
    args = parser.parse_args(argv)

    ports = multiprocessing.get_context("spawn").Queue()
    fake = multiprocessing.get_context("spawn").Process(target=serve_fake_judge, args=(ports,), daemon=True)
    fake.start()
    endpoint = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    try:
        result = run(args, endpoint, {fake.pid})
    finally:
        fake.kill()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result["median_responses_per_core_second"], args.out.with_suffix(".png"))
    shown = ("median_responses_per_second", "median_responses_per_core_second", "render_cost_over")
    print(json.dumps({key: result[key] for key in shown} | {"paper_scale": result["paper_scale"]}, indent=2))
    return 0


def run(args, endpoint: str, exclude: set[int]) -> dict:
    rt = load_reward()
    responses = corpus(args.responses, seed=1)
    load_before = os.getloadavg()[0]
    for stage in STAGES:  # warm up every worker (and the browser) on other responses
        throughput(stage_scorer(rt, stage, endpoint), corpus(8, 2), 4)
    rounds = {stage: [] for stage in STAGES}
    started = time.perf_counter()
    for round_number in range(args.rounds):
        for stage in STAGES:
            rounds[stage].append(measure(rt, stage, endpoint, responses, args.threads, exclude, args.least_seconds))
            print(f"round {round_number + 1}: {stage:14s} {rounds[stage][-1]}", flush=True)
    median = {
        key: {s: statistics.median(r[key] for r in rounds[s]) for s in STAGES} for key in ("per_second", "per_core")
    }
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "processor": processor_name(),
            "load_average_before_after": [load_before, os.getloadavg()[0]],
            "node": rt.shared_checker().worker.ready.result()["node"],
            "typescript": typescript_version(),
            "checker": TYPES_CHECKER,
            "browser": shared_renderer().worker.ready.result()["browser"],
        },
        "date": time.strftime("%Y-%m-%d"),
        "threads": args.threads,
        "responses_per_round": args.responses,
        "seconds": time.perf_counter() - started,
        "rounds": rounds,
        "median_responses_per_second": median["per_second"],
        "median_responses_per_core_second": median["per_core"],
        "render_cost_over": {
            stage: median["per_core"][stage] / median["per_core"]["syntax+render"] for stage in ("types", "types tsc6")
        },
        "paper_scale": paper_scale(median["per_core"], args.paper_responses, args.node_cores),
    }


def typescript_version() -> str:
    """The version of the TypeScript that checks the ``types`` stage (:data:`TYPES_CHECKER`)."""
    package = worker_script().parent / "node_modules" / "typescript-native" / "package.json"
    return json.loads(package.read_text())["version"]


def processor_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def plot(per_core: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.2))
    bars = axis.bar(list(per_core), list(per_core.values()), color=["#4c72b0", "#dd8452", "#55a868", "#8172b3"])
    axis.bar_label(bars, fmt="%.1f")
    axis.set_yscale("log")
    axis.set_ylabel("responses per CPU-second (log)")
    axis.set_title("React reward stages per core, one run (median of rounds)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    raise SystemExit(main())
