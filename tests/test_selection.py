"""What a run's selection of the plugin runs, in one process: the hooks once, a failing hook loudly; which
environment selects it; and what every preset of the plugin passes to the run's Ray workers."""

import pytest
from conftest import verl_config

from bot_grpo_verl import selection


@pytest.fixture
def fresh(monkeypatch):
    """This process as if no run had selected the plugin yet, with no hooks."""
    monkeypatch.setattr(selection, "_hooks", [])
    monkeypatch.setattr(selection, "_selected", False)


def test_hooks_run_once_on_the_first_selection_and_at_once_when_installed_after_it(fresh):
    calls = []
    selection.on_selection(lambda: calls.append("early"))
    assert calls == [] and not selection.is_selected()
    selection.select()
    selection.select()
    assert calls == ["early"] and selection.is_selected()
    selection.on_selection(lambda: calls.append("late"))
    assert calls == ["early", "late"]


def test_a_failing_hook_raises_in_the_caller(fresh):
    def broken():
        raise RuntimeError("verl changed")

    selection.on_selection(broken)
    estimator = selection.selecting(lambda: "advantages", late=lambda: None)
    for _ in range(2):  # every call, not the first one only
        with pytest.raises(RuntimeError, match="verl changed"):
            estimator()
    assert not selection.is_selected()


def test_selecting_gives_the_same_wrapper_for_the_same_function(fresh):
    def estimator():
        return 1

    def late():
        return None

    assert selection.selecting(estimator, late) is selection.selecting(estimator, late)
    assert selection.selecting(estimator, late).__wrapped__ is estimator and selection.selecting(estimator, late)() == 1


def test_late_runs_only_when_the_call_is_the_one_that_selects(fresh):
    calls = []
    estimator = selection.selecting(lambda: calls.append("estimate"), late=lambda: calls.append("late"))
    estimator()
    estimator()
    assert calls == ["late", "estimate", "estimate"]


def test_late_does_not_run_when_the_environment_selected_first(fresh):
    calls = []
    estimator = selection.selecting(lambda: calls.append("estimate"), late=lambda: calls.append("late"))
    selection.select()
    estimator()
    assert calls == ["estimate"]


@pytest.mark.parametrize(("value", "selects"), [(None, False), ("", False), ("0", False), ("1", True), (" 1 ", True)])
def test_the_environment_selects_with_1_only(value, selects):
    assert selection.requested({} if value is None else {selection.ENV_VAR: value}) is selects


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_any_other_value_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=f"BOT_GRPO_SELECTED='{value}': set it to 1"):
        selection.requested({selection.ENV_VAR: value})


@pytest.mark.parametrize(
    ("presets", "expected"),
    [
        ("bot_grpo", {"BOT_GRPO_SELECTED": "1"}),
        ("pure", {"BOT_GRPO_SELECTED": "1"}),
        ("cpu", {"BOT_GRPO_CPU": "1", "TQ_NUM_THREADS": "1"}),
        ("[bot_grpo,cpu]", {"BOT_GRPO_SELECTED": "1", "BOT_GRPO_CPU": "1", "TQ_NUM_THREADS": "1"}),
    ],
)
def test_every_preset_selects_the_plugin_in_the_runs_ray_workers(presets, expected):
    env_vars = verl_config(f"+preset={presets}").ray_kwargs.ray_init.runtime_env.env_vars
    assert dict(env_vars) == expected
