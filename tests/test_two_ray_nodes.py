"""verl's real trainer on CPU, joined to a Ray cluster of two nodes started on this machine, as docs/install.md's
cluster section runs it: a head (``ray start --head``, the one logical GPU: the FSDP worker) and a
second node (``ray start --address=...``, its own IP address on the loopback, temp dir, CPUs and a ``second_node``
resource, no GPU), each a raylet of its own started with ``--block`` in a session of its own, so that the test stops
exactly its own processes. verl puts its agent-loop and reward workers round-robin on the alive nodes
(``reward.num_workers=2``, ``actor_rollout_ref.rollout.agent.num_workers=2``): one of each lands on the second node.

- With the plugin on both nodes, the run trains its 2 steps; Ray's actor table shows where each worker ran, and the
  reward function, called by the plugin's ``bot_token`` manager inside the reward workers, records on each node that
  verl loaded and registered the plugin there (its estimator in verl's registry, the run selected it).
- With the second node's Python as if bot-grpo-verl were not installed there, the run stops before any worker is
  placed, with the plugin's one line naming that node and the fix. "Not installed" is modelled by a
  ``sitecustomize`` on that node's ``PYTHONPATH`` only (:data:`NOT_INSTALLED`): ``import bot_grpo_verl`` raises
  ``ModuleNotFoundError`` and ``importlib.metadata`` lists no bot-grpo-verl distribution, so verl's ``verl.plugins``
  entry-point discovery finds no plugin there, as on a node where the package was never installed (every other
  package of the environment is the same; ``VERL_USE_EXTERNAL_PLUGINS=none`` would model a disabled plugin instead).

Ray's token authentication is switched off (``RAY_AUTH_MODE=disabled``): both nodes listen on this machine only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import torch
from conftest import environment_without_cpu_mode
from cpu_assets import REWARD_SOURCE, read_jsonl, run_trainer, save_tiny_model, write_dataset

pytestmark = [
    pytest.mark.slow,  # two raylets and verl's whole trainer: minutes
    pytest.mark.skipif(torch.cuda.is_available(), reason="exercises the CPU mode, for hosts without accelerator"),
]
RAY = str(Path(sys.executable).with_name("ray"))
SECOND_NODE_IP = "127.0.0.2"  # Linux routes all of 127/8 to the loopback: a second address on this machine
START_TIMEOUT_S = 180
NOT_INSTALLED = '''
"""This Python as if bot-grpo-verl were not installed: its modules cannot be imported and importlib.metadata
lists no distribution of it (so no verl.plugins entry point either)."""
import importlib.abc
import importlib.metadata
import sys

HIDDEN = "bot_grpo_verl"


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == HIDDEN or name.startswith(HIDDEN + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
_discover = importlib.metadata.Distribution.discover.__func__


def _installed(cls, **kwargs):
    for found in _discover(cls, **kwargs):
        if (found.metadata["Name"] or "").replace("-", "_").lower() != HIDDEN:
            yield found


importlib.metadata.Distribution.discover = classmethod(_installed)
'''
RECORDING_REWARD = (
    REWARD_SOURCE
    + '''

def _record():
    """Where this call ran and what verl loaded in its process, one JSON line in RECORD (once per process)."""
    import json, os, sys
    import ray
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from bot_grpo_verl import selection

    line = {
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "plugin_loaded": "bot_grpo_verl.plugin" in sys.modules,
        "registered": "bot_grpo" in ADV_ESTIMATOR_REGISTRY,
        "selected": selection.is_selected(),
    }
    with open(RECORD, "a") as out:
        out.write(json.dumps(line) + "\\n")


_recorded = False
_score = compute_score


def compute_score(*args, **kwargs):
    global _recorded
    if not _recorded:
        _record()
        _recorded = True
    return _score(*args, **kwargs)
'''
)
ACTOR_TABLE = """
import json, sys
import ray
from ray._private import state
ray.init(address=sys.argv[1], logging_level="ERROR")
print(json.dumps([
    {"class": actor["ActorClassName"], "node_id": actor["Address"]["NodeID"], "pid": actor["Pid"]}
    for actor in state.actors().values()
]))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Node:
    """A ``ray start --block`` process (its own session) and its log."""

    process: subprocess.Popen
    log: Path


