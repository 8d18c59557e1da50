"""Everything of a run's configuration that the plugin can check before Ray starts, in verl's driver.

verl's ``main_ppo`` composes the config, starts Ray, places the trainer, loads the model, and only then meets the
plugin's options (the first advantage computation) and the reward's (its first call): minutes on a CPU, longer on
a GPU node. :func:`check_launch` runs in the driver before Ray starts (:mod:`bot_grpo_verl.driver`) and stops the
run with one :class:`LaunchError` listing every problem it finds, each naming the key (and the closest valid one
for an unknown name):

- the plugin's options: ``algorithm.bot_grpo.*``, ``algorithm.pure.*``, ``reward.bot_token.*`` (their dataclasses'
  own readers), ``algorithm.norm_adv_by_std_in_grpo`` for the plugin's estimators, and a section name close to one
  of them (``algorithm.bot_grop``);
- an estimator or reward manager name close to one of the plugin's that nobody registered (``bot_grop``);
- the run's shape when it stops the run (:func:`bot_grpo_verl.run_checks.startup_problems`);
- the reward file: it exists, parses, and defines ``reward.custom_reward_function.name`` (read, not run);
- a shipped reward (:mod:`bot_grpo_verl.shipped_rewards`): its ``reward_kwargs``, and the first
  :data:`ROWS_READ` rows of each data file (``data.train_files``, ``data.val_files``) for what it needs of a row.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from bot_grpo_verl.options import OptionError, closest_name, option_from_config

logger = logging.getLogger(__name__)
PREFIX = "bot-grpo-verl: "
ROWS_READ = 16
"""How many rows of each data file the shipped rewards' row checks read."""
SECTIONS = {"algorithm": ("bot_grpo", "pure"), "reward": ("bot_token",)}
"""The plugin's option sections under verl's config sections."""
SECTION_TYPO_CUTOFF = 0.8
"""How close (difflib's ratio) an unknown key must be to a section or name of the plugin's to be called a typo."""
MANAGER_NAME = "bot_token"


class LaunchError(OptionError):
    """The run's configuration cannot train what it says: raised in verl's driver before Ray starts."""


def check_launch(config) -> None:
    """Raise :class:`LaunchError` listing :func:`launch_problems` of verl's composed trainer ``config``, if any."""
    problems = launch_problems(config)
    if problems:
        listed = "".join(f"\n  - {problem}" for problem in problems)
        raise LaunchError(
            f"{PREFIX}the run's configuration has {len(problems)} problem(s), found before Ray started:{listed}"
        )


def launch_problems(config) -> list[str]:
    """Every problem of the configuration that :mod:`this module <bot_grpo_verl.launch_checks>` checks."""
    checks: list[Callable[[], Iterable[str]]] = [
        lambda: option_problems(config),
        lambda: section_typos(config),
        lambda: name_typos(config),
        lambda: shape_problems(config),
        lambda: reward_problems(config),
    ]
    return [problem for check in checks for problem in check()]


def option_problems(config) -> list[str]:
    """The plugin's option sections, read as their estimator and manager read them."""
    from bot_grpo_verl.estimators.bot_grpo import BoTGRPOConfig
    from bot_grpo_verl.estimators.pure import PUREConfig
    from bot_grpo_verl.plugin import estimators
    from bot_grpo_verl.reward.manager import TokenRewardConfig

    algorithm, reward = config.get("algorithm") or {}, config.get("reward") or {}
    readers = [
        lambda: BoTGRPOConfig.from_algorithm_config(algorithm),
        lambda: PUREConfig.from_algorithm_config(algorithm),
        lambda: TokenRewardConfig.from_reward_config(reward),
    ]
    if algorithm.get("adv_estimator") in estimators():
        path = "algorithm.norm_adv_by_std_in_grpo"
        readers.append(lambda: option_from_config(algorithm, "norm_adv_by_std_in_grpo", bool, True, path))
    return errors_of(readers)


def errors_of(readers: Iterable[Callable[[], object]]) -> list[str]:
    """The message of each reader that raises ``ValueError``."""
    problems = []
    for read in readers:
        try:
            read()
        except ValueError as error:
            problems.append(str(error))
    return problems


def section_typos(config) -> list[str]:
    """Keys of ``algorithm`` and ``reward`` that are not the plugin's sections but close to one (``bot_grop``)."""
    problems = []
    for parent, sections in SECTIONS.items():
        for key in config.get(parent) or {}:
            closest = closest_name(str(key), sections, SECTION_TYPO_CUTOFF)
            if key not in sections and closest is not None:
                problems.append(
                    f"{parent}.{key} is no section of the plugin's options: did you mean {parent}.{closest}?"
                )
    return problems


def name_typos(config) -> list[str]:
    """An estimator or reward manager name that nobody registered and that is close to one of the plugin's."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    from bot_grpo_verl.plugin import estimators

    problems = []
    estimator = str(config.algorithm.get("adv_estimator"))
    closest = closest_name(estimator, estimators(), SECTION_TYPO_CUTOFF)
    if estimator not in ADV_ESTIMATOR_REGISTRY and closest is not None:
        problems.append(f"algorithm.adv_estimator={estimator} is not registered: did you mean {closest}?")
    manager = config.reward.get("reward_manager") or {}
    name = str(manager.get("name"))
    registered = manager.get("source", "register") != "register" or name in REWARD_MANAGER
    if not registered and closest_name(name, [MANAGER_NAME], SECTION_TYPO_CUTOFF) is not None:
        problems.append(f"reward.reward_manager.name={name} is not registered: did you mean {MANAGER_NAME}?")
    return problems


def shape_problems(config) -> list[str]:
    """The run-shape problems that stop a run (:mod:`bot_grpo_verl.run_checks`), for a manager verl finds by name;
    the trainer repeats the check, and logs the ones that let the run go on."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    from bot_grpo_verl.run_checks import startup_problems

    manager = config.reward.get("reward_manager") or {}
    manager_cls = REWARD_MANAGER.get(str(manager.get("name")))
    if manager.get("source", "register") != "register" or manager_cls is None:
        return []
    try:
        problems = startup_problems(config, manager_cls)
    except ValueError:  # an option of reward.bot_token: option_problems names it
        return []
    return [problem.message for problem in problems if problem.stops]


