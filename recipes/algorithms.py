"""The one table of the paper-scale recipes: tasks, models, algorithms, and the overrides they make.

Every run is ``python -m verl.trainer.main_ppo <overrides>`` with overrides built here, in this order:

1. the task's base settings (:data:`TASKS`, :data:`COMMON`): data, lengths, batch, rollouts per prompt,
   learning rate, steps, seed, vLLM rollouts; identical for every algorithm;
2. the model (:data:`MODELS`): its Hugging Face name and, where the model needs one, a chat-template
   option; identical for every algorithm;
3. the reward function of the task, handed to the algorithm the way the algorithm consumes it
   (:func:`reward_overrides`): token-level algorithms get the task's reward function, outcome-level
   ones the same function through :mod:`recipes.outcome_reward` (its ``score`` only);
4. the algorithm's own keys (:data:`ALGORITHMS`), the only place where algorithm keys live;
5. where the run keeps its record (:func:`record_overrides`): verl's metrics (its file logger, beside the console)
   and its validation samples, in the run's folder (:func:`run_folder`), which :mod:`recipes.report` reads.

No key is set twice in one command, so what a command says is what verl runs.
"""

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "runs" / "recipes"  # the runs' folders: <RUNS>/<task>/<model>/<algorithm>/seed<seed>/
METRICS_FILE = "metrics.jsonl"  # verl's file logger, one line {"step", "data"} per logged step
VALIDATION_DIR = "validation"  # verl's validation dumps, <step>.jsonl: every held-out sample and its score
OUTCOME_REWARD = REPO / "recipes" / "outcome_reward.py"
REWARD_KINDS = ("outcome", "token")


@dataclass(frozen=True)
class Algorithm:
    """One row of :data:`ALGORITHMS`.

    Attributes:
        overrides (`tuple[str, ...]`): hydra overrides that define the algorithm. ``{max_response_length}``
            and ``{overlong_buffer_length}`` are filled from the task.
        reward (`str`): ``"outcome"``: verl's reward managers see the task reward's ``score`` only (one
            scalar per response, on its last token); ``"token"``: the ``bot_token`` reward manager turns
            the task reward's spans into one reward per token.
        source (`str`): where the algorithm and its settings come from.
    """

    overrides: tuple[str, ...]
    reward: str
    source: str

    def __post_init__(self):
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"reward must be one of {REWARD_KINDS}, got {self.reward!r}")


