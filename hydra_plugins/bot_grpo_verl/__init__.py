"""Hydra search-path plugin: makes the presets of ``bot_grpo_verl/config`` visible to verl's hydra apps."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class BoTGRPOSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="bot-grpo-verl", path="pkg://bot_grpo_verl.config")
