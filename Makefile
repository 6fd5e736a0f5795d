# Two commands matter: `make figures` (every notebook -> paper_figures/) and `make test`.
# Each target bootstraps .venv from the pinned requirements on first use.
PY := .venv/bin/python
STAMP := .venv/.installed-$(shell sha256sum requirements.txt | cut -c1-12)

.PHONY: setup figures test lab bench toy-model

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	rm -f .venv/.installed-* && touch $@

setup: $(STAMP)

figures: setup
	$(PY) -m helpers.run

test: setup
	$(PY) -m pytest -q

lab: setup
	$(PY) -m jupytext --sync notebooks/[0-9][0-9]_*.py
	$(PY) -m jupyter lab notebooks

bench: setup
	$(PY) -m bench.bench_heads

toy-model: setup
	$(PY) -m helpers.toy.train
