# Two commands on a fresh machine: `make demo` and `make test` (README.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export PYSPARK_PYTHON := $(abspath $(PY))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: test test-all demo up integration soak postgres protos readme install clean bench browser sql-clients sysbench \
	bench-sysbench

test: $(STAMP) protos browser postgres sql-clients
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: $(STAMP) protos browser postgres sql-clients
	$(PY) -m pytest $(PYTEST_ARGS)

# Headless Chromium draws the Replication page in its test (Debian's package, as root or with
# passwordless sudo; apt lists are refreshed only when the first try fails; apt's output is shown
# when both fail).
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "installing Debian's chromium (the Replication page test draws the page in it)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); log=$$(mktemp); \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y -q chromium >$$log 2>&1 \
	  || { $$SUDO apt-get update -q >>$$log 2>&1 && $$SUDO apt-get install -y -q chromium >>$$log 2>&1; } \
	  || { tail -n 20 $$log >&2; echo "error: headless Chromium is needed by make test: apt-get install chromium" >&2; exit 2; }; }

# Debian packages installed like the browser above when missing: the MariaDB command-line client
# and tmux for the interactive-client test of the simulator's SQL front (make test), sysbench for
# bench-sysbench.
define apt_install
	@SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); log=$$(mktemp); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y -q $(1) >$$log 2>&1 \
	  || { $$SUDO apt-get update -q >>$$log 2>&1 && $$SUDO apt-get install -y -q $(1) >>$$log 2>&1; } \
	  || { tail -n 20 $$log >&2; echo "error: $(2) needs: apt-get install $(1)" >&2; exit 2; }
endef

sql-clients:
	@command -v mariadb >/dev/null && command -v tmux >/dev/null || \
	  echo "installing Debian's mariadb-client and tmux (the SQL front's interactive-client test)"
	$(if $(shell command -v mariadb && command -v tmux),,$(call apt_install,mariadb-client tmux,make test))

sysbench: sql-clients
	$(if $(shell command -v sysbench),,$(call apt_install,sysbench,make bench-sysbench))

# sysbench oltp_write_only through the simulator's SQL front for 60 s, then tidelake pull, merge
# and verify with every replica matching (bench/README.md#what-each-bench-measures).
bench-sysbench: $(STAMP) sysbench
	$(PY) bench/bench_sysbench.py --time 60

# Small default sizes, ~7 minutes on 2 busy cores (most of it Spark); see bench/README.md. Each
# bench's JSON goes to BENCH_OUT; bench/check_floors.py then fails the target when a figure falls
# past its floor in bench/floors.toml.
BENCH_OUT ?= .bench
bench: $(STAMP)
	rm -rf $(BENCH_OUT) && mkdir -p $(BENCH_OUT)
	$(PY) bench/bench_sim.py --ops 200 --big-rows 100000 --json $(BENCH_OUT)/sim.json
	$(PY) bench/bench_puller.py --rows 40000 --repeats 3 --json $(BENCH_OUT)/puller.json
	$(PY) bench/bench_lander.py --sizes 10000 --repeats 3 --no-spark
	$(PY) bench/bench_lag.py --duration 20 --backlog-rows 100000 --txn-rows 20000 --txns 3 --txn-hold 1 \
		--merge-on-driver --json $(BENCH_OUT)/lag.json
	$(PY) bench/bench_merge.py --rows 10000 --json $(BENCH_OUT)/merge.json
	$(PY) bench/bench_scale.py --tables 100 --regions 1000 --steady 20 --history-flushes 100 \
		--json $(BENCH_OUT)/scale.json
	$(PY) bench/bench_iceberg_publish.py --tables 5,50 --runs 1 --json $(BENCH_OUT)/iceberg_publish.json
	$(PY) bench/bench_freshness.py --tables 10 --rate 50 --duration 20 --json $(BENCH_OUT)/freshness.json
	$(PY) bench/bench_freshness.py --tables 100 --rate 500 --duration 20 --merger follow \
		--json $(BENCH_OUT)/freshness_follow.json
	$(PY) bench/bench_log_reads.py --versions 20,110 --repeats 3 --json $(BENCH_OUT)/log_reads.json
	$(PY) bench/bench_freshness_cost.py --tables 100 --passes 20 --repeats 3 --json $(BENCH_OUT)/freshness_cost.json
	$(PY) bench/check_floors.py $(BENCH_OUT)

