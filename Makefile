# crdscope: `make demo` and `make test` work on a fresh machine (Python 3.11+, Go, root for apt).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# `make test` runs the suite on WORKERS pytest-xdist workers (0: in one process); tests/scheduling.py
# says how they share the machine. It ends with the 25 slowest tests.
WORKERS ?= 2

.PHONY: venv lab-binaries system-deps lint test demo bench soak clean-venv

# --clear: a first run interrupted while the venv was made (no pip in it yet) starts over.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# kube-apiserver and etcd from Go modules (lab/go.mod), cached in ~/.cache/crdscope; also the
# oldest supported Kubernetes (1.26), which the version tests (tests/e2e/test_versions.py) run, one
# minor in between (1.33) and the newest pre-release (1.38, with the Go toolchain its go.mod asks for,
# fetched by the go command from the module proxy): tests/e2e/test_every_minor.py runs every built
# minor; and Crossplane's core (v2.4.2), CLI and registry (v2.0.0's module: the CLI left the core
# after it) with kube-controller-manager for its provider Deployments (toolchain/; test_crossplane.py).
lab-binaries: venv
	$(BIN)/crdscope lab build --crossplane
	$(BIN)/crdscope lab build --kubernetes 1.26
	$(BIN)/crdscope lab build --kubernetes 1.33
	$(BIN)/crdscope lab build --kubernetes 1.38

# Debian packages the end-to-end tests use as real components (Prometheus server, tmux, haproxy, chromium).
system-deps:
	@bash lab/system-deps.sh

# The project's folders (probes/, tui/, ...) install as the `crdscope` namespace; mypy and
# import-linter read that namespace from a tree of links to them (kept inside the venv).
NAMESPACE := $(VENV)/namespace
PACKAGES  := base cli connection toolchain probes loader lab session findings costmodel themes tui

lint: venv
	$(BIN)/ruff check .
	@mkdir -p $(NAMESPACE)/crdscope
	@for d in $(PACKAGES); do ln -sfn $(CURDIR)/$$d $(NAMESPACE)/crdscope/$$d; done
	cd $(NAMESPACE) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p crdscope
	cd $(NAMESPACE) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --no-cache $(CURDIR)/pyproject.toml

test: venv lint lab-binaries system-deps
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

# `make demo`: the lab (the newest Kubernetes only) and the monitor, whose loader (`l`) imitates an
# install.  `make demo CROSSPLANE=1 [PROVIDER=SRC]`: also Crossplane's core, CLI and registry, and a
# real provider install through it (default ../shared/crds/provider-gcp.tar.xz, else synthetic:800, a
# provider family crdscope generates); it builds only that.
# `make demo FLEET=1 [CROSSPLANE=1] [PROVIDER=SRC]`: `crdscope demo`, the same provider into a capped
# 1.26 lab and a 1.37 lab, compared side by side; it builds both Kubernetes versions, and Crossplane
# only with CROSSPLANE=1 (without it, the demo uses Crossplane when built, else crdscope's loader).
# `lab build` says first what it will build and about how long on this machine (lab/buildplan.py).
# `make demo REPLAY=1 [SPEED=N]`: that demo as recorded, told again (`crdscope demo --replay`): no build, no lab.
ifdef REPLAY
demo: venv
	$(BIN)/crdscope demo --replay $(if $(SPEED),--speed $(SPEED))
	@$(SAY_HOW_TO_RUN)
else ifdef FLEET
demo: venv
	$(BIN)/crdscope lab build --kubernetes 1.37 --kubernetes 1.26 $(if $(CROSSPLANE),--crossplane)
	$(BIN)/crdscope demo $(if $(CROSSPLANE),--crossplane) $(if $(PROVIDER),--provider $(PROVIDER))
	@$(SAY_HOW_TO_RUN)
else
demo: venv
	$(BIN)/crdscope lab build $(if $(CROSSPLANE),--crossplane)
	$(BIN)/crdscope lab $(if $(CROSSPLANE),--crossplane $(if $(PROVIDER),--provider $(PROVIDER)))
	@$(SAY_HOW_TO_RUN)
endif
# crdscope lives in the virtualenv, not on PATH (nothing is installed system-wide): say how to run it.
SAY_HOW_TO_RUN = echo "crdscope is installed in $(BIN): run $(BIN)/crdscope, or 'source $(BIN)/activate' to type crdscope"

bench: venv lab-binaries system-deps
	$(BIN)/python -m bench
	$(BIN)/python -m bench versions
	$(BIN)/python -m bench footprint --kubernetes 1.37,1.26
	$(BIN)/python -m bench request_cost --kubernetes 1.26
	$(BIN)/python -m bench crossplane --kubernetes 1.37,1.26

soak: venv lab-binaries system-deps
	$(BIN)/python -m pytest -m "soak or slow" tests

clean-venv:
	rm -rf $(VENV)
