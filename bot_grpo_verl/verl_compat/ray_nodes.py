"""Every node of the run's Ray cluster has the plugin: checked before verl places its trainer or any worker.

Each of verl's processes finds the plugin through verl's ``verl.plugins`` entry point in its own node's Python
environment (verl forwards no plugin to Ray workers), and verl places workers on every node: its agent-loop and
reward workers round-robin over the alive nodes, its FSDP workers wherever the resource pools find GPUs. On a node
without the package those workers would fail deep inside (``bot_token`` an unknown reward manager, ``hf_cpu`` an
unknown rollout), or train without the plugin's adapters; verl's trainer itself, if Ray placed it there, would stop
with ``Unknown reward manager: bot_token``.

:func:`require_plugin_on_every_node` runs one Ray task pinned to each other alive node (``num_cpus=0``, a worker of
the run's job, with its ``runtime_env``): it imports verl there, which loads the plugins that node has, and reports
whether the plugin's estimator is registered (:func:`plugin_on_this_node`). The task is pickled by value, so that a
node without the package can run it. A node where the plugin is not registered stops the run with one line naming
the node and the fix.

It runs twice in a run of ``python -m verl.trainer.main_ppo`` that names the plugin: in verl's driver once Ray is
up, before the trainer (verl's ``TaskRunner`` actor, which Ray may place on any node) is created (:func:`adapt_run_ppo`,
applied by :mod:`bot_grpo_verl.driver`, which also checks the run's configuration there before Ray starts); and in
the trainer before ``PPOTrainer.init`` places workers (:mod:`.trainer_checks`), which also covers a driver of one's
own. The checking process's own node has the plugin: only the other nodes are probed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bot_grpo_verl import ESTIMATOR_NAME
from bot_grpo_verl.verl_compat.guard import require, source_of, wrap_once

PROBE_TIMEOUT_S = 600.0
"""How long the check waits for the nodes' answers: a fresh worker imports verl (and torch) first."""
INSTALL_FIX = (
    "install bot-grpo-verl into verl's Python environment on every node of the Ray cluster "
    "(pip install bot-grpo-verl), then restart Ray there (docs/install.md)"
)


@dataclass(frozen=True)
class NodeReport:
    """What the check found on one Ray node.

    Attributes:
        node_id: Ray's node id (hex).
        address: the node's IP address (Ray's ``NodeManagerAddress``).
        version: the bot-grpo-verl distribution installed there, None when there is none.
        registered: whether verl's estimator registry knows the plugin's estimator after ``import verl`` there.
        error: the probe's own failure (verl not importable there, ...), None when it answered.
    """

    node_id: str
    address: str
    version: str | None = None
    registered: bool = False
    error: str | None = None


def plugin_on_this_node(estimator: str) -> dict:
    """Run on a Ray node, in a worker of the run: import verl (which loads the node's plugins); return the node's
    id, the installed bot-grpo-verl version (None if none) and whether ``estimator`` is registered with verl.

    Pickled by value (see :func:`probe_task`): it may use the standard library, Ray and verl only.
    """
    import importlib.metadata

    import ray

    try:
        version = importlib.metadata.version("bot-grpo-verl")
    except importlib.metadata.PackageNotFoundError:
        version = None
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    try:
        get_adv_estimator_fn(estimator)
        registered = True
    except ValueError:
        registered = False
    return {"node_id": ray.get_runtime_context().get_node_id(), "version": version, "registered": registered}


def probe_task():
    """:func:`plugin_on_this_node` as a Ray remote function (no CPU reserved), pickled by value: a node that lacks
    this package can still run it."""
    import ray
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray.remote(num_cpus=0, max_retries=0)(plugin_on_this_node)


def other_alive_nodes() -> dict[str, str]:
    """The alive nodes of the connected Ray cluster but this process's own: node id -> IP address."""
    import ray

    own = ray.get_runtime_context().get_node_id()
    return {
        node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"] and node["NodeID"] != own
    }


