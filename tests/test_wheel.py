"""The distribution as a cluster user gets it: ``python -m build`` makes the sdist and the wheel (from the
sdist), ``twine check`` passes, and the wheel installed into a virtual environment outside the clone runs
from another directory: ``check``, ``setup tsx``, the React/TSX and arithmetic rewards loaded by path
through verl's own loader, and the hydra preset composed with verl's ``ppo_trainer``.

The environment is cached under ``.cache/wheel-venv-<hash of the wheel's requirements>`` (a new
requirement makes a new one); each run reinstalls the freshly built wheel into it without dependencies.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds, installs into a venv: minutes
ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
BROKEN_TSX = "Here it is:\n```tsx\nexport default function App() {\n  return <div>{1 +}</div>;\n}\n```\n"
ARITHMETIC = "17 + 25 = 42\n\n42 * 3 = 126\n\n126 - 40 = 86\n\nThe answer is \\boxed{86}."
TSX_FILES = ("worker.mjs", "tsc7.mjs", "directives.mjs", "package.json", "package-lock.json")

# Run by the installed interpreter, outside the clone: prints one JSON line of what it saw.
SCRIPT = """
import json, subprocess, sys
import bot_grpo_verl, bot_grpo_verl.rewards
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn

def load(name):
    path = subprocess.run(["bot-grpo-verl", "reward-path", name], capture_output=True, text=True, check=True)
    config = {"reward": {"custom_reward_function": {"path": path.stdout.strip(), "name": "compute_score"}}}
    return path.stdout.strip(), get_custom_reward_fn(OmegaConf.create(config))

tsx_path, react_tsx = load("react_tsx")
arithmetic_path, arithmetic_steps = load("arithmetic_steps")
with initialize_config_module(config_module="verl.trainer.config", version_base=None):
    config = compose("ppo_trainer", overrides=["+preset=bot_grpo"])
print(json.dumps({
    "package": bot_grpo_verl.__file__, "version": bot_grpo_verl.__version__, "paths": [tsx_path, arithmetic_path],
    "react": react_tsx(data_source="react", solution_str=sys.argv[1]),
    "arithmetic": arithmetic_steps(data_source="arithmetic", solution_str=sys.argv[2], ground_truth="86"),
    "adv_estimator": config.algorithm.adv_estimator,
}))
"""


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The folder with the sdist and the wheel that ``python -m build`` made of the working tree."""
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    return out


