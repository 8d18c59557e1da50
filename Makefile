# One entry point for users and CI. Every target creates or reuses .venv/ at the repository root.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.bot-grpo-verl-installed
# Keep pip's cache inside the project, never in the user's home.
export PIP_CACHE_DIR ?= $(CURDIR)/.cache/pip
# Progress lines: wall-clock time and seconds since this make started (no commas in messages: $(call) splits there).
STARTED := $(shell date +%s)
say = @echo "[make $$(date +%H:%M:%S) +$$(( $$(date +%s) - $(STARTED) ))s] $(1)"

.PHONY: setup demo compare token-credit-compare test lint bench check clean

$(PY):
	$(call say,set-up: creating the virtual environment $(VENV)/)
	python3 -m venv $(VENV)

# torch==2.13.0 first: it is the CPU wheel on this project's machines, and it satisfies the package's
# torch range, so pip never pulls multi-GB CUDA wheels. The compat editable mode keeps the hydra
# preset plugin (a namespace package) visible to hydra.
$(STAMP): $(PY) setup.py pyproject.toml
	$(call say,set-up 1/4: upgrading pip in $(VENV)/)
	$(PY) -m pip install --quiet --upgrade pip
	$(call say,set-up 2/4: installing torch==2.13.0 first (the CPU wheel on this project's machines))
	$(PY) -m pip install --quiet torch==2.13.0
	$(call say,set-up 3/4: installing verl 0.9.1 and this package with its test tools (the first time: minutes))
	$(PY) -m pip install --quiet -e ".[test]" --config-settings editable_mode=compat
	$(call say,set-up 4/4: checking that verl sees the plugin)
	$(PY) -m bot_grpo_verl check
	touch $(STAMP)
	$(call say,set-up: Python environment ready)

# The TSX compile and render rewards' Node packages (esbuild, typescript, @types/react, react, react-dom,
# playwright-core, source-map-js), pinned by the lock file.
TSX_STAMP := bot_grpo_verl/rewards/tsx/node_modules/.installed
$(TSX_STAMP): bot_grpo_verl/rewards/tsx/package.json bot_grpo_verl/rewards/tsx/package-lock.json
	$(call say,set-up: installing the TSX checker's Node packages from the lock file)
	npm_config_cache=$(CURDIR)/.cache/npm npm ci --prefix bot_grpo_verl/rewards/tsx --no-audit --no-fund
	touch $(TSX_STAMP)

# The React render check's browser: Debian's Chromium (no browser download at run time). As root (CI, containers)
# it is installed here; elsewhere install it yourself (sudo apt-get install chromium) or point BOT_GRPO_CHROMIUM
# at a Chromium binary.
CHROMIUM ?= $(or $(BOT_GRPO_CHROMIUM),/usr/bin/chromium)
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "PROBLEM: the React render check needs Chromium at $(CHROMIUM): sudo apt-get install chromium, or set BOT_GRPO_CHROMIUM"; \
		exit 1; \
	fi

setup: $(STAMP) $(TSX_STAMP) $(CHROMIUM)

# The main job: verl's real trainer runs BoT-GRPO with token-level compiler rewards on CPU (assets built once),
# validating on held-out prompts. DEMO_ALGORITHMS=grpo,bot_grpo runs GRPO beside it on the same seed.
DEMO_STEPS ?= 60
DEMO_ALGORITHMS ?= bot_grpo
demo: setup
	$(call say,demo: assets (built once into .cache/demo/ then reused) then $(DEMO_STEPS) training steps of $(DEMO_ALGORITHMS))
	$(PY) -m demo.run --steps $(DEMO_STEPS) --algorithms $(DEMO_ALGORITHMS) --out runs/demo

# GRPO (outcome reward) beside BoT-GRPO (token rewards), same seed, one plot.
compare: setup
	$(call say,compare: assets (built once into .cache/demo/ then reused) then $(DEMO_STEPS) steps of grpo then of bot_grpo)
	$(PY) -m demo.run --steps $(DEMO_STEPS) --algorithms grpo,bot_grpo --out runs/compare

# One seed of GRPO, BoT-GRPO and the shuffled control on the token-credit task (issue 43), with its plot.
token-credit-compare: setup
	OMP_NUM_THREADS=1 $(PY) -m benchmarks.token_credit compare --out runs/token-credit-compare

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(PY) -m pytest -p no:cacheprovider

check: setup
	$(PY) -m bot_grpo_verl check

bench: setup
	$(PY) benchmarks/estimator_speed.py --out benchmarks/results/estimator_speed.json
	$(PY) benchmarks/tsx_reward_speed.py --out benchmarks/results/tsx_reward_speed.json
	$(PY) -m benchmarks.cpu_rollout_batching --out benchmarks/results/cpu_rollout_batching.json
	$(PY) -m benchmarks.reward_path_speed --out benchmarks/results/reward_path_speed.json

clean:
	rm -rf $(VENV) .cache .pytest_cache .hypothesis