ALGORITHMS: dict[str, Algorithm] = {
    "grpo": Algorithm(
        ("algorithm.adv_estimator=grpo", "reward.reward_manager.name=naive"),
        "outcome",
        "GRPO, DeepSeekMath (arXiv:2402.03300), as verl runs it",
    ),
    "dr_grpo": Algorithm(
        (
            "algorithm.adv_estimator=grpo",
            "algorithm.norm_adv_by_std_in_grpo=false",
            "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm",
            # Dr.GRPO divides every sequence's token sum by one constant (the generation budget), not by
            # the batch's padded length.
            "actor_rollout_ref.actor.loss_scale_factor={max_response_length}",
            "reward.reward_manager.name=naive",
        ),
        "outcome",
        "Dr.GRPO (arXiv:2503.20783): no std division, constant length normalisation",
    ),
    "dapo": Algorithm(
        (
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.clip_ratio_low=0.2",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "actor_rollout_ref.actor.loss_agg_mode=token-mean",
            # dynamic sampling: verl's V1 replay buffer drops groups whose outcomes are all equal
            "algorithm.filter_groups.enable=true",
            "algorithm.filter_groups.metric=acc",
            # overlong reward shaping: verl's dapo reward manager reads reward.reward_kwargs
            "reward.reward_manager.name=dapo",
            "+reward.reward_kwargs.max_resp_len={max_response_length}",
            "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
            "+reward.reward_kwargs.overlong_buffer_cfg.len={overlong_buffer_length}",
            "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
            "+reward.reward_kwargs.overlong_buffer_cfg.log=false",
        ),
        "outcome",
        "DAPO (arXiv:2503.14476): clip-higher, dynamic sampling, token-mean loss, overlong shaping",
    ),
    "gspo": Algorithm(
        (
            "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
            "actor_rollout_ref.actor.clip_ratio_low=0.0003",
            "actor_rollout_ref.actor.clip_ratio_high=0.0004",
            "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
            "reward.reward_manager.name=naive",
        ),
        "outcome",
        "GSPO (arXiv:2507.18071): sequence-level ratio, clip range (3e-4, 4e-4), sequence-mean loss",
    ),
    "pure": Algorithm(
        ("+preset=pure",),
        "token",
        "PURE (arXiv:2504.15275): min-form credit over the reward's steps, the authors' token baseline",
    ),
    # Same-information baselines: the token rewards BoT-GRPO gets, used as a GRPO user would
    # (bot_grpo_verl.estimators.baselines).
    "grpo_token_mean": Algorithm(
        ("+preset=bot_grpo", "algorithm.adv_estimator=grpo_token_mean"),
        "token",
        "GRPO on each response's mean token reward (a PRM scalarised by its mean)",
    ),
    "grpo_token_min": Algorithm(
        ("+preset=bot_grpo", "algorithm.adv_estimator=grpo_token_min"),
        "token",
        "GRPO on min_t r[t] + r[last]: PRM-min scalarisation plus the outcome on the answer step",
    ),
    "ps_grpo": Algorithm(
        ("+preset=bot_grpo", "algorithm.adv_estimator=ps_grpo", "reward.bot_token.placement=step_end"),
        "token",
        "Process-supervised GRPO, DeepSeekMath (arXiv:2402.03300, 4.1.3): step rewards normalised over the "
        "group's steps, a token's advantage the sum over the steps ending at or after it",
    ),
    "pure_sum": Algorithm(
        ("+preset=pure", "algorithm.pure.credit=sum"),
        "token",
        "PURE's sum-form credit (return-to-go of the step rewards), the comparison of the PURE paper",
    ),
    "bot_grpo": Algorithm(("+preset=bot_grpo",), "token", "BoT-GRPO: bag-of-tokens group statistics"),
    "bot_grpo_shuffled": Algorithm(
        ("+preset=bot_grpo", "algorithm.adv_estimator=bot_grpo_shuffled"),
        "token",
        "Localisation control: BoT-GRPO on each response's token rewards permuted within the response",
    ),
    "bot_grpo_uniform": Algorithm(
        ("+preset=bot_grpo", "algorithm.bot_grpo.weighting=uniform"),
        "token",
        "BoT-GRPO ablation: every token weighs 1 (long responses dominate the statistics)",
    ),
    "bot_grpo_no_std": Algorithm(
        ("+preset=bot_grpo", "algorithm.norm_adv_by_std_in_grpo=false"),
        "token",
        "BoT-GRPO ablation: no division by the group std (as Dr.GRPO)",
    ),
    "bot_grpo_return_to_go": Algorithm(
        ("+preset=bot_grpo", "algorithm.bot_grpo.credit=return_to_go"),
        "token",
        "BoT-GRPO ablation: each token credited with the mean normalised reward of itself and what follows",
    ),
}


@dataclass(frozen=True)
class Model:
    """One row of :data:`MODELS`.

    Attributes:
        path (`str`): Hugging Face name (or local directory) of the policy.
        overrides (`tuple[str, ...]`): settings this model needs whatever the task and algorithm.
    """

    path: str
    overrides: tuple[str, ...] = ()


MODELS: dict[str, Model] = {
    "qwen2.5-3b": Model("Qwen/Qwen2.5-3B-Instruct"),
    # SmolLM3's template thinks by default; without it every model answers within the same budget.
    "smollm3-3b": Model("HuggingFaceTB/SmolLM3-3B", ("+data.apply_chat_template_kwargs.enable_thinking=false",)),
    "phi4-mini-reasoning": Model("microsoft/Phi-4-mini-reasoning"),
}


