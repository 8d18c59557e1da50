"""The React/TSX reward's options (:class:`ReactTsxConfig`), read from verl's ``reward_kwargs`` and checked before
any response is: an unknown name or a bad value raises ``ValueError`` naming it. The class's ``Parameters:``
section is the source of the options table in docs/reward-models.md (``python -m docs.tables``).
"""

# No ``from __future__ import annotations``: the fields' annotations are read as types (:meth:`plain`), and verl
# loads the reward file that imports this module by path.
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields

from bot_grpo_verl.options import check_option_values, check_options, options_from_kwargs
from bot_grpo_verl.rewards.node_worker import ISOLATIONS
from bot_grpo_verl.rewards.react_judge import MODES as JUDGE_MODES
from bot_grpo_verl.rewards.react_judge import ON_FAILURE as JUDGE_ON_FAILURE
from bot_grpo_verl.rewards.react_judge import require_openai

LEVELS = ("syntax", "types")
CHECKERS = ("tsc7", "tsc6")
REGIONS = ("token", "line", "element")
BLOCK_CHOICES = ("all", "last")
REQUIREMENT_SCORES = ("all", "fraction", "fraction_named")
MAX_TIMEOUT = 86_400.0


@dataclass(frozen=True)
class ReactTsxConfig:
    """Options of :func:`react_tsx.compute_score`, passed as verl's
    ``+reward.custom_reward_function.reward_kwargs.<name>=<value>``.

    Every value is type-checked (:func:`bot_grpo_verl.options.check_options`: bools, strings, ``None``, ``inf`` or
    ``nan`` for a number, a float for an int are refused) and then range-checked, each with a ``ValueError`` naming
    the option and its value; numpy scalars are accepted and kept as plain Python numbers (the worker's requests
    are JSON).

    Parameters:
        level (`str`, *optional*, defaults to `"syntax"`):
            `"syntax"`: esbuild's TSX parser (~2 ms for a 100-line component, many in parallel). `"types"`: also
            TypeScript's type check against `@types/react` (settings of a Vite React-TS tsconfig; imports other
            than `react` are typed `any`): tens of times slower; a new worker spends its first few seconds
            loading TypeScript.
        checker (`str`, *optional*, defaults to `"tsc7"`):
            which TypeScript type-checks at `level="types"`: `"tsc7"`, TypeScript 7 (the Go port, ~6x the
            responses per core of `"tsc6"`, the same diagnostics:
            [speed](speed.md#the-type-check-where-its-time-goes-and-typescript-7)), in a Go process killed and
            replaced on the time limit, past its memory bound (2 GB resident, `BOT_GRPO_VERL_TSC7_MEMORY_MB`) or
            when it dies; code nested deeper than 500 levels is refused with `checker_error=1`. `"tsc6"`,
            TypeScript 6 in the worker's thread (the reference).
        region (`str`, *optional*, defaults to `"token"`):
            error region of a diagnostic: `"token"`, `"line"` or `"element"` (see above).
        blocks (`str`, *optional*, defaults to `"all"`):
            which code blocks are checked: `"all"` or `"last"`.
        clean_value (`float`, *optional*, defaults to `0.0`):
            value of the clean code of a failing response, in `[0, 1]` (see above why 0).
        error_value (`float`, *optional*, defaults to `-1.0`):
            value of error-region tokens, in `[-1, 0)`.
        timeout (`float`, *optional*, defaults to `30.0`):
            seconds a response may wait for its check, in `(0, 86400]`. One sample's type check may run
            `timeout / 3`: past that it alone gets `checker_error=1`, score 0, and the samples checked with it
            get their real result. A response not answered within `timeout` means the worker hung: it is killed
            (its responses in flight get `checker_error=1`) and the next call starts a new one.
        max_code_chars (`int`, *optional*, defaults to `100000`):
            larger code is not checked: score 0, `oversized=1`.
        max_line_chars (`int`, *optional*, defaults to `2000`):
            code with a longer line is not checked: score 0, `oversized=1` (esbuild copies a line into each of
            its errors, so one long line of errors costs quadratic time).
        max_diagnostics (`int`, *optional*, defaults to `20`):
            diagnostics per block that get error regions; `num_diagnostics` counts all.
        render (`bool`, *optional*, defaults to `False`):
            render a compiled response in headless Chromium; it scores 1 only if it shows something: blank pages,
            runtime errors and timeouts score 0 (above). Each page may take `timeout / 2` seconds from when a page
            starts it (not while it queues); a failure of the render machinery (worker or browser died or hung)
            is retried once, then `checker_error=1`, score 0, never a render status
            ([bad input](bad-input.md#the-render-check-react_tsx-rendertrue)).
        render_isolation (`str`, *optional*, defaults to `"namespace"`):
            how the render worker (Node and its Chromium, where model code runs) is kept off the network:
            `"namespace"`, in a network namespace of its own without interfaces (`unshare --net` as root,
            `unshare --user --map-root-user --net` otherwise): no browser API can send a packet; where none can
            be made, `CheckerSetupError` in one line says what is needed. `"flags_only"`: Chromium's flags (WebRTC
            without UDP, no name resolves, a proxy that goes nowhere) and the page's request rules alone, for
            machines without namespaces, with a warning in the log. The TypeScript worker runs no model code and
            needs no namespace.
        requirements (`bool`, *optional*, defaults to `True`):
            check the row's `extra_info["react_spec"]` (above) when it has one; `False` ignores the spec and
            scores compilation (and the render) only, e.g. the compile-only arm of a comparison on rows that
            carry specs (the CPU demo's reward).
        requirements_score (`str`, *optional*, defaults to `"all"`):
            how unmet requirements lower the score of a response that compiles (and renders): `"all"`, any unmet
            requirement scores 0 (issue 26's composed reward); `"fraction"`, the score times the share of the
            spec's requirements that hold (`requirements_share`, logged): a graded outcome that a policy far from
            the spec can climb; the clean code tokens carry it (or `clean_value`, whichever is larger);
            `"fraction_named"`, that share only when the requested component is there (exported under the
            spec's name), else 0, so a fixed template under a name of its own collects nothing for the cheap
            requirements it meets
            ([the collapse it answers](benchmarks-history.md#a-graded-composed-react-reward-issue-26s-follow-up)).
            The error spans of violations with a place are the same under all three.
        judge_endpoint (`str`, *optional*, defaults to `""`):
            an OpenAI-compatible chat endpoint (e.g. `http://judge-host:8000/v1`); set, a response that compiles,
            renders and meets its spec is scored by the judge too ([the judge](#the-judge-optional)):
            `score = (1 - judge_weight) + judge_weight * judgment`. Needs `render=True`, `judge_model` and the
            `[judge]` extra (`pip install 'bot-grpo-verl[judge]'`). Unset (the default), the judge is off, and a
            `render=True` run says so once in its log.
        judge_model (`str`, *optional*, defaults to `""`):
            the judge's served model name, checked against the endpoint's `/models` before the first question.
        judge_weight (`float`, *optional*, defaults to `0.5`):
            the judgment's share of a passing response's score, in `[0, 1]`; failing responses score 0 whatever
            the judge says.
        judge_samples (`int`, *optional*, defaults to `1`):
            judgments per response, asked at once; their mean is used and their spread (`judge_spread`, max -
            min) logged: the judge's noise (with a sampling temperature above 0).
        judge_request_key (`str`, *optional*, defaults to `"instruction"`):
            the `extra_info` key holding the request the judge is shown (`recipes/data/prepare_react.py` writes
            `instruction`).
        judge_mode (`str`, *optional*, defaults to `"text"`):
            what the judge sees: `"text"`, the code (any chat model); `"vision"`, the code and a screenshot of the
            render (a vision model; checked once with a blank image, and a server that refuses it is named).
        judge_deadline (`float`, *optional*, defaults to `None`):
            seconds the judge may take for one response, all its judgments and retries included, in
            `(0, 86400]`; `None`: the reward's `timeout`. A judgment not answered by then is missing
            (`judge_on_failure`).
        judge_api_key_env (`str`, *optional*, defaults to `"OPENAI_API_KEY"`):
            the environment variable holding the judge's API key (a key is never an option: options are logged);
            unset, the requests carry a placeholder that servers without a key ignore.
        judge_fallback (`float`, *optional*, defaults to `0.0`):
            the judgment, in `[0, 1]`, of a missing one (no usable answer within the deadline); 0, so that a
            response that makes the judge fail never scores above one it judges.
        judge_on_failure (`str`, *optional*, defaults to `"fallback"`):
            a missing judgment: `"fallback"` scores it `judge_fallback` and counts it in `judge_no_judgment`;
            `"raise"` raises `NoJudgment` (ends the run). A wrong configuration (the model not served, the key,
            the URL or an image refused) raises either way.
    """

    level: str = "syntax"
    checker: str = "tsc7"
    region: str = "token"
    blocks: str = "all"
    clean_value: float = 0.0
    error_value: float = -1.0
    timeout: float = 30.0
    max_code_chars: int = 100_000
    max_line_chars: int = 2_000
    max_diagnostics: int = 20
    render: bool = False
    render_isolation: str = "namespace"
    requirements: bool = True
    requirements_score: str = "all"
    judge_endpoint: str = ""
    judge_model: str = ""
    judge_weight: float = 0.5
    judge_samples: int = 1
    judge_request_key: str = "instruction"
    judge_mode: str = "text"
    judge_deadline: float | None = None
    judge_api_key_env: str = "OPENAI_API_KEY"
    judge_fallback: float = 0.0
    judge_on_failure: str = "fallback"

    def __post_init__(self):
        check_options(type(self), {field.name: getattr(self, field.name) for field in fields(self)}, "react_tsx")
        choices = {
            "level": LEVELS,
            "checker": CHECKERS,
            "region": REGIONS,
            "blocks": BLOCK_CHOICES,
            "requirements_score": REQUIREMENT_SCORES,
            "render_isolation": ISOLATIONS,
            "judge_mode": JUDGE_MODES,
            "judge_on_failure": JUDGE_ON_FAILURE,
        }
        check_option_values(self, "", choices=choices)
        shares = {name: 0 <= getattr(self, name) <= 1 for name in ("clean_value", "judge_weight", "judge_fallback")}
        check_option_values(self, "", ranges=shares, requirement="must lie in [0.0, 1.0]")
        check_option_values(
            self, "", ranges={"error_value": -1 <= self.error_value < 0}, requirement="must lie in [-1.0, 0.0)"
        )
        deadlines = {
            "timeout": 0 < self.timeout <= MAX_TIMEOUT,
            "judge_deadline": self.judge_deadline is None or 0 < self.judge_deadline <= MAX_TIMEOUT,
        }
        check_option_values(self, "", ranges=deadlines, requirement=f"must lie in (0.0, {MAX_TIMEOUT}]")
        counts = {name: getattr(self, name) > 0 for name in ("max_code_chars", "max_line_chars", "max_diagnostics")}
        counts["judge_samples"] = self.judge_samples > 0
        check_option_values(self, "", ranges=counts, requirement="must be a positive integer")
        if self.judge_endpoint and not (self.render and self.judge_model):
            raise ValueError(
                "judge_endpoint needs render=True (the judge scores only components that compile and render) and "
                "judge_model (the served model name)"
            )
        if self.judge_endpoint:
            require_openai()
        for field in fields(self):
            object.__setattr__(self, field.name, plain(getattr(self, field.name), field.type))

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> "ReactTsxConfig":
        """The options from ``compute_score``'s keyword arguments; keys verl passes on its own are ignored, any
        other unknown key raises ``ValueError`` listing the allowed ones."""
        return options_from_kwargs(cls, kwargs, "react_tsx")


def plain(value, annotation):
    """``value`` as the plain Python value of its field's type (``annotation``, or its one type besides None)."""
    kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)] or [annotation]
    return None if value is None else kinds[0](value)
