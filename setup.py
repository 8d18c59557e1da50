"""bot-grpo-verl: BoT-GRPO (Bag-of-Tokens GRPO) as a verl plugin.

Installing this distribution next to verl is all a user does: verl loads the ``verl.plugins`` entry
point on ``import verl`` and ``algorithm.adv_estimator=bot_grpo`` becomes available to every recipe.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
JUDGE = ["openai>=1.55.3,<4"]
VERSION = (ROOT / "bot_grpo_verl" / "VERSION").read_text().strip()

setup(
    name="bot-grpo-verl",
    version=VERSION,
    description="BoT-GRPO (Bag-of-Tokens GRPO) for verl: token-level rewards, one hydra key",
    long_description=(ROOT / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # hydra_plugins is a namespace package shared with other hydra plugins: no __init__.py of ours.
    packages=find_packages(include=["bot_grpo_verl", "bot_grpo_verl.*"]) + ["hydra_plugins.bot_grpo_verl"],
    # The TSX checker's Node worker and the npm manifest + lock file that `bot-grpo-verl setup tsx` installs.
    package_data={
        "bot_grpo_verl": ["VERSION", "config/*/*.yaml"],
        "bot_grpo_verl.rewards": [
            "tsx/worker.mjs",
            "tsx/tsc7.mjs",
            "tsx/directives.mjs",
            "tsx/render.mjs",
            "tsx/package.json",
            "tsx/package-lock.json",
        ],
    },
    include_package_data=False,
    install_requires=[
        # verl is pinned to the minor release we test against; the plugin checks it again at load time.
        "verl>=0.9.1,<0.10",
        # A range, not a pin: `make` installs the CPU wheel torch==2.13.0 first so that pip never
        # pulls CUDA wheels on a CPU machine; GPU users keep the torch their verl image ships.
        "torch>=2.6",
        "transformers>=4.51",
        "hydra-core>=1.3.2,<1.4",
        "ray>=2.41",
        "numpy",
        "psutil",
        # verl 0.9.1 imports these on its default (V1, TransferQueue) trainer path without declaring them.
        "transferqueue>=0.1.11",
        "cachetools",
        "fastapi",
        "uvicorn",
        # bot_grpo_verl/rewards/answer_check.py: every arithmetic and math answer is checked with math-verify
        # (antlr 4.9.3, as hydra pins), so the CPU tasks' rewards need it: not an extra.
        "math-verify[antlr4-9-3]>=0.9,<1",
        # bot_grpo_verl/rewards/http_json.py: the PRM endpoints' HTTP client (transformers needs it too).
        "httpx>=0.27",
    ],
    extras_require={
        # build, twine and setuptools: tests/test_wheel.py builds and checks the distribution without isolation.
        "test": [
            "pytest>=8",
            "hypothesis>=6.100",
            "ruff>=0.6",
            "matplotlib>=3.8",
            "build>=1.2",
            "twine>=5,<7",
            "setuptools>=77",
            # tests/test_react_judge.py: the judge's client (the [judge] extra).
            *JUDGE,
        ],
        # bot_grpo_verl/rewards/react_judge.py: the React reward's optional judge, an OpenAI-compatible endpoint.
        "judge": JUDGE,
        # verl's own extra: its vllm and tensordict ranges, not a weaker restatement of ours.
        "gpu": ["verl[vllm]>=0.9.1,<0.10"],
    },
    entry_points={
        "verl.plugins": ["bot_grpo = bot_grpo_verl.plugin"],
        "console_scripts": ["bot-grpo-verl = bot_grpo_verl.__main__:main"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
