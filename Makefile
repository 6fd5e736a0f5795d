# Two commands matter: `make figures` (every notebook -> paper_figures/) and `make test`.
# Each target bootstraps .venv from the pinned requirements (the lock; pyproject.toml holds the ranges) on first
# use and installs the project (the `helpers` package) into it in editable mode. The cluster launchers' packages
# are installed only where they run: `make setup-cluster`, and `make test` for the launcher's tests.
PY := .venv/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
REQUIREMENTS := requirements.txt requirements-cuda.txt requirements-dev.txt
STAMP := .venv/.installed-$(shell cat $(REQUIREMENTS) pyproject.toml | sha256sum | cut -c1-12)
CLUSTER_STAMP := .venv/.cluster-$(shell cat requirements-cluster.txt | sha256sum | cut -c1-12)

.PHONY: setup setup-cluster figures smoke test test-fast lint lab bench toy-model

$(STAMP): $(REQUIREMENTS) pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) $(addprefix -r ,$(REQUIREMENTS))
	$(PIP) --no-deps --no-build-isolation -e .
	rm -f .venv/.installed-* && touch $@

$(CLUSTER_STAMP): requirements-cluster.txt $(STAMP)
	$(PIP) -r requirements-cluster.txt
	rm -f .venv/.cluster-* && touch $@

setup: $(STAMP)

setup-cluster: $(CLUSTER_STAMP)

figures: setup
	$(PY) -m helpers.run

smoke: setup
	$(PY) -m helpers.run --smoke

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint setup-cluster
	$(PY) -m pytest -q

# engine, statistics, bad inputs, parameters, cache: every test but the notebooks, browser and slow ones
test-fast: lint
	$(PY) -m pytest -q -m "not notebooks and not browser and not slow"

# JupyterLab at the repository root, opened on the published executed notebooks; the sources in
# notebooks/ are paired .py <-> .ipynb (jupytext). --allow-root: containers often run as root.
lab: setup
	$(PY) -m jupytext --sync notebooks/[0-9][0-9]_*.py
	$(PY) -m jupyter lab --allow-root --ServerApp.root_dir=. --ServerApp.default_url=/lab/tree/paper_figures/notebooks

bench: setup
	$(PY) -m bench.bench_heads
	$(PY) -m bench.bench_figures
	$(PY) -m bench.bench_floor
	$(PY) -m bench.bench_checks

# make toy-model                     the default Qwen3-VL toy (helpers/toy/model): its chain of 4 runs, 235 min
# make toy-model FAMILY=qwen2_vl     one further toy (helpers/toy/models/qwen2vl); ARGS="--seed 1 --name ..." for more
toy-model: setup
	$(if $(FAMILY)$(ARGS),$(PY) -m helpers.toy.train $(if $(FAMILY),--family $(FAMILY)) $(ARGS),$(PY) -m helpers.toy.chain)
