# mrcnet: one-command set-up, tests, topology, benchmarks.
# Every target that needs the environment depends on `install`, which is idempotent.

SHELL := /bin/bash
# Debian's own interpreter when it is new enough: it is built with PGO and LTO and runs this
# project's per-packet Python faster than a plain source build (pyenv's default); see
# docs/install.md for the measurements.
PYTHON ?= $(shell /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
            2>/dev/null && echo /usr/bin/python3 || echo python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := mininet tshark ethtool iproute2 iperf3 iputils-ping nftables procps psmisc gcc \
                libc6-dev python3-dev python3-venv chromium tmux
# The web view's JavaScript (d3), pinned in mrcnet/web/js/package-lock.json, from the npm
# registry with the machine's npm; the page loads nothing else (docs/fabric.md, "Web view").
WEB_JS := mrcnet/web/js
WEB_STAMP := $(WEB_JS)/node_modules/.package-lock.json
# Mininet's Python package comes with the Debian package (which brings mnexec, the helper
# its nodes need): the venv links to it, so there is one Mininet.
MININET_PKG := /usr/lib/python3/dist-packages/mininet
# p4runtime-shell pins protobuf < 3.21 and p4runtime 1.4.1: its own virtual environment,
# used by the tests that drive the switches with it (docs/install.md).
P4SHELL_VENV ?= .venv-p4shell
P4SHELL := p4runtime-shell==0.0.6
TOPO ?= clos-2p
SWITCH ?= embedded
MODE ?= stev
ARGS ?=
PYTEST_ARGS ?=

.PHONY: install cext web-assets apt-packages test test-unit test-emulation test-stress lint topology bench clean protos p4 help

help:
	@echo "make install   set up Debian packages and the virtual environment (idempotent)"
	@echo "make test      unit + emulation tests (emulation tests need root)"
	@echo "make test-stress  fresh-clone CI runs in a row, quiet / CPU hog / no IPv6 loopback (root)"
	@echo "make lint      ruff + mypy + import-linter layer contracts"
	@echo "make protos    regenerate common/proto/ (PROTOS_ARGS=--check only compares)"
	@echo "make p4        compile p4/*.p4 with p4c into p4/*.json and p4/*.p4info.txtpb"
	@echo "make topology  bring up a fabric (TOPO=$(TOPO) SWITCH=$(SWITCH) MODE=$(MODE) ARGS=...)"
	@echo "make bench     run the benchmarks, results under results/"
	@echo "make clean     remove what the project created (venv, caches, results)"

install: $(STAMP) cext web-assets

web-assets: $(WEB_STAMP)

$(WEB_STAMP): $(WEB_JS)/package.json $(WEB_JS)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the web view's JavaScript (Debian: apt-get install npm)"; exit 1; }
	npm ci --prefix $(WEB_JS) --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $(WEB_STAMP)

# C accelerators (common/cext.py): rebuilt when their source changes, a no-op otherwise; the
# built-in P4 programs' C data paths go to the user's cache (switch/p4json/cbackend.py).
cext: $(STAMP)
	@$(PY) -m common.cext --check
	@$(PY) -m switch.p4json.cbackend --builtin --quiet

apt-packages:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run 'make install' as root)"; exit 1; fi; \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi

$(STAMP): pyproject.toml Makefile
	@$(MAKE) --no-print-directory apt-packages
	@base="$$($(PYTHON) -c 'import sys; print(sys.executable)')" || exit 1; \
	if [ -x $(PY) ] && [ "$$(cat $(VENV)/.base-python 2>/dev/null)" != "$$base" ]; then \
	  echo "recreating $(VENV) for $$base"; rm -rf $(VENV) $(P4SHELL_VENV); \
	  $(PYTHON) -m common.cext --clean; fi; \
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || exit 1; \
	echo "$$base" > $(VENV)/.base-python
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@# packages earlier versions of this venv had: PyPI's Mininet, p4runtime-shell, highspy
	@$(PY) -m pip uninstall --quiet --yes mininet p4runtime-shell highspy >/dev/null 2>&1 || true
	@site="$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"; \
	if [ -d "$$site/mininet" ] && [ ! -L "$$site/mininet" ]; then rm -rf "$$site/mininet"; fi; \
	ln -sfn $(MININET_PKG) "$$site/mininet"
	$(PY) -m pip check
	@$(PY) -c "import common.proto.p4.v1.p4runtime_pb2, grpc, pyscipopt, scapy, mininet.net, rich, aiohttp" \
	  || { echo "the virtual environment does not import together; see docs/install.md"; exit 1; }
	@test -x $(P4SHELL_VENV)/bin/python || $$(cat $(VENV)/.base-python) -m venv $(P4SHELL_VENV)
	$(P4SHELL_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(P4SHELL_VENV)/bin/python -m pip install --quiet $(P4SHELL)
	$(P4SHELL_VENV)/bin/python -m pip check
	@touch $(STAMP)
	@echo "installed: $(VENV) (Python deps), $(P4SHELL_VENV) (p4runtime-shell) and Debian packages"

# Per-packet code with a C accelerator (common/cext.py) keeps a pure-Python reference: the
# second pass runs its unit tests against the reference alone (MRCNET_PURE_PYTHON=1);
# skipped when PYTEST_ARGS selects tests.
PURE_TESTS := tests/unit/test_wire*.py tests/unit/test_bench_codec_rate.py tests/unit/test_pktio.py \
              tests/unit/test_agent_loop.py tests/unit/test_pipeline*.py tests/unit/test_p4json*.py \
              tests/unit/test_pktring.py

test: install
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	[ -z "$(PYTEST_ARGS)" ] || exit 0; \
	echo "pure-Python reference pass (MRCNET_PURE_PYTHON=1)"; \
	MRCNET_PURE_PYTHON=1 $(PY) -m pytest -q $(PURE_TESTS); rc=$$?; \
	if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

test-unit: install
	$(PY) -m pytest -m "not emulation" $(PYTEST_ARGS)

test-emulation: install
	$(PY) -m pytest -m emulation $(PYTEST_ARGS)

# Flake hunting (testbed/stress.py): ROUNDS fresh clones of one commit through .ci/run, half of
# them beside a one-core CPU hog, every other one without IPv6 loopback; STRESS_ARGS=--help.
ROUNDS ?= 6
STRESS_ARGS ?=
test-stress: install
	$(PY) -m testbed.stress --rounds $(ROUNDS) $(STRESS_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Regenerates common/proto/*_pb2*.py and the P4Runtime bindings common/proto/p4/ with the
# pinned grpcio-tools; `make protos PROTOS_ARGS=--check` only compares.
PROTOS_ARGS ?=
protos: install
	$(PY) -m common.proto.build $(PROTOS_ARGS)

# p4c (common/p4toolchain.py: P4C, P4_BIN_DIR, PATH, /opt/p4/bin) compiles p4/*.p4 into the
# committed BMv2 JSON and P4Info; `make p4 P4BUILD_ARGS=--check` only checks they are current.
P4BUILD_ARGS ?=
p4: install
	$(PY) -m common.p4build $(P4BUILD_ARGS)

topology: install
	$(VENV)/bin/mrcnet up $(TOPO) --switch $(SWITCH) --mode $(MODE) --demo $(ARGS)

bench: install
	$(VENV)/bin/mrcnet bench all --json

clean:
	-@test -x $(PY) && $(PY) -m common.cext --clean
	-@test -x $(PY) && $(PY) -m switch.p4json.cbackend --clean
	rm -rf $(VENV) $(P4SHELL_VENV) $(WEB_JS)/node_modules .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .hypothesis results/runs
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