def probe_nodes(nodes: dict[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> list[NodeReport]:
    """Run :func:`plugin_on_this_node` once on each of ``nodes`` (node id -> address), pinned there; one report each
    (a probe that failed there, or did not answer within ``timeout_s``, is reported with its ``error``)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = probe_task()
    pending = {
        node_id: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote(
            ESTIMATOR_NAME
        )
        for node_id in nodes
    }
    ready, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=timeout_s)
    reports = []
    for node_id, answer in pending.items():
        if answer not in ready:
            ray.cancel(answer, force=True)
            reports.append(NodeReport(node_id, nodes[node_id], error=f"no answer in {timeout_s:.0f} s"))
            continue
        try:
            found = ray.get(answer)
        except Exception as error:  # the probe failed on that node: reported, not raised
            reports.append(NodeReport(node_id, nodes[node_id], error=f"{type(error).__name__}: {error}"))
            continue
        reports.append(NodeReport(node_id, nodes[node_id], found["version"], found["registered"]))
    return reports


def node_problem(report: NodeReport) -> str | None:
    """One line on what is wrong with the plugin on a node, None when it is registered there."""
    node = f"Ray node {report.node_id} ({report.address})"
    if report.error is not None:
        return f"the plugin check failed on {node}: {report.error.splitlines()[-1][:300]}"
    if report.registered:
        return None
    if report.version is None:
        return f"bot-grpo-verl is not installed on {node}"
    return (
        f"bot-grpo-verl {report.version} is installed on {node} but verl did not load it there "
        "(VERL_USE_EXTERNAL_PLUGINS must be unset or list bot_grpo; 'python -m bot_grpo_verl check' on that node "
        "shows why it fails to register)"
    )


def missing_plugin_message(reports: list[NodeReport]) -> str | None:
    """The run's one-line error for the nodes without a working plugin, None when every node has it."""
    problems = [problem for problem in map(node_problem, reports) if problem is not None]
    if not problems:
        return None
    return (
        f"bot-grpo-verl: {'; '.join(problems)}: verl's workers there would not know the plugin's estimators, its "
        f"bot_token reward manager or its hf_cpu rollout. Fix: {INSTALL_FIX}"
    )


class PluginMissingOnNode(RuntimeError):
    """A node of the run's Ray cluster lacks the plugin (or verl does not load it there)."""


def require_plugin_on_every_node() -> None:
    """Raise :class:`PluginMissingOnNode` unless verl loads the plugin on every other alive node of the Ray cluster
    this process is connected to (nothing to check on a one-node cluster, or outside Ray)."""
    import ray
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    require(
        "raise ValueError" in source_of(get_adv_estimator_fn),
        "verl.trainer.ppo.core_algos.get_adv_estimator_fn",
        "it raises ValueError for an estimator name nobody registered",
    )
    nodes = other_alive_nodes() if ray.is_initialized() else {}
    if nodes:
        message = missing_plugin_message(probe_nodes(nodes))
        if message is not None:
            raise PluginMissingOnNode(message)


class _CheckedRunner:
    """verl's task runner class (a Ray actor class) whose ``remote()`` (also after ``options(...)``) first calls
    :func:`require_plugin_on_every_node`: verl's driver has initialised Ray by then, and placed nothing yet."""

    def __init__(self, runner_class, options: dict | None = None):
        self._runner_class = runner_class
        self._options = options

    def options(self, **options):
        return _CheckedRunner(self._runner_class, {**(self._options or {}), **options})

    def remote(self, *args, **kwargs):
        require_plugin_on_every_node()
        runner_class = self._runner_class if self._options is None else self._runner_class.options(**self._options)
        return runner_class.remote(*args, **kwargs)


def adapt_run_ppo(main_module: ModuleType, check_config: Callable[[Any], bool]) -> None:
    """Make ``run_ppo`` of verl's ``verl/trainer/main_ppo.py``, as loaded in ``main_module`` (``__main__`` under
    ``python -m verl.trainer.main_ppo``), call ``check_config(config)`` before it starts Ray, and, where that returns
    True (the run uses the plugin), check the nodes before it creates the trainer (idempotent).

    Args:
        main_module: the module holding verl's ``main`` and ``run_ppo``.
        check_config: raises for a configuration the run cannot train with; returns whether the run uses the
            plugin.
    """
    import inspect

    require(
        list(inspect.signature(main_module.run_ppo).parameters) == ["config", "task_runner_class"]
        and "ray.init(" in source_of(main_module.run_ppo)
        and "runner = task_runner_class" in source_of(main_module.run_ppo)
        and "run_ppo(config, task_runner_class=" in source_of(main_module.main),
        "verl.trainer.main_ppo.run_ppo",
        "main() calls run_ppo(config, task_runner_class), which initialises Ray, then creates the task runner",
    )

    def make_wrapper(run_ppo):
        def run_ppo_checked(config, task_runner_class):
            if check_config(config):
                task_runner_class = _CheckedRunner(task_runner_class)
            return run_ppo(config, task_runner_class)

        return run_ppo_checked

    wrap_once(main_module, "run_ppo", make_wrapper)
