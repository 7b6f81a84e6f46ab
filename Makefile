# netsum: the README's two commands are `make demo` and `make test`; both set up first.
VENV   ?= .venv
PY      = $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test typecheck p4 bench clean container-test

setup:
	@scripts/setup.sh

demo: setup
	$(VENV)/bin/netsum demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory typecheck

# The unit and unprivileged end-to-end tiers and the demo inside the Containerfile's image
# (scripts/container-tier.sh --help: forms, a fresh image store); needs no .venv on the host.
container-test:
	@scripts/container-tier.sh $(CONTAINER_ARGS)

# mypy over the packages listed in pyproject.toml's [tool.mypy] `files`.
typecheck: setup
	$(PY) -m mypy

# Compile every P4 program under p4/ with netsum's compiler (outputs in build/p4/).
p4: setup
	$(PY) -m netsum.build

# The scripts that compare two revisions (commits.py, *_trees.py) need them named: not run here.
bench: setup
	@for b in $$(ls benchmarks/*.py | grep -v -e '/commits\.py$$' -e '_trees\.py$$') tests/soak.py; do \
		echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf build .pytest_cache
