"""React evaluation: compile rate, render rate, spec rate, and a paired comparison of two runs' samples.

Takes two runs' validation dumps (verl's ``trainer.validation_data_dir`` JSONL: ``input``, ``output``, ``gts``; the
same prompts, the same number of samples each) and scores every sample with the project's React reward:

- **compile rate**: ``bot_grpo_verl/rewards/react_tsx.py`` at ``level`` (default ``syntax``) marks it compiled;
- **render rate**: it compiles and renders something in headless Chromium (``render=True``);
- **spec rate**: it renders and meets the spec of the reference solution in ``gts``
  (``bot_grpo_verl/rewards/react_requirements.spec_from_reference``: the requested component, its props, exactly its
  elements). Not the benchmark matrix's "compiles as asked" (``benchmarks/matrix.py:compiles_as_asked``: compiles
  and opens exactly the reference's elements, no render), which is far more often met;
- **paired level comparison of A over B** (without a judge): sample k of A against sample k of B for every prompt,
  the one at the higher level (fails < compiles < renders < meets the spec) counting 1, a tie 1/2. It compares no
  two components: it is a monotone summary of the three rates (a run that only ever writes one template that
  renders "wins" against its own start by it);
- **win rate of A over B** (with ``--judge-endpoint``, ``--judge-model``: any OpenAI-compatible endpoint comparing
  two screenshots, both orders): the same, but between two samples that both render, the judge decides.

Every rate has a 95% bootstrap interval over prompts (samples of a prompt stay together). Besides, per run, its
**template shares** (:func:`template_shares`): how much of it is one of a few responses whatever the prompt.
Writes JSON (with every sample's level, per prompt) and a PNG.

    python -m benchmarks.react_eval A/validation/60.jsonl B/validation/60.jsonl --names grpo,bot_grpo \\
        --out benchmarks/results/react_eval.json

Several such evaluations of A against B (one per seed, on the same prompts) pool into A - B per rate, paired by
prompt, with a 95% interval that resamples seeds and prompts (:func:`pooled_differences`):

    python -m benchmarks.react_eval --pool seed100.json seed101.json seed102.json --out pooled.json
"""

import argparse
import concurrent.futures
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from benchmarks.reporting.statistics import estimate, resample_weights, stream, with_verdict
from bot_grpo_verl.rewards import react_options, react_tsx
from bot_grpo_verl.rewards.react_judge import JudgeClient, JudgeConfig
from bot_grpo_verl.rewards.react_render import screenshot_png, shared_renderer
from bot_grpo_verl.rewards.react_requirements import SPEC_KEY

