"""The check that every Ray node has the plugin, without a cluster: what each node's report says, that the probe
runs in a Python without the package, and that verl's driver checks before it creates the trainer (the two-node
runs are tests/test_two_ray_nodes.py)."""

import subprocess
import sys
import types

from conftest import environment_without_cpu_mode
from ray import cloudpickle
from test_two_ray_nodes import NOT_INSTALLED

from bot_grpo_verl import ESTIMATOR_NAME, driver
from bot_grpo_verl.verl_compat import ray_nodes
from bot_grpo_verl.verl_compat.ray_nodes import NodeReport, missing_plugin_message, node_problem

NODE = "ab12" * 14


def test_a_node_where_the_plugin_registered_has_no_problem():
    assert node_problem(NodeReport(NODE, "10.0.0.2", "0.1.0", registered=True)) is None
    assert missing_plugin_message([NodeReport(NODE, "10.0.0.2", "0.1.0", registered=True)]) is None


def test_each_problem_names_the_node_and_the_message_the_fix():
    missing = NodeReport(NODE, "10.0.0.2")
    disabled = NodeReport("cd34" * 14, "10.0.0.3", "0.1.0", registered=False)
    failure = "RayTaskError: Traceback...\nModuleNotFoundError: No module named 'verl'"
    broken = NodeReport("ef56" * 14, "10.0.0.4", error=failure)
    assert node_problem(missing) == f"bot-grpo-verl is not installed on Ray node {NODE} (10.0.0.2)"
    assert "0.1.0 is installed on Ray node cd34" in node_problem(disabled) and "VERL_USE_EXTERNAL_PLUGINS" in (
        node_problem(disabled)
    )
    assert node_problem(broken).endswith("(10.0.0.4): ModuleNotFoundError: No module named 'verl'")
    message = missing_plugin_message([NodeReport("0" * 56, "10.0.0.1", "0.1.0", True), missing, disabled, broken])
    assert message.startswith(f"bot-grpo-verl: bot-grpo-verl is not installed on Ray node {NODE} (10.0.0.2); ")
    assert "0" * 56 not in message and message.count("Ray node") == 3
    assert message.endswith(f"Fix: {ray_nodes.INSTALL_FIX}") and "\n" not in message


def test_the_probe_runs_where_the_package_is_not_installed(tmp_path):
    """Pickled by value, the probe loads and runs in a Python that cannot import bot_grpo_verl (the two-node
    test's model of a node without the package): it reports no version and an unknown estimator."""
    (tmp_path / "sitecustomize.py").write_text(NOT_INSTALLED)
    pickled = tmp_path / "probe.pkl"
    ray_nodes.probe_task()  # registers the module for pickling by value
    pickled.write_bytes(cloudpickle.dumps(ray_nodes.plugin_on_this_node))
    source = (
        "import sys, types\n"
        "from ray import cloudpickle\n"
        "sys.modules['ray'].get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: 'here')\n"
        f"probe = cloudpickle.loads(open({str(pickled)!r}, 'rb').read())\n"
        f"print(probe({ESTIMATOR_NAME!r}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", source],
        env={**environment_without_cpu_mode(), "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "{'node_id': 'here', 'version': None, 'registered': False}"


def test_the_driver_checks_the_nodes_before_it_creates_the_trainer(monkeypatch):
    calls = []

    class Runner:  # verl's TaskRunner class, as run_ppo uses it
        @staticmethod
        def options(**options):
            calls.append(("options", options))
            return Runner

        @staticmethod
        def remote():
            calls.append("remote")
            return "runner"

    def run_ppo(config, task_runner_class):  # as verl's: Ray is up, then the runner is created
        """ray.init(...); runner = task_runner_class.remote()"""
        return task_runner_class.options(num_cpus=1).remote()

    def main(config):
        """run_ppo(config, task_runner_class=TaskRunnerV1)"""

    module = types.ModuleType("fake_main_ppo")
    module.__spec__ = types.SimpleNamespace(name=driver.MAIN_PPO)
    module.run_ppo, module.main = run_ppo, main
    main.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(ray_nodes, "source_of", lambda function: function.__doc__)
    monkeypatch.setattr(ray_nodes, "require_plugin_on_every_node", lambda: calls.append("check"))
    monkeypatch.setattr(driver, "check_run", lambda config: calls.append(("config", config)) or True)

    driver.CheckRayNodes().on_job_start(None, task_function=main)
    driver.CheckRayNodes().on_job_start(None, task_function=main)  # idempotent
    assert module.run_ppo("the config", Runner) == "runner"
    assert calls == [("config", "the config"), "check", ("options", {"num_cpus": 1}), "remote"]


def test_another_hydra_app_is_left_alone(monkeypatch):
    def main(config):
        return None

    module = types.ModuleType("someone_elses_app")
    module.run_ppo = main
    main.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    driver.CheckRayNodes().on_job_start(None, task_function=main)
    assert module.run_ppo is main


def test_outside_ray_there_is_nothing_to_check():
    ray_nodes.require_plugin_on_every_node()  # this process runs no Ray: no probe, no error