@dataclass(frozen=True)
class Task:
    """One row of :data:`TASKS`: the settings every algorithm shares on this task.

    Attributes:
        data_dir (`str`): default folder of ``train.parquet`` and ``test.parquet`` (relative to the
            working directory), where ``recipes/data/prepare_<task>.py`` writes them.
        reward_path (`str`): the token-level reward function, relative to the repository root.
        reward_options (`tuple[tuple[str, str], ...]`): its ``reward_kwargs``.
        max_prompt_length, max_response_length (`int`): tokens; longer prompts are dropped.
        train_batch_size (`int`): prompts per step.
        ppo_mini_batch_size (`int`): prompts per policy update (``train_batch_size / ppo_mini_batch_size``
            updates per step).
        rollouts_per_prompt (`int`): the group size G.
        lr (`float`): actor learning rate (constant).
        total_training_steps (`int`): steps per run.
        seeds (`tuple[int, ...]`): one run per seed.
        val_rollouts_per_prompt (`int`): samples per validation prompt (mean@N).
        test_freq, save_freq (`int`): validation and checkpoint interval in steps.
        max_tokens_per_gpu (`int`): token budget of one micro batch (dynamic batch size); at least
            ``max_prompt_length + max_response_length``.
    """

    data_dir: str
    reward_path: str
    reward_options: tuple[tuple[str, str], ...]
    max_prompt_length: int
    max_response_length: int
    train_batch_size: int
    ppo_mini_batch_size: int
    rollouts_per_prompt: int
    lr: float
    total_training_steps: int
    seeds: tuple[int, ...]
    val_rollouts_per_prompt: int
    test_freq: int
    save_freq: int
    max_tokens_per_gpu: int

    def __post_init__(self):
        if self.max_tokens_per_gpu < self.max_prompt_length + self.max_response_length:
            raise ValueError("max_tokens_per_gpu must hold one full sequence (prompt + response)")
        if self.train_batch_size % self.ppo_mini_batch_size:
            raise ValueError("train_batch_size must be a multiple of ppo_mini_batch_size")

    @property
    def overlong_buffer_length(self) -> int:
        return overlong_buffer_length(self.max_response_length)


def overlong_buffer_length(max_response_length: int) -> int:
    """DAPO's soft overlong punishment starts this many tokens before the budget: DAPO's 4096 of 20480
    tokens, i.e. a fifth of the budget."""
    return max_response_length // 5


TASKS: dict[str, Task] = {
    "react": Task(
        data_dir="data/react",
        reward_path="bot_grpo_verl/rewards/react_tsx.py",
        # compile (types), then render in headless Chromium; a judge is optional (judge_endpoint, judge_model)
        reward_options=(("level", "types"), ("render", "true")),
        max_prompt_length=1024,
        max_response_length=2048,
        train_batch_size=128,
        ppo_mini_batch_size=32,
        rollouts_per_prompt=8,
        lr=1e-6,
        total_training_steps=300,
        seeds=(0, 1, 2),
        val_rollouts_per_prompt=4,
        test_freq=20,
        save_freq=100,
        max_tokens_per_gpu=24576,
    ),
    "aime": Task(
        data_dir="data/aime",
        reward_path="bot_grpo_verl/rewards/math_prm.py",
        # Reward workers are CPU-only Ray actors: the PRM is served by vLLM (recipes/README.md).
        reward_options=(
            ("prm_backend", "endpoint"),
            ("prm_endpoint", "http://localhost:8000"),
            ("prm_tokenizer", "Qwen/Qwen2.5-Math-PRM-7B"),
            ("prm_endpoint_model", "Qwen/Qwen2.5-Math-PRM-7B"),
            ("prm_max_tokens", "4096"),  # the PRM's context: vLLM fails a request with a longer input
        ),
        max_prompt_length=1024,
        max_response_length=8192,
        train_batch_size=128,
        ppo_mini_batch_size=32,
        rollouts_per_prompt=8,
        lr=1e-6,
        total_training_steps=500,
        seeds=(0, 1, 2),
        val_rollouts_per_prompt=16,
        test_freq=25,
        save_freq=100,
        max_tokens_per_gpu=24576,
    ),
}