def start_node(arguments: list[str], env: dict, log: Path) -> Node:
    """``ray start --block <arguments>`` in a session of its own; return once it says the runtime started."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", *arguments],
            env=env,
            cwd=log.parent,  # its workers' working directory: what verl writes to relative paths lands there
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = Node(process, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_node(node)
            pytest.fail(f"ray start {' '.join(arguments)} failed:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(1)
    return node


def stop_node(node: Node) -> None:
    """SIGTERM the ``ray start --block`` process (it stops its raylet, workers and agents), then SIGKILL whatever of
    its session is left after 30 s."""
    session = node.process.pid
    if node.process.poll() is None:
        node.process.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            node.process.wait(timeout=30)
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == session:
                process.kill()
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    node.process.wait()


@dataclass(frozen=True)
class Cluster:
    """The two nodes' Ray address (the head's GCS), the head's temp dir and the node ids."""

    address: str
    temp_dir: str
    head_id: str
    second_id: str


def node_ids(address: str, env: dict) -> dict[str, str]:
    """IP address -> node id of the alive nodes of the cluster at ``address``."""
    source = (
        "import json, sys, ray\n"
        "ray.init(address=sys.argv[1], logging_level='ERROR')\n"
        "print(json.dumps({n['NodeManagerAddress']: n['NodeID'] for n in ray.nodes() if n['Alive']}))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", source, address], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def actor_table(address: str, env: dict) -> list[dict]:
    """Every actor the cluster ran (alive or dead): class name, node id, pid (Ray's GCS actor table)."""
    output = subprocess.run(
        [sys.executable, "-c", ACTOR_TABLE, address], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def ray_environment() -> dict[str, str]:
    """The environment of the nodes and the driver: no CPU mode (the preset's runtime_env brings it), no token
    authentication (a loopback-only cluster), no usage stats."""
    return {**environment_without_cpu_mode(), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@contextmanager
def two_node_cluster(root: Path, plugin_on_second_node: bool) -> Iterator[Cluster]:
    """A head and a second node on this machine, each with its own temp dir under /tmp (Ray's socket paths must be
    short); both stopped, by their own process ids, however the test ends."""
    env = ray_environment()
    second_env = dict(env)
    if not plugin_on_second_node:
        hidden = root / "not_installed"
        hidden.mkdir()
        (hidden / "sitecustomize.py").write_text(NOT_INSTALLED)
        second_env["PYTHONPATH"] = os.pathsep.join([str(hidden), env.get("PYTHONPATH", "")])
    head_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")
    second_dir = tempfile.mkdtemp(prefix="rn", dir="/tmp")
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes = []
    try:
        nodes.append(
            start_node(
                [
                    "--head",
                    f"--port={port}",
                    f"--temp-dir={head_dir}",
                    "--num-cpus=16",
                    "--num-gpus=1",
                    "--include-dashboard=false",
                    f"--dashboard-port={free_port()}",
                    f"--ray-client-server-port={free_port()}",
                    f"--dashboard-agent-listen-port={free_port()}",
                    "--min-worker-port=0",
                    "--max-worker-port=0",
                ],
                env,
                root / "head.log",
            )
        )
        nodes.append(
            start_node(
                [
                    f"--address={address}",
                    f"--node-ip-address={SECOND_NODE_IP}",
                    f"--temp-dir={second_dir}",
                    "--num-cpus=8",
                    "--num-gpus=0",
                    '--resources={"second_node": 1}',
                    f"--dashboard-agent-listen-port={free_port()}",
                    "--min-worker-port=0",
                    "--max-worker-port=0",
                ],
                second_env,
                root / "second_node.log",
            )
        )
        ids = node_ids(address, env)
        assert len(ids) == 2 and SECOND_NODE_IP in ids, ids
        head_id = next(node_id for ip, node_id in ids.items() if ip != SECOND_NODE_IP)
        yield Cluster(address, head_dir, head_id, ids[SECOND_NODE_IP])
    finally:
        for node in reversed(nodes):  # the second node first: without its head it lingers
            stop_node(node)
        for directory in (head_dir, second_dir):
            shutil.rmtree(directory, ignore_errors=True)


JOIN_THE_CLUSTER = (
    "+preset=[bot_grpo,cpu]",
    # the cluster's resources are the nodes' (ray start): ray.init refuses them when it joins one
    "~ray_kwargs.ray_init.num_cpus",
    "~ray_kwargs.ray_init.num_gpus",
    # (and ray_kwargs.ray_init._temp_dir must be the head's: the driver finds its node by it)
    "reward.num_workers=2",  # round-robin over the alive nodes: one on each
    "actor_rollout_ref.rollout.agent.num_workers=2",
)


def run_on_cluster(root: Path, model: Path, cluster: Cluster) -> tuple[int, str, float]:
    """(exit code, output, wall seconds) of the 2-step CPU run joined to ``cluster``, its reward function recording
    to ``root/record.jsonl``."""
    write_dataset(root / "train.parquet", rows=8)
    write_dataset(root / "val.parquet", rows=4, seed=1)
    (root / "reward.py").write_text(f"RECORD = {str(root / 'record.jsonl')!r}\n{RECORDING_REWARD}")
    env = {**ray_environment(), "TOKENIZERS_PARALLELISM": "false"}
    started = time.monotonic()
    join = (f"+ray_kwargs.ray_init.address={cluster.address}", f"ray_kwargs.ray_init._temp_dir={cluster.temp_dir}")
    # the trainer's environment is its node's, plus the job's runtime_env: not the driver's
    logger = f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={root / 'metrics.jsonl'}"
    returncode, _ = run_trainer(root, model, env, *JOIN_THE_CLUSTER, *join, logger)
    return returncode, (root / "main_ppo.log").read_text(errors="replace"), time.monotonic() - started


def last_lines(log: str, count: int) -> str:
    """The last ``count`` non-blank lines of ``log``, ANSI colours removed."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines() if line.strip()]
    return "\n".join(lines[-count:])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("model"))


def test_the_trainer_runs_workers_on_both_nodes_and_the_plugin_registers_on_the_second(tmp_path, model):
    started = time.monotonic()
    with two_node_cluster(tmp_path, plugin_on_second_node=True) as cluster:
        cluster_s = time.monotonic() - started
        returncode, log, run_s = run_on_cluster(tmp_path, model, cluster)
        assert returncode == 0, last_lines(log, 40)
        actors = actor_table(cluster.address, ray_environment())
    assert [entry["step"] for entry in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2]

    where = {}
    for actor in actors:
        where.setdefault(actor["class"], []).append(actor["node_id"])
    for worker in ("AgentLoopWorkerTQ", "RewardLoopWorker"):
        assert sorted(where[worker]) == sorted([cluster.head_id, cluster.second_id]), where
    assert len(where["TaskRunnerV1"]) == 1  # the trainer: on whichever node Ray chose (often the second)
    assert {node for name, nodes in where.items() if "WorkerDict" in name for node in nodes} == {cluster.head_id}

    records = read_jsonl(tmp_path / "record.jsonl")
    assert {record["node_id"] for record in records} == {cluster.head_id, cluster.second_id}, records
    for record in records:  # verl loaded the plugin in each reward worker, the preset selected it there
        assert record["plugin_loaded"] and record["registered"] and record["selected"], record
    print(
        f"\ntwo nodes: cluster up in {cluster_s:.0f} s, run {run_s:.0f} s; actors by node: "
        + json.dumps({name: [node[:8] for node in nodes] for name, nodes in sorted(where.items())})
    )


def test_a_node_without_the_plugin_stops_the_run_naming_the_node_and_the_fix(tmp_path, model):
    with two_node_cluster(tmp_path, plugin_on_second_node=False) as cluster:
        returncode, log, run_s = run_on_cluster(tmp_path, model, cluster)
        actors = actor_table(cluster.address, ray_environment())
    assert returncode != 0
    message = (
        rf"PluginMissingOnNode: bot-grpo-verl: bot-grpo-verl is not installed on Ray node {cluster.second_id} "
        rf"\({re.escape(SECOND_NODE_IP)}\): verl's workers there would not know the plugin's estimators, its "
        r"bot_token reward manager or its hf_cpu rollout\. Fix: install bot-grpo-verl into verl's Python environment "
        r"on every node of the Ray cluster \(pip install bot-grpo-verl\), then restart Ray there \(docs/install\.md\)$"
    )
    assert re.search(message, last_lines(log, 6), re.MULTILINE), last_lines(log, 40)
    # stopped before init() placed any worker: only the trainer and TransferQueue's actors ran
    assert not [actor for actor in actors if re.search("Worker", actor["class"])], actors
    assert "Unknown advantage estimator" not in log and not (tmp_path / "record.jsonl").exists()
    print(f"\nnode without the plugin: the run stopped in {run_s:.0f} s")