LEVELS = ("fails", "compiles", "renders", "meets the spec")
RATES = {"compile_rate": 1, "render_rate": 2, "spec_rate": 3}  # a rate: the share of samples at this level or up
LEVEL_COMPARISON = "paired_level_comparison_a_over_b"
WIN_RATE = "win_rate_a_over_b"
# What template_shares normalises away: string, template and number literals, JSX text, and every identifier but
# the language's keywords and the HTML tag names (what a template's structure is made of).
LITERAL = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`|\b\d[\d_.eExXa-fA-F]*\b""")
JSX_TEXT = re.compile(r"(?<=>)[^<>{}]*[^\s<>{}][^<>{}]*(?=[<{])|(?<=})[^<>{}]*[^\s<>{}][^<>{}]*(?=<)")
IDENTIFIER = re.compile(r"(?P<tag></?)?(?P<name>[A-Za-z_$][\w$]*)")
KEYWORDS = frozenset(
    [
        "as",
        "async",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "default",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "from",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "of",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "type",
        "typeof",
        "undefined",
        "var",
        "void",
        "while",
        "yield",
    ]
)
TEMPLATE_COUNTS = (1, 3)


def read_dump(path: Path) -> dict[str, list[dict]]:
    """The samples of a validation dump, grouped by prompt in file order."""
    samples = defaultdict(list)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if not {"input", "output", "gts"} <= set(row):
                raise ValueError(f"{path}:{number}: a validation sample needs input, output and gts")
            samples[row["input"]].append(row)
    return dict(samples)


def response_shape(output: str) -> str:
    """The code of ``output`` (its code blocks, as the reward reads them; prose dropped) with every literal (strings,
    templates, numbers), every JSX text and every identifier made one symbol each (keywords and HTML tag names
    kept), and whitespace collapsed: two responses that differ only in names and wording have one shape."""
    code = "\n".join(output[start:end] for start, end in react_tsx.extract_blocks(output))
    shape = JSX_TEXT.sub(" T ", LITERAL.sub("L", code))
    return " ".join(IDENTIFIER.sub(kept_or_named, shape).split())


def kept_or_named(identifier: re.Match) -> str:
    """A keyword or an HTML tag name (``<ul``, ``</li``) as it is; any other identifier as ``X``."""
    tag, name = identifier.group("tag") or "", identifier.group("name")
    return identifier.group() if name in KEYWORDS or (tag and name[0].islower()) else f"{tag}X"


def template_shares(dump: dict[str, list[dict]]) -> dict[str, float]:
    """The share of a dump's samples whose :func:`response_shape` is its most frequent one (``top1``) and one of its
    three most frequent (``top3``): about 1/samples and 3/samples for a policy that answers each prompt, near 1 for
    one that writes a few templates whatever the prompt asks. A lower bound on templating: a template whose
    structure varies (an element more or less) counts as several shapes."""
    outputs = [sample["output"] for samples in dump.values() for sample in samples]
    counts = sorted(Counter(response_shape(output) for output in outputs).values(), reverse=True)
    return {f"top{k}": sum(counts[:k]) / len(outputs) for k in TEMPLATE_COUNTS}


def level_of(sample: dict, spec: dict, level: str, screenshots: bool) -> tuple[int, bytes | None]:
    """The sample's level (an index of :data:`LEVELS`) and its screenshot (when it renders and one is wanted)."""
    result = react_tsx.compute_score("eval", sample["output"], None, {SPEC_KEY: spec}, level=level, render=True)
    if not result["compiled"]:
        return 0, None
    if not result["rendered"]:
        return 1, None
    screenshot = None
    if screenshots:
        start, end = react_tsx.extract_blocks(sample["output"])[-1]
        answer = shared_renderer().render([sample["output"][start:end]], 30.0, screenshot=True)[0]
        screenshot = screenshot_png(answer)
    return (3 if result["requirements_met"] else 2), screenshot


def win(a: tuple[int, bytes | None], b: tuple[int, bytes | None], request: str, judge: JudgeClient | None) -> float:
    """A against B: 1 for the higher level, 1/2 for a tie; between two rendered components the judge (both
    orders), when one is given."""
    if a[0] != b[0] or a[0] < 2 or judge is None or a[1] is None or b[1] is None:
        return 1.0 if a[0] > b[0] else 0.0 if a[0] < b[0] else 0.5
    return judge.compare(request, a[1], b[1])


def interval(per_prompt: np.ndarray, draws: int = 2000, seed: int = 0) -> list[float]:
    """Mean and 95% percentile bootstrap interval of per-prompt values (prompts resampled)."""
    rng = np.random.default_rng(seed)
    means = per_prompt[rng.integers(0, len(per_prompt), (draws, len(per_prompt)))].mean(axis=1)
    return [float(per_prompt.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def evaluate(a_path: Path, b_path: Path, level: str = "syntax", judge: JudgeClient | None = None, threads: int = 8):
    """The rates of both dumps and A's paired level comparison over B (its win rate with a judge), each
    ``[mean, low, high]``."""
    a, b = read_dump(a_path), read_dump(b_path)
    if set(a) != set(b) or any(len(a[prompt]) != len(b[prompt]) for prompt in a):
        raise ValueError(f"{a_path} and {b_path} must hold the same prompts with as many samples each")
    prompts = sorted(a)
    specs = {prompt: react_tsx.reference_spec(a[prompt][0]["gts"]) for prompt in prompts}

    def levels(dump: dict[str, list[dict]]) -> dict[str, list[tuple[int, bytes | None]]]:
        """Per prompt, each sample's (level, screenshot)."""
        jobs = [(prompt, sample) for prompt in prompts for sample in dump[prompt]]
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            found = list(pool.map(lambda job: level_of(job[1], specs[job[0]], level, judge is not None), jobs))
        per_prompt = defaultdict(list)
        for (prompt, _), result in zip(jobs, found, strict=True):
            per_prompt[prompt].append(result)
        return per_prompt

    found = {"a": levels(a), "b": levels(b)}
    rates, sample_levels = {}, {}
    for name, per_sample in found.items():
        per_prompt = np.array([[reached for reached, _ in per_sample[prompt]] for prompt in prompts])
        rates[name] = {rate: interval((per_prompt >= least).mean(axis=1)) for rate, least in RATES.items()}
        sample_levels[name] = per_prompt.tolist()
    wins = np.array(
        [
            np.mean([win(x, y, prompt, judge) for x, y in zip(found["a"][prompt], found["b"][prompt], strict=True)])
            for prompt in prompts
        ]
    )
    return {
        "prompts": len(prompts),
        "samples_per_prompt": len(a[prompts[0]]),
        **rates,
        (LEVEL_COMPARISON if judge is None else WIN_RATE): interval(wins),
        "template_shares": {"a": template_shares(a), "b": template_shares(b)},
        "levels": {"prompts": prompts, **sample_levels},
    }


def pooled_differences(results: list[dict], boot: int = 2000, seed: int = 0) -> dict:
    """A - B per rate (:data:`RATES`) and A's paired level comparison minus 1/2 over several evaluations (one per
    seed, :func:`evaluate`'s results with their ``levels``, on the same prompts), each an
    :func:`~benchmarks.reporting.statistics.estimate` with its verdict: the mean over seeds and prompts, and a 95%
    interval of a bootstrap that resamples the seeds and, within them, the prompts (a prompt's A and B samples stay
    paired).

    Raises:
        ValueError: evaluations without per-prompt levels, or of different prompts.
    """
    if any("levels" not in result for result in results):
        raise ValueError("pooling needs evaluations with per-prompt levels (written by this version of react_eval)")
    prompts = results[0]["levels"]["prompts"]
    if any(result["levels"]["prompts"] != prompts for result in results):
        raise ValueError("the evaluations to pool must cover the same prompts")
    rng = stream(seed, "react_eval")
    prompt_weights = resample_weights(rng, len(prompts), boot)
    seed_weights = resample_weights(rng, len(results), boot)
    a = np.array([result["levels"]["a"] for result in results])  # (S, P, samples)
    b = np.array([result["levels"]["b"] for result in results])
    differences = {rate: (a >= least).mean(axis=2) - (b >= least).mean(axis=2) for rate, least in RATES.items()}
    differences["paired_level_comparison_minus_half"] = (np.sign(a - b) / 2).mean(axis=2)

    def pooled(per_seed_prompt: np.ndarray) -> dict:
        found = with_verdict(estimate(np.einsum("ns,np,sp->n", seed_weights, prompt_weights, per_seed_prompt)))
        return {key: value if isinstance(value, str) else float(value) for key, value in found.items()}

    return {"seeds": len(results), "prompts": len(prompts), **{key: pooled(d) for key, d in differences.items()}}


def plot(result: dict, names: tuple[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = tuple(RATES)
    figure, (rates, wins) = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [3, 1]})
    for offset, (key, name) in zip((-0.2, 0.2), (("a", names[0]), ("b", names[1])), strict=True):
        values = np.array([result[key][metric] for metric in metrics])
        errors = [values[:, 0] - values[:, 1], values[:, 2] - values[:, 0]]
        rates.bar(np.arange(3) + offset, values[:, 0], 0.4, yerr=errors, capsize=3, label=name)
    rates.set_xticks(range(3), ["compiles", "renders", "meets the spec"])
    rates.set_ylim(0, 1)
    rates.legend()
    rates.set_title("held-out rates, 95% intervals over prompts")
    comparison = WIN_RATE if WIN_RATE in result else LEVEL_COMPARISON
    mean, low, high = result[comparison]
    wins.bar([0], [mean], yerr=[[mean - low], [high - mean]], capsize=3, color="#55a868")
    wins.axhline(0.5, color="gray", linestyle="--")
    wins.set_xticks([0], [f"{names[0]} over {names[1]}"])
    wins.set_ylim(0, 1)
    wins.set_title(f"win rate ({result['judge']})" if comparison == WIN_RATE else "paired level comparison")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, nargs="?", help="validation dump of run A")
    parser.add_argument("b", type=Path, nargs="?", help="validation dump of run B")
    parser.add_argument("--pool", type=Path, nargs="+", help="instead: pool these evaluations (JSON) of A against B")
    parser.add_argument("--names", default="A,B", help="the two runs' names, comma-separated")
    parser.add_argument("--level", default="syntax", choices=react_options.LEVELS)
    parser.add_argument("--judge-endpoint", default="", help="an OpenAI-compatible endpoint (default: no judge)")
    parser.add_argument("--judge-model", default="")
    parser.add_argument("--out", type=Path, default=Path("react_eval.json"))
    args = parser.parse_args(argv)
    if args.pool:
        pooled = pooled_differences([json.loads(path.read_text()) for path in args.pool])
        pooled["evaluations"] = [str(path) for path in args.pool]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(pooled, indent=2) + "\n")
        for key in (*RATES, "paired_level_comparison_minus_half"):
            value = pooled[key]
            print(
                f"A - B {key}: {value['estimate']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}] {value['verdict']}"
            )
        return 0
    if args.a is None or args.b is None:
        parser.error("give two validation dumps, or --pool with evaluations")
    names = tuple(args.names.split(","))
    judge = None
    if args.judge_endpoint:  # screenshots compared: a vision model
        judge = JudgeClient(JudgeConfig(args.judge_endpoint, args.judge_model, mode="vision", deadline_s=180.0))
    result = evaluate(args.a, args.b, args.level, judge)
    result.update(names=list(names), judge=args.judge_model or None, a_path=str(args.a), b_path=str(args.b))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, names, args.out.with_suffix(".png"))
    for key, name in (("a", names[0]), ("b", names[1])):
        rates = ", ".join(f"{metric} {v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" for metric, v in result[key].items())
        shares = result["template_shares"][key]
        print(f"{name}: {rates}, template shares top1 {shares['top1']:.3f} top3 {shares['top3']:.3f}")
    comparison = "win rate" if judge else "paired level comparison"
    mean, low, high = result[WIN_RATE if judge else LEVEL_COMPARISON]
    print(f"{comparison} of {names[0]} over {names[1]}: {mean:.3f} [{low:.3f}, {high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