def reward_problems(config) -> list[str]:
    """The reward file, and a shipped reward's options and data rows."""
    from bot_grpo_verl.shipped_rewards import SHIPPED, shipped_name

    function = config.reward.get("custom_reward_function") or {}
    path, name = function.get("path"), function.get("name") or "compute_score"
    if not path or str(path).startswith("pkg://"):
        return []
    problem = reward_file_problem(Path(str(path).removeprefix("file://")), name)
    if problem is not None:
        return [f"reward.custom_reward_function: {problem}"]
    shipped = shipped_name(path)
    if shipped is None:
        return []
    reward = SHIPPED[shipped]()
    try:
        options = reward.options(dict(function.get("reward_kwargs") or {}))
    except ValueError as error:
        return [f"reward.custom_reward_function.reward_kwargs of {shipped}: {error}"]
    data = config.get("data") or {}
    return [
        f"data.{key} {file} row {number}: the {shipped} reward cannot score it: {problem}"
        for key in ("train_files", "val_files")
        for file in data_files(data.get(key))
        for number, problem in first_row_problem(file, lambda row: reward.row_problem(options, row))
    ]


def reward_file_problem(path: Path, name: str) -> str | None:
    """What keeps verl from loading function ``name`` of the reward file at ``path``, read without running it:
    no such file, a syntax error (file and line), or no top-level ``name`` (naming the closest function)."""
    if not path.is_file():
        return f"path={path}: no such file"
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        return f"path={path}: {error.msg} at {error.filename}:{error.lineno}"
    defined = top_level_names(tree)
    if defined is None or name in defined:
        return None
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    closest = closest_name(name, functions)
    hint = f"; did you mean name={closest}?" if closest else f" (its functions: {functions})"
    return f"name={name}: {path} defines no such function at its top level{hint}"


def top_level_names(tree: ast.Module) -> set[str] | None:
    """The names a module binds at its top level; None when it may bind others (a star import, ``__getattr__``,
    ``globals()``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "globals":
            return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(target.id for target in ast.walk(node) if isinstance(target, ast.Name))
    return None if "__getattr__" in names else names


def data_files(value) -> list[str]:
    """The local files of ``data.train_files`` or ``data.val_files`` (a path or a list of them); remote ones
    (``hdfs://`` ...) are left to verl."""
    if value is None:
        return []
    files = [value] if isinstance(value, str) else list(value)
    return [str(file) for file in files if "://" not in str(file)]


def first_row_problem(file: str, problem_of: Callable[[Mapping], str | None]) -> list[tuple[int, str]]:
    """[(row number, problem)] of the first row among the first :data:`ROWS_READ` of ``file`` that has one,
    or of the file itself (missing, unreadable); [] when they are all fine."""
    try:
        rows = first_rows(Path(file), ROWS_READ)
    except (OSError, ValueError) as error:
        return [(0, f"cannot read it: {error}")]
    for number, row in enumerate(rows):
        problem = problem_of(row)
        if problem is not None:
            return [(number, problem)]
    return []


def first_rows(path: Path, count: int) -> list[dict]:
    """The first ``count`` rows of a verl data file (``.parquet``, ``.jsonl`` or ``.json``) as dicts.

    Raises:
        OSError: the file is missing or unreadable.
        ValueError: another format, or rows that do not parse.
    """
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        batch = next(pq.ParquetFile(path).iter_batches(batch_size=count), None)
        return [] if batch is None else batch.to_pylist()
    if path.suffix not in (".jsonl", ".json"):
        raise ValueError(f"verl reads .parquet, .jsonl and .json data files, not {path.suffix or 'this file'}")
    with open(path, encoding="utf-8") as file:
        head = file.read(1)
        file.seek(0)
        if head == "[":  # one JSON array
            return list(json.load(file)[:count])
        rows = []
        for line in file:
            if line.strip():
                rows.append(json.loads(line))
            if len(rows) == count:
                break
        return rows


def uses_plugin(config) -> bool:
    """Whether verl's trainer ``config`` names the plugin: one of its estimators, its reward manager, its CPU
    rollout, one of its option sections, or ``BOT_GRPO_SELECTED=1`` in the workers' environment."""
    from omegaconf import OmegaConf

    from bot_grpo_verl.plugin import estimators
    from bot_grpo_verl.selection import ENV_VAR
    from bot_grpo_verl.verl_compat.cpu_patches import ROLLOUT_NAME

    def select(key: str):
        return OmegaConf.select(config, key, throw_on_missing=False)

    sections = [f"{parent}.{section}" for parent, names in SECTIONS.items() for section in names]
    return (
        select("algorithm.adv_estimator") in estimators()
        or select("reward.reward_manager.name") == MANAGER_NAME
        or select("actor_rollout_ref.rollout.name") == ROLLOUT_NAME
        or any(select(section) is not None for section in sections)
        or str(select(f"ray_kwargs.ray_init.runtime_env.env_vars.{ENV_VAR}")) == "1"
    )
