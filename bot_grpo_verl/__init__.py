"""bot-grpo-verl: BoT-GRPO (Bag-of-Tokens Group Relative Policy Optimization) as a verl plugin.

Importing this package is light: verl loads :mod:`bot_grpo_verl.plugin` through the ``verl.plugins``
entry point, and that module registers everything with verl.

The plugin's messages go through :mod:`logging`, under the ``bot_grpo_verl`` logger and its children, at the level
of verl's own variable ``VERL_LOGGING_LEVEL`` (read as verl's modules read it: ``WARN`` when unset), to the handlers
of the process (verl's ``basicConfig`` on ``import verl``).
"""

import logging
import os
from pathlib import Path

__version__ = (Path(__file__).parent / "VERSION").read_text().strip()
LOG_LEVEL_VARIABLE = "VERL_LOGGING_LEVEL"


def set_log_level(environ=os.environ) -> None:
    """Set the ``bot_grpo_verl`` logger to verl's ``VERL_LOGGING_LEVEL`` (``WARN`` when unset or not a level)."""
    level = environ.get(LOG_LEVEL_VARIABLE, "WARN").upper()
    logging.getLogger(__name__).setLevel(level if isinstance(logging.getLevelName(level), int) else "WARN")


set_log_level()

ESTIMATOR_NAME = "bot_grpo"
