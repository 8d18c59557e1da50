"""A seeded generator of the token-credit tasks: transform the prompt's own letters, every output letter checkable.

Each :class:`Transformation` asks for one of :data:`KINDS` applied to a list of letters from :data:`ALPHABET`,
written with single spaces::

    reverse: c a f b          ->  b f a c
    sort: c a f b             ->  a b c f
    replace a with d: c a f b ->  c d f b

The answer is the transformed list, letters separated by single spaces. The byte-level BPE tokenizer the demo
trains keeps every ``" x"`` one token (Qwen2's pre-tokenizer splits before a space), so a response is one token
per letter plus EOS, and the correctness of every token is known: letter ``i`` is right when it is the answer's
letter ``i`` (``bot_grpo_verl/rewards/token_credit.py``). Lists hold :data:`MIN_ITEMS` to :data:`MAX_ITEMS` letters,
drawn uniformly, so responses span 8 to 64 tokens (EOS included) across prompts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot_grpo_verl.__main__ import reward_path
from demo import react_corpus
from demo.react_corpus import draw_distinct
from demo.settings import DemoSettings
from demo.tasks import Task, load_reward_file

DATA_SOURCE = "token_credit"
ALPHABET = "abcdefgh"
KINDS = ("reverse", "sort", "replace")
MIN_ITEMS, MAX_ITEMS = 7, 63
TOKEN_CREDIT_REWARD = reward_path("token_credit")  # the installed reward file (in a clone: bot_grpo_verl/rewards/)


@dataclass(frozen=True)
class Transformation:
    """One problem: apply ``kind`` to ``items``.

    Attributes:
        kind: one of :data:`KINDS`.
        items: the prompt's letters (each one letter of :data:`ALPHABET`).
        old, new: for ``replace``, the letter to replace (one of ``items``) and its replacement (another letter);
            None for the other kinds.
    """

    kind: str
    items: tuple[str, ...]
    old: str | None = None
    new: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.items or any(item not in ALPHABET or len(item) != 1 for item in self.items):
            raise ValueError(f"items must be letters of {ALPHABET!r}, at least one: {self.items}")
        replacing = self.kind == "replace"
        if replacing != (self.old is not None and self.new is not None) or (
            replacing and (self.old not in self.items or self.new not in ALPHABET or self.new == self.old)
        ):
            raise ValueError(f"replace needs old (one of the items) and a different new letter, others neither: {self}")

    @property
    def target(self) -> tuple[str, ...]:
        """The answer's letters."""
        if self.kind == "reverse":
            return self.items[::-1]
        if self.kind == "sort":
            return tuple(sorted(self.items))
        return tuple(self.new if item == self.old else item for item in self.items)

    @property
    def prompt(self) -> str:
        """The user instruction, e.g. ``"replace a with d: c a f b"``."""
        instruction = f"replace {self.old} with {self.new}" if self.kind == "replace" else self.kind
        return f"{instruction}: {' '.join(self.items)}"

    @property
    def response(self) -> str:
        """The reference answer: the target letters joined by single spaces."""
        return " ".join(self.target)


def random_transformation(rng: random.Random, kind: str, size: int) -> Transformation:
    """A ``kind`` problem on ``size`` letters drawn uniformly from :data:`ALPHABET` (with repetition)."""
    items = tuple(rng.choice(ALPHABET) for _ in range(size))
    if kind != "replace":
        return Transformation(kind, items)
    old = rng.choice(sorted(set(items)))
    return Transformation(kind, items, old, rng.choice([letter for letter in ALPHABET if letter != old]))


def generate_transformations(size: int, seed: int) -> list[Transformation]:
    """``size`` distinct problems (distinct prompts), kinds in round-robin, list lengths uniform in
    ``[MIN_ITEMS, MAX_ITEMS]``, from ``random.Random(seed)``.

    Raises ``ValueError`` for a negative size.
    """
    return draw_distinct(
        size,
        seed,
        lambda rng, i: random_transformation(rng, KINDS[i % len(KINDS)], rng.randint(MIN_ITEMS, MAX_ITEMS)),
        "transformations",
    )


def transformation_metrics(responses: Sequence[str], examples: Sequence[Transformation]) -> dict[str, float]:
    """The task's sample metrics from ``bot_grpo_verl/rewards/token_credit.py`` at its defaults: ``{"accuracy",
    "item_accuracy", "length_match_rate"}``, the fraction of responses exactly right, of reference items right
    in place (over all responses) and of responses with as many items as the reference."""
    reward = load_reward_file(TOKEN_CREDIT_REWARD)
    results = [
        reward.compute_score(DATA_SOURCE, response, example.response)
        for response, example in zip(responses, examples, strict=True)
    ]
    return {
        "accuracy": sum(result["acc"] for result in results) / len(results),
        "item_accuracy": sum(result["items_correct"] for result in results) / len(results),
        "length_match_rate": sum(result["length_error"] == 0 for result in results) / len(results),
    }


# Kept out of demo/tasks.py's TASKS: that file's bytes enter every task's cache key (demo/assets.py), so registering
# this task there would change the keys of the warm starts other studies resume from.
TOKEN_CREDIT = Task(
    name="token_credit",
    data_source=DATA_SOURCE,
    ability="transformation",
    generate=generate_transformations,
    reference=lambda problem: (problem.response, {"kind": problem.kind, "items": len(problem.items)}),
    score_samples=transformation_metrics,
    sources=(Path(__file__), Path(react_corpus.__file__)),  # it draws with react_corpus.draw_distinct
    # The demo's default Qwen2 (hidden 128, 4 layers). A 118K-parameter one (hidden 64, 2 layers) solved none of 64
    # validation samples after 400 supervised steps at 1e-2 (letters right in place 0.23, lengths right 0.05).
    settings=DemoSettings(
        sft_examples=4000,
        vocab_size=320,
        max_position_embeddings=160,
        sft_steps=1500,
        eval_samples=128,
        max_response_tokens=72,
    ),
)
