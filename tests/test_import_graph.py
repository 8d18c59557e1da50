"""The package's import graph keeps its layers (``docs/import_graph.py``), and the script finds what breaks them."""

import subprocess
import sys
from pathlib import Path

from docs import import_graph

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_has_no_cycle_and_keeps_its_layers():
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "import_graph.py")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("OK: no cycle, every import allowed by the layers")
    edges, _ = import_graph.import_graph(ROOT)
    assert {"bot_grpo_verl.cpu", "bot_grpo_verl.verl_compat", "bot_grpo_verl.estimators.bot_grpo"} <= edges[
        "bot_grpo_verl.plugin"
    ]
    assert "bot_grpo_verl.verl_compat.cpu_patches" in edges["bot_grpo_verl.cpu"]


def write_package(root: Path, sources: dict[str, str]) -> None:
    for name, source in sources.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_a_cycle_a_forbidden_edge_a_module_in_no_layer_and_an_import_of_the_demo_are_found(tmp_path):
    write_package(
        tmp_path,
        {
            "bot_grpo_verl/__init__.py": "",
            "bot_grpo_verl/reward/__init__.py": "",
            "bot_grpo_verl/reward/token_rewards.py": "from bot_grpo_verl import plugin\n",
            "bot_grpo_verl/plugin.py": "import bot_grpo_verl.cpu\n",
            "bot_grpo_verl/estimators/__init__.py": "",
            "bot_grpo_verl/estimators/bot_grpo.py": "from ..cpu import activate\n",
            "bot_grpo_verl/reward/manager.py": "def run():\n    import demo.run\n",
            "bot_grpo_verl/mystery.py": "",
            "bot_grpo_verl/cpu/__init__.py": "def activate():\n    pass\n",
            "bot_grpo_verl/cpu/rollout.py": "from ..verl_compat.cpu_patches import ROLLOUT_NAME\n",
            "bot_grpo_verl/verl_compat/__init__.py": "",
            "bot_grpo_verl/verl_compat/cpu_patches.py": "def load():\n    from bot_grpo_verl.cpu.rollout import X\n",
            "bot_grpo_verl/not_a_package/helper.py": "import bot_grpo_verl.plugin\n",
        },
    )
    edges, above = import_graph.import_graph(tmp_path)
    assert import_graph.problems(edges, above) == [
        "CYCLE: bot_grpo_verl.cpu.rollout -> bot_grpo_verl.verl_compat.cpu_patches -> bot_grpo_verl.cpu.rollout",
        "NOT ALLOWED: bot_grpo_verl.estimators.bot_grpo (estimators & reward manager) -> bot_grpo_verl.cpu "
        "(verl coupling & CPU mode)",
        "NO LAYER: bot_grpo_verl.mystery (add it to LAYERS in docs/import_graph.py)",
        "ABOVE THE PACKAGE: bot_grpo_verl.reward.manager -> demo.run",
        "NOT ALLOWED: bot_grpo_verl.reward.token_rewards (contract & alignment) -> bot_grpo_verl.plugin (entry points)",
    ]
    assert import_graph.main([str(tmp_path)]) == 1


def test_the_benchmarks_import_neither_the_tests_nor_the_demos_command_line_and_the_demo_not_the_benchmarks(tmp_path):
    write_package(
        tmp_path,
        {
            "bot_grpo_verl/__init__.py": "",
            "tests/helpers/tokenizer_fixtures.py": "",
            "benchmarks/__init__.py": "",
            "benchmarks/speed.py": "from tokenizer_fixtures import qwen3\nfrom demo.training import run_verl\n",
            "benchmarks/matrix.py": "def main():\n    from demo.run import base_overrides\n",
            "benchmarks/reporting/__init__.py": "",
            "benchmarks/reporting/runs.py": "import tests.conftest\nfrom demo import run\n",
            "demo/__init__.py": "",
            "demo/run.py": "from demo.training import run_verl\n",
            "demo/training.py": "from benchmarks.metrics import pass_at_k\n",
        },
    )
    assert import_graph.forbidden_imports(tmp_path) == [
        "FORBIDDEN: benchmarks.matrix -> demo.run (benchmarks may not import it)",
        "FORBIDDEN: benchmarks.reporting.runs -> tests (benchmarks may not import it)",
        "FORBIDDEN: benchmarks.reporting.runs -> demo.run (benchmarks may not import it)",
        "FORBIDDEN: benchmarks.speed -> tests (benchmarks may not import it)",
        "FORBIDDEN: demo.training -> benchmarks (demo may not import it)",
    ]
    assert import_graph.main([str(tmp_path)]) == 1
