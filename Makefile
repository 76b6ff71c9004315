# fairlab — every target has a `##` description; `make help` lists them.
# The two Quick-start commands are `make demo` and `make test`. Both install what
# they need (a .venv with the Python deps, the compiled core, iperf3 via apt when
# root) and are safe to run again.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
MATURIN := $(VENV)/bin/maturin
CARGO ?= cargo
OUT ?= out

# Stamp files make the install steps idempotent and cheap on re-runs.
VENV_STAMP := $(VENV)/.fairlab-deps
CORE_STAMP := $(VENV)/.fairlab-core
RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml
PY_SOURCES := $(shell find python -name '*.py' 2>/dev/null)

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

.PHONY: system-deps
system-deps: ## Install iperf3/iperf/iproute2 from Debian when root (no-op otherwise)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  for p in iperf3:iperf3 iperf:iperf ip:iproute2 tc:iproute2 ethtool:ethtool; do \
	    command -v $${p%%:*} >/dev/null || missing="$$missing $${p##*:}"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing from Debian:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	else \
	  command -v iperf3 >/dev/null || echo "note: iperf3 is missing and we are not root; live tests and fresh recordings will be skipped (install: apt-get install iperf3)"; \
	fi

$(VENV_STAMP): pyproject.toml
	@command -v $(CARGO) >/dev/null || { echo "error: cargo (Rust stable) is required to build fairlab's core; install it with rustup or apt-get install cargo"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2" numpy pandas pyarrow duckdb pydantic typer rich matplotlib distributed pyroute2 pytest hypothesis scipy
	@touch $@

$(CORE_STAMP): $(VENV_STAMP) $(RUST_SOURCES) $(PY_SOURCES) pyproject.toml
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(MATURIN) develop --release --quiet --extras dev
	@touch $@

LINKEM := target/release/linkem
$(LINKEM): $(RUST_SOURCES)
	$(CARGO) build --release -p linkem
	@touch $@

.PHONY: install
install: $(CORE_STAMP) $(LINKEM) ## Create .venv, build the Rust core and linkem, install fairlab into it

.PHONY: test
test: system-deps install test-rs test-py ## Run every Rust and Python test

.PHONY: test-rs
test-rs: ## Rust tests (optimised build; the engine's fidelity tests are long in debug)
	$(CARGO) test --workspace --exclude fairlab-pybind --profile test-opt
	@# STYLE.md §11: the engine must never depend on PyO3.
	@if $(CARGO) tree -p netsim --edges normal 2>/dev/null | grep -q pyo3; then echo "error: crates/netsim depends on pyo3"; exit 1; fi

.PHONY: test-py
test-py: install ## Python tests
	$(PY) -m pytest -q

.PHONY: demo
demo: system-deps install ## Build, then reproduce seed 001 (CCID2 vs NewReno/BIC/CUBIC) in quick form and write its report
	$(VENV)/bin/fairlab reproduce bhatti2008-dccp --quick --out $(OUT)/bhatti2008-dccp-quick
	@echo "open $(OUT)/bhatti2008-dccp-quick/report.html (or report.md) to see the tables and figures"

.PHONY: bench
bench: install ## Benchmarks (simulator S1-S4, metrics, linkem, campaign); record figures in bench/RESULTS.md
	$(CARGO) run --profile profiling -p netsim --example bench
	$(PY) bench/bench_metrics.py
	@if [ -f bench/bench_s4.py ]; then $(PY) bench/bench_s4.py; fi
	@if [ "$$(id -u)" = 0 ]; then bash crates/linkem/bench/bench_linkem.sh; else echo "linkem benchmark skipped: needs root for network namespaces"; fi
	$(PY) bench/bench_campaign.py
	$(PY) bench/bench_ingest.py

.PHONY: validate
validate: install ## Full paper reproductions (hours) and the long hostile-input fuzz run; compare with docs/validation.md
	@mkdir -p $(OUT) && rm -f $(OUT)/fuzz-inputs.txt
	FAIRLAB_FUZZ=long FAIRLAB_FUZZ_REPORT=$(OUT)/fuzz-inputs.txt $(PY) -m pytest -q tests/test_fuzz_ingest.py tests/test_fuzz_scenario_cli.py
	@awk '{n += $$NF} END {print "fuzz: " n " hostile inputs tried (per test: $(OUT)/fuzz-inputs.txt)"}' $(OUT)/fuzz-inputs.txt
	@for p in $$($(PY) -c "from fairlab.presets import PRESETS; print(' '.join(PRESETS))"); do \
	  echo "== $$p"; $(VENV)/bin/fairlab reproduce $$p --out $(OUT)/validate/$$p || exit 1; \
	done
	@echo "reports in $(OUT)/validate/*/report.html; the ns-3 cross-check is validation/ns3/ (see docs/validation.md)"

.PHONY: fmt
fmt: ## Format Rust code
	$(CARGO) fmt --all

.PHONY: clean
clean: ## Remove build outputs (keeps .venv)
	$(CARGO) clean
	rm -rf $(OUT) $(CORE_STAMP)