# The production path on this machine: simulator -> Airflow (puller + merge DAGs, Spark) -> verify.
# `make up` keeps it running for the UI until Ctrl-C. `tidelake demo` is the one-process variant.
DEMO_ARGS ?=

demo: $(STAMP) protos
	$(PY) -m tidelake.demos.on_airflow $(DEMO_ARGS)

up: $(STAMP) protos
	$(PY) -m tidelake.demos.on_airflow --keep-running $(DEMO_ARGS)

# The production parts on loopback: S3 API server, PostgreSQL, a Spark standalone master and worker,
# Airflow (LocalExecutor), the puller, merges, a syncpoint, a bootstrap, maintenance and verify on an
# s3:// lake with two puller shards and the S3 endpoint killed for 10 s (tidelake/demos/integration.py).
# Airflow runs from a fresh venv holding a wheel of this tree, its DAGs from a 3-line DAG file, and
# headless Chromium checks the UI's tidb_pd connection form (docs/internals.md#integration).
# INTEGRATION_ARGS=--local-spark runs the Spark jobs on local[*] instead of the cluster.
INTEGRATION_ARGS ?=

integration: $(STAMP) protos postgres browser
	$(PY) -m tidelake.demos.integration $(INTEGRATION_ARGS)

# The integration's stack for SOAK_ARGS (default --minutes 120), a fault every few minutes,
# memory and lag charted: docs/operations.md#soak.
soak: $(STAMP) protos postgres browser
	$(PY) -m tidelake.demos.soak $(SOAK_ARGS)

# Airflow's metadata DB in `make integration` (and tests/demos/test_postgres.py) is Debian's
# PostgreSQL server, installed like the browser above when missing; the integration and the test
# run their own throwaway clusters, so the cluster the package creates and starts is stopped.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing Debian's postgresql (Airflow's metadata DB in make test and make integration)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql"; \
	  $$APT >/dev/null 2>&1 || { $$SUDO apt-get update -q >/dev/null 2>&1 && $$APT >/dev/null 2>&1; } \
	  || { echo "error: make test and make integration need PostgreSQL: apt-get install postgresql" >&2; exit 2; }; \
	  $$SUDO sh -c 'pg_lsclusters -h | while read version cluster rest; do pg_ctlcluster "$$version" "$$cluster" stop; done' \
	  || true; }

install: $(STAMP)

# Venv + pinned deps. The Spark provider pulls pyspark-client, which shares pyspark's files,
# so the full pyspark is force-reinstalled last (docs/stack.md#the-spark-provider-installs-pyspark-client-which-overwrites-pyspark).
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 2; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[airflow,dev]'
	@# setuptools also leaves the metadata it built in the checkout: with the checkout on sys.path
	@# (a command's cwd, pytest's rootdir) Airflow would see tidelake twice and load its plugin twice.
	rm -rf tidelake.egg-info
	$(PY) -m pip install --quiet --force-reinstall --no-deps pyspark==4.2.0
	$(PY) -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '4.2.0' else 'pyspark is ' + v)"
	@touch $(STAMP)

# Generated gRPC/protobuf code is committed (pip installs from git need no protoc); this
# regenerates it deterministically, and CI fails if the committed copy differs.
protos: $(STAMP)
	$(PY) tools/gen_protos.py

clean:
	rm -rf $(VENV) .pytest_cache

readme: $(STAMP)
	$(PY) tools/update_readme.py
