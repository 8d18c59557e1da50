"""Without the optional extra ([judge]: openai) the plugin and every reward import and the arithmetic reward scores;
the judge names the extra when it is used. (math-verify and httpx are requirements, not extras: every arithmetic
answer is checked with math-verify, and transformers imports httpx.)"""

import subprocess
import sys
import textwrap

# A fresh interpreter in which the extras' packages cannot be imported, as after `pip install bot-grpo-verl`.
WITHOUT_EXTRAS = textwrap.dedent(
    """
    import importlib.abc, sys
    class NoExtras(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "openai":
                raise ImportError(f"No module named {name!r}")
    sys.meta_path.insert(0, NoExtras())
    """
)


def run_without_extras(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS + textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )


def test_the_plugin_and_the_arithmetic_reward_import_without_extras():
    done = run_without_extras(
        """
        import bot_grpo_verl.plugin
        from bot_grpo_verl.rewards import arithmetic_steps, math_prm, react_judge, react_tsx, tool_arithmetic
        print(arithmetic_steps.compute_score("arithmetic", "2 + 2 = 4", "4")["score"])
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] in ("0.0", "1.0")


def test_the_judge_names_its_extra():
    done = run_without_extras(
        """
        for load in (lambda: __import__("bot_grpo_verl.rewards.react_judge", fromlist=["x"]).require_openai(),):
            try:
                load()
                print("imported")
            except ImportError as error:
                print(error)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "pip install 'bot-grpo-verl[judge]'" in lines[0], lines