def only(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


def requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines without extras (what pip installs for a plain install)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    return sorted(line for line in lines if line.startswith("Requires-Dist:") and "extra ==" not in line)


@pytest.fixture(scope="module")
def installed(dist) -> Path:
    """The ``bin/`` of a venv outside the clone with the built wheel and its dependencies installed."""
    wheel = only(dist, "*.whl")
    key = hashlib.sha256("\n".join([sys.version, TORCH, *requirements(wheel)]).encode()).hexdigest()[:12]
    environment = ROOT / ".cache" / f"wheel-venv-{key}"
    ready = environment / ".ready"
    pip = [str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    env = {**os.environ, "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(ROOT / ".cache" / "pip"))}
    if not ready.exists():
        for stale in environment.parent.glob("wheel-venv-*"):
            shutil.rmtree(stale, ignore_errors=True)
        venv.create(environment, with_pip=True)
        subprocess.run([*pip, TORCH, str(wheel)], check=True, env=env, timeout=900)
        ready.touch()
    subprocess.run([*pip, "--no-deps", "--force-reinstall", str(wheel)], check=True, env=env, timeout=300)
    return environment / "bin"


def run_outside(bin_dir: Path, cwd: Path, *command: str, **env: str) -> subprocess.CompletedProcess:
    """``command`` run by the venv's executables from ``cwd``, with no trace of the clone in the environment."""
    clean = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean["PATH"] = f"{bin_dir}{os.pathsep}{clean['PATH']}"
    clean["npm_config_cache"] = str(ROOT / ".cache" / "npm")
    clean["XDG_CACHE_HOME"] = str(cwd / "xdg-cache")
    clean.pop("BOT_GRPO_VERL_TSX_DIR", None)
    return subprocess.run(
        command, cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=600, check=False
    )


def test_build_makes_a_complete_sdist_and_wheel_that_twine_accepts(dist):
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    wheel = zipfile.ZipFile(only(dist, "*.whl")).namelist()
    with tarfile.open(only(dist, "*.tar.gz")) as archive:
        sdist = archive.getnames()
    for name in [
        "bot_grpo_verl/VERSION",
        "bot_grpo_verl/config/preset/bot_grpo.yaml",
        "bot_grpo_verl/rewards/react_tsx.py",
        *(f"bot_grpo_verl/rewards/tsx/{n}" for n in TSX_FILES),
    ]:
        assert name in wheel, name
    assert not [name for name in wheel if name.startswith("reward_models/") or "node_modules" in name]
    assert not [name for name in sdist if "node_modules" in name or "/reward_models/" in name]
    assert {"bot_grpo_verl/rewards/react_tsx.py", "bot_grpo_verl/rewards/tsx/render.mjs"} <= {
        name.partition("/")[2] for name in sdist
    }
    version = (ROOT / "bot_grpo_verl" / "VERSION").read_text().strip()
    assert only(dist, "*.whl").name.startswith(f"bot_grpo_verl-{version}-")
    # Only the plugin is installed; the demo and the recipes it runs ship with the source.
    top_level = {name.split("/")[0] for name in wheel}
    assert top_level == {"bot_grpo_verl", "hydra_plugins", f"bot_grpo_verl-{version}.dist-info"}, top_level
    assert not [name for name in wheel if name.startswith(("bot_grpo_verl/demo/", "bot_grpo_verl/benchmark/"))]
    assert {"demo/run.py", "recipes/algorithms.py"} <= {name.partition("/")[2] for name in sdist}


def test_the_installed_wheel_runs_outside_the_clone(installed, tmp_path):
    missing = run_outside(installed, tmp_path, "python", "-c", SCRIPT, BROKEN_TSX, ARITHMETIC)
    assert missing.returncode != 0 and "run `bot-grpo-verl setup tsx`" in missing.stderr, missing.stderr[-2000:]

    tsx_dir = tmp_path / "tsx"
    setup = run_outside(installed, tmp_path, "bot-grpo-verl", "setup", "tsx", "--dir", str(tsx_dir))
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert (tsx_dir / "node_modules" / "esbuild").is_dir()

    check = run_outside(
        installed, tmp_path, "python", "-m", "bot_grpo_verl", "check", BOT_GRPO_VERL_TSX_DIR=str(tsx_dir)
    )
    assert check.returncode == 0 and check.stdout.rstrip().endswith("OK"), check.stdout + check.stderr
    assert f"tsx checker   {tsx_dir} (node: " in check.stdout

    run = run_outside(
        installed, tmp_path, "python", "-c", SCRIPT, BROKEN_TSX, ARITHMETIC, BOT_GRPO_VERL_TSX_DIR=str(tsx_dir)
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    environment = installed.parent
    assert Path(seen["package"]).is_relative_to(environment)
    assert all(Path(path).is_file() and Path(path).is_relative_to(environment) for path in seen["paths"])
    line_start = BROKEN_TSX.index("  return <div>{1 +}")
    line_end = BROKEN_TSX.index("\n", line_start)
    penalised = [start for start, _, value in seen["react"]["spans"] if value < 0]
    assert seen["react"]["score"] == 0 and penalised and all(line_start <= start < line_end for start in penalised)
    assert seen["arithmetic"]["acc"] == 1.0 and seen["arithmetic"]["spans"]
    assert seen["adv_estimator"] == "bot_grpo"
