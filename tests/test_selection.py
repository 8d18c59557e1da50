"""What a run's selection of the plugin runs, in one process: the hooks once, a failing hook loudly."""

import pytest

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
    estimator = selection.selecting(lambda: "advantages")
    for _ in range(2):  # every call, not the first one only
        with pytest.raises(RuntimeError, match="verl changed"):
            estimator()
    assert not selection.is_selected()


def test_selecting_gives_the_same_wrapper_for_the_same_function(fresh):
    def estimator():
        return 1

    assert selection.selecting(estimator) is selection.selecting(estimator)
    assert selection.selecting(estimator).__wrapped__ is estimator and selection.selecting(estimator)() == 1
