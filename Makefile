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
system-deps: ## Install iperf3/iperf/iproute2/QEMU from Debian when root (no-op otherwise)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  for p in iperf3:iperf3 iperf:iperf ip:iproute2 tc:iproute2 ethtool:ethtool qemu-system-x86_64:qemu-system-x86 cpio:cpio dpkg-deb:dpkg; do \
	    command -v $${p%%:*} >/dev/null || missing="$$missing $${p##*:}"; \
	  done; \
	  if [ -n "$$missing" ]; then \
	    echo "installing from Debian:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	else \
	  command -v iperf3 >/dev/null || echo "note: iperf3 is missing and we are not root; live tests and fresh recordings will be skipped (install: apt-get install iperf3)"; \
	  command -v qemu-system-x86_64 >/dev/null || echo "note: QEMU is missing and we are not root; vm tests will fail (install: apt-get install qemu-system-x86)"; \
	fi

$(VENV_STAMP): pyproject.toml
	@command -v $(CARGO) >/dev/null || { echo "error: cargo (Rust stable) is required to build fairlab's core; install it with rustup or apt-get install cargo"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2" numpy pandas pyarrow duckdb pydantic typer rich matplotlib jinja2 distributed pyroute2 pyelftools pytest hypothesis scipy
	@touch $@

$(CORE_STAMP): $(VENV_STAMP) $(RUST_SOURCES) $(PY_SOURCES) pyproject.toml
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(MATURIN) develop --release --quiet --extras dev
	@touch $@

LINKEM := target/release/linkem
$(LINKEM): $(RUST_SOURCES)
	$(CARGO) build --release -p linkem
	@touch $@

# The DCCP traffic generator the vm backend copies into its guest image: a static
# x86_64 binary (no libc needed in the guest), with build paths remapped so the
# image does not depend on where the checkout lives (docs/dccpgen.md).
DCCPGEN_TARGET := x86_64-unknown-linux-gnu
DCCPGEN := target/$(DCCPGEN_TARGET)/release/fairlab-dccpgen
$(DCCPGEN): $(RUST_SOURCES)
	RUSTFLAGS='-C target-feature=+crt-static --remap-path-prefix=$(CURDIR)=. --remap-path-prefix=$(HOME)=~' \
	  $(CARGO) build --release -p dccpgen --target $(DCCPGEN_TARGET)
	@touch $@

.PHONY: dccpgen
dccpgen: $(DCCPGEN) ## Build the static DCCP traffic generator for the vm guest (target/x86_64-unknown-linux-gnu/release/fairlab-dccpgen)

.PHONY: install
install: $(CORE_STAMP) $(LINKEM) $(DCCPGEN) ## Create .venv, build the Rust core, linkem and fairlab-dccpgen, install fairlab into it

.PHONY: wheel
wheel: $(VENV_STAMP) ## Build dist/: a wheel that carries linkem and fairlab-dccpgen, and the sdist (pip install either)
	@# buildsys/fairlab_build.py is also the PEP 517 backend `pip install .` uses; here it
	@# stages the helper binaries for `maturin build` and removes the copies whatever the build's outcome.
	$(PY) buildsys/fairlab_build.py stage
	$(MATURIN) build --release --out dist; rc=$$?; $(PY) buildsys/fairlab_build.py unstage; exit $$rc
	$(MATURIN) sdist --out dist
	@ls -l dist

.PHONY: vm-image
vm-image: install ## Build (or find) the vm backend's guest image: Debian packages, no root; cached under ~/.cache/fairlab/vm
	@# apt-get download needs the package lists; a fresh machine may have none yet.
	@if [ "$$(id -u)" = 0 ] && ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then apt-get update -qq; fi
	$(VENV)/bin/fairlab vm build

.PHONY: test
test: system-deps install vm-image test-rs test-py ## Run every Rust and Python test

.PHONY: test-rs
test-rs: ## Rust tests (optimised build; the engine's fidelity tests are long in debug)
	$(CARGO) test --workspace --exclude fairlab-pybind --profile test-opt
	@# STYLE.md §11: the engine must never depend on PyO3.
	@if $(CARGO) tree -p netsim --edges normal 2>/dev/null | grep -q pyo3; then echo "error: crates/netsim depends on pyo3"; exit 1; fi

.PHONY: test-py
test-py: install ## Python tests (the slowest named at the end)
	$(PY) -m pytest -q --durations=15

.PHONY: demo
demo: system-deps install ## Build, then reproduce seed 001 (CCID2 vs NewReno/BIC/CUBIC) in quick form and write its report
	$(VENV)/bin/fairlab reproduce bhatti2008-dccp --quick --out $(OUT)/bhatti2008-dccp-quick
	@echo "open $(OUT)/bhatti2008-dccp-quick/report.html (or report.md) to see the tables and figures"

.PHONY: bench
bench: install ## Benchmarks (simulator S1-S4 and 64 flows vs the previous build, metrics, analysis/plan/start-up at scale, linkem, campaign); record figures in bench/RESULTS.md
	@# The engine with the defaults users run (host jitter on), side by side with the
	@# build before issue 15 (BENCH_BASE=<git ref> to choose another; HTSIM=<binary>
	@# adds csg-htsim, see bench/htsim_dumbbell.cpp).
	$(PY) bench/bench_engine.py $(if $(BENCH_BASE),--base $(BENCH_BASE)) $(if $(HTSIM),--htsim $(HTSIM))
	$(PY) bench/bench_metrics.py
	$(PY) bench/bench_analysis.py
	@if [ -f bench/bench_s4.py ]; then $(PY) bench/bench_s4.py; fi
	@if [ "$$(id -u)" = 0 ]; then bash crates/linkem/bench/bench_linkem.sh; else echo "linkem benchmark skipped: needs root for network namespaces"; fi
	$(PY) bench/bench_campaign.py
	$(PY) bench/bench_vm.py
	$(PY) bench/bench_ingest.py

.PHONY: validate
validate: install vm-image ## Full paper reproductions, the sim-vs-kernel grid (many hours) and the long hostile-input fuzz run; compare with docs/validation.md
	@mkdir -p $(OUT) && rm -f $(OUT)/fuzz-inputs.txt
	FAIRLAB_FUZZ=long FAIRLAB_FUZZ_REPORT=$(OUT)/fuzz-inputs.txt $(PY) -m pytest -q tests/test_fuzz_ingest.py tests/test_fuzz_scenario_cli.py
	@awk '{n += $$NF} END {print "fuzz: " n " hostile inputs tried (per test: $(OUT)/fuzz-inputs.txt)"}' $(OUT)/fuzz-inputs.txt
	@for p in $$($(PY) -c "from fairlab.presets import PRESETS; print(' '.join(PRESETS))"); do \
	  echo "== $$p"; $(VENV)/bin/fairlab reproduce $$p --out $(OUT)/validate/$$p || exit 1; \
	done
	@# The seeds on the real kernel (docs/validation.md): every preset Linux can run.
	@for p in bhatti2009-nru bhatti2008-dccp xue-10g-aqm; do \
	  echo "== $$p (vm)"; $(VENV)/bin/fairlab reproduce $$p --backend vm --out $(OUT)/validate/$$p-vm || exit 1; \
	done
	@# The simulator held against every shipped kernel cell (make test checks the core slice).
	FAIRLAB_GRID=full $(PY) -m pytest -q tests/test_validation_grid.py -k keeps_its_agreement
	@# The grid on both backends; the kernel's side refreshes the shipped data (docs/validation/vm.md).
	$(VENV)/bin/fairlab validate --subset full --backend both --out $(OUT)/validate/grid \
	  --record python/fairlab/validation/data/vm-grid.csv
	@echo "reports in $(OUT)/validate/*/report.html, the grid in $(OUT)/validate/grid/grid.md; the ns-3 cross-check is validation/ns3/ (see docs/validation.md)"

.PHONY: fmt
fmt: ## Format Rust code
	$(CARGO) fmt --all

.PHONY: clean
clean: ## Remove build outputs (keeps .venv)
	$(CARGO) clean
	rm -rf $(OUT) $(CORE_STAMP) dist
