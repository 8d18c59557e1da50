"""Hydra search-path plugin: makes the presets of ``bot_grpo_verl/config`` visible to verl's hydra apps.

Hydra builds the search path in every app before it composes the config and calls the app's task function; in
verl's ``main_ppo`` (the driver) the plugin then also adapts ``run_ppo`` to check the run's configuration before
Ray starts (:mod:`bot_grpo_verl.driver`), for the runs that name the plugin without a preset too.
"""

import sys

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class BoTGRPOSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="bot-grpo-verl", path="pkg://bot_grpo_verl.config")
        from bot_grpo_verl.driver import adapt_main_ppo

        adapt_main_ppo(sys.modules.get("__main__"))