# Settings of every task, model and algorithm.
COMMON: tuple[str, ...] = (
    "data.prompt_key=prompt",
    "data.filter_overlong_prompts=true",
    "data.truncation=error",
    "actor_rollout_ref.model.use_remove_padding=true",
    "actor_rollout_ref.model.enable_gradient_checkpointing=true",
    "actor_rollout_ref.actor.use_dynamic_bsz=true",
    "actor_rollout_ref.actor.use_kl_loss=false",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "algorithm.use_kl_in_reward=false",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.temperature=1.0",
    "actor_rollout_ref.rollout.top_p=1.0",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
    "actor_rollout_ref.rollout.val_kwargs.temperature=0.6",
    "actor_rollout_ref.rollout.val_kwargs.top_p=0.95",
    "trainer.nnodes=1",
    "trainer.n_gpus_per_node=8",
    "trainer.val_before_train=true",
    "trainer.logger=[console,file]",  # the file goes to the run's folder (record_overrides)
)


def _choice(kind: str, name: str, table: dict):
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {sorted(table)}")
    return table[name]


def hydra_quoted(text: str) -> str:
    """``text`` as a quoted hydra override value that reads back as exactly ``text``: any path works, with
    ``,``, brackets, quotes, ``#``, spaces, non-ASCII or ``${...}`` (kept literal, not interpolated). Hydra
    unescapes backslashes only before a quote or at the end, so only those are doubled."""
    escaped = re.sub(r"(\\*)('|$)", lambda match: match[1] * 2 + ("\\" + match[2] if match[2] else ""), text)
    return "'" + escaped.replace("${", "\\${") + "'"


def base_overrides(task_name: str, model_name: str, seed: int, data_dir: Path) -> list[str]:
    """The settings shared by every algorithm: task, model, seed, data files (absolute), vLLM rollouts."""
    task = _choice("task", task_name, TASKS)
    model = _choice("model", model_name, MODELS)
    return [
        f"data.train_files={hydra_quoted(str(data_dir / 'train.parquet'))}",
        f"data.val_files={hydra_quoted(str(data_dir / 'test.parquet'))}",
        f"data.max_prompt_length={task.max_prompt_length}",
        f"data.max_response_length={task.max_response_length}",
        f"data.train_batch_size={task.train_batch_size}",
        f"data.seed={seed}",
        f"actor_rollout_ref.model.path={model.path}",
        f"actor_rollout_ref.actor.optim.lr={task.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={task.ppo_mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={task.max_tokens_per_gpu}",
        f"actor_rollout_ref.actor.data_loader_seed={seed}",
        f"actor_rollout_ref.rollout.n={task.rollouts_per_prompt}",
        f"actor_rollout_ref.rollout.seed={seed}",
        f"actor_rollout_ref.rollout.val_kwargs.n={task.val_rollouts_per_prompt}",
        f"trainer.total_training_steps={task.total_training_steps}",
        f"trainer.test_freq={task.test_freq}",
        f"trainer.save_freq={task.save_freq}",
        f"trainer.project_name=bot-grpo-{task_name}",
        *COMMON,
        *model.overrides,
    ]


