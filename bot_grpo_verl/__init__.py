"""bot-grpo-verl: BoT-GRPO (Bag-of-Tokens Group Relative Policy Optimization) as a verl plugin.

Importing this package is light: verl loads :mod:`bot_grpo_verl.plugin` through the ``verl.plugins``
entry point, and that module registers everything with verl.
"""

from pathlib import Path

__version__ = (Path(__file__).parent / "VERSION").read_text().strip()

ESTIMATOR_NAME = "bot_grpo"