def reward_function_overrides(
    function: Path, options: tuple[tuple[str, str], ...], reward: str, name: str = "compute_score"
) -> list[str]:
    """A token-level reward function (``name`` in file ``function``, with ``reward_kwargs`` ``options``) as an
    algorithm of kind ``reward`` consumes it (see :class:`Algorithm`)."""
    kwargs = [f"+reward.custom_reward_function.reward_kwargs.{key}={value}" for key, value in options]
    if reward == "token":
        return [
            f"reward.custom_reward_function.path={function}",
            f"reward.custom_reward_function.name={name}",
            *kwargs,
        ]
    if reward == "outcome":
        return [
            f"reward.custom_reward_function.path={OUTCOME_REWARD}",
            "reward.custom_reward_function.name=compute_score",
            f"+reward.custom_reward_function.reward_kwargs.token_reward_path={function}",
            *(
                [f"+reward.custom_reward_function.reward_kwargs.token_reward_name={name}"]
                if name != "compute_score"
                else []
            ),
            *kwargs,
        ]
    raise ValueError(f"reward must be one of {REWARD_KINDS}, got {reward!r}")


def reward_overrides(task_name: str, reward: str) -> list[str]:
    """The task's reward function as an algorithm of kind ``reward`` consumes it (see :class:`Algorithm`)."""
    task = _choice("task", task_name, TASKS)
    return reward_function_overrides(REPO / task.reward_path, task.reward_options, reward)


def algorithm_keys(algorithm_name: str, max_response_length: int) -> list[str]:
    """The algorithm's own keys for a response budget of ``max_response_length`` tokens."""
    algorithm = _choice("algorithm", algorithm_name, ALGORITHMS)
    lengths = {
        "max_response_length": max_response_length,
        "overlong_buffer_length": overlong_buffer_length(max_response_length),
    }
    return [override.format(**lengths) for override in algorithm.overrides]


def algorithm_overrides(task_name: str, algorithm_name: str) -> list[str]:
    """The algorithm's own keys, with the task's lengths filled in."""
    return algorithm_keys(algorithm_name, _choice("task", task_name, TASKS).max_response_length)


def run_folder(runs_dir: Path, task_name: str, model_name: str, algorithm_name: str, seed: int) -> Path:
    """The folder of one run's record: ``<runs_dir>/<task>/<model>/<algorithm>/seed<seed>``, absolute."""
    return Path(runs_dir).resolve() / task_name / model_name / algorithm_name / f"seed{seed}"


def record_overrides(folder: Path) -> list[str]:
    """Keep the run's record in ``folder``: verl's file logger writes ``metrics.jsonl`` there (its path reaches
    verl's trainer, wherever Ray places it, through the job's environment) and its validation samples go to
    ``validation/<step>.jsonl``. On a cluster, ``folder`` must be on a file system the trainer's node writes."""
    return [
        "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=" + hydra_quoted(str(folder / METRICS_FILE)),
        f"trainer.validation_data_dir={hydra_quoted(str(folder / VALIDATION_DIR))}",
    ]


def overrides(
    task_name: str, model_name: str, algorithm_name: str, seed: int, data_dir: Path, runs_dir: Path = RUNS
) -> list[str]:
    """Every override of one run, in the order of the module docstring.

    Args:
        task_name: a key of :data:`TASKS`; model_name: of :data:`MODELS`; algorithm_name: of :data:`ALGORITHMS`.
        seed: seeds data shuffling, the actor's data loader and vLLM sampling.
        data_dir: folder holding ``train.parquet`` and ``test.parquet``; made absolute here.
        runs_dir: where runs keep their records (:func:`run_folder`).

    Returns:
        hydra overrides for ``verl.trainer.main_ppo`` (``trainer.experiment_name`` names the run).
    """
    algorithm = _choice("algorithm", algorithm_name, ALGORITHMS)
    return [
        *base_overrides(task_name, model_name, seed, Path(data_dir).resolve()),
        f"trainer.experiment_name={model_name}-{algorithm_name}-seed{seed}",
        *reward_overrides(task_name, algorithm.reward),
        *algorithm_overrides(task_name, algorithm_name),
        *record_overrides(run_folder(runs_dir, task_name, model_name, algorithm_name, seed)),
    ]
