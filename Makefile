# cronsvc: one command to run the platform, one to run the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8000
# Every link make run's processes send (ping, badge, notification, SSO callback URLs) uses
# this; honcho gives each Procfile line its own PORT, so it is set once here for all of them.
SITE_URL ?= http://127.0.0.1:$(PORT)
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/cronsvc
TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0

.PHONY: run test install install-dev bench-peers services browser sandbox containers model-checker faketime promtool pgbouncer wrk bench soak clean

# Install only when the requirement files change (a stamp per file set).
$(BIN)/.base-installed: requirements/base.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements/base.txt
	touch $@

$(BIN)/.dev-installed: $(BIN)/.base-installed requirements/dev.txt client/pyproject.toml
	$(BIN)/python -m pip install --quiet -r requirements/dev.txt
	touch $@

$(BIN)/.bench-installed: $(BIN)/.dev-installed requirements/bench.txt
	$(BIN)/python -m pip install --quiet -r requirements/bench.txt
	touch $@

install: $(BIN)/.base-installed
install-dev: $(BIN)/.dev-installed

## make run: the whole platform on embedded defaults (SQLite + filesystem broker).
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	SITE_URL=$(SITE_URL) $(BIN)/python manage.py bootstrap_demo
	rm -rf var/prometheus && mkdir -p var/prometheus
	PORT=$(PORT) SITE_URL=$(SITE_URL) PROMETHEUS_MULTIPROC_DIR="$(CURDIR)/var/prometheus" PATH="$(CURDIR)/$(BIN):$$PATH" \
		$(BIN)/honcho start -f Procfile.embedded

## make test: the whole suite on real PostgreSQL and Redis (started if not running).
test: install-dev services browser sandbox containers model-checker faketime promtool pgbouncer
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) SECRET_KEY=test-only-not-secret \
		PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest

services:
	scripts/ensure-services.sh

# The browser tests drive Debian's Chromium (Playwright's own browser download does not work here).
browser:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# Script jobs run under bubblewrap (cronsvc/sandbox/); its seccomp filter needs libseccomp2.
# curl: the egress tests run it inside the sandbox, as a customer's shell script would.
sandbox:
	(command -v bwrap && command -v curl) >/dev/null || (apt-get update && apt-get install -y bubblewrap libseccomp2 curl)

# The image tests (tests/operations/test_image.py) build the Dockerfile with Debian's podman
# (as root, with runc: deploy/podman/containers.conf) from a base image that debootstrap makes
# here (scripts/build-base-image.sh: no image registry is reachable), run its containers
# (catatonit is podman's --init, compose's `init: true`), and bring docker-compose.yml up with
# podman-compose (PyPI's, requirements/dev.txt); Debian's docker-compose validates the file.
containers:
	(command -v podman && command -v runc && command -v catatonit && command -v debootstrap \
	  && command -v docker-compose) >/dev/null \
	  || (apt-get update && apt-get install -y podman runc catatonit debootstrap docker-compose)

# The model of a run's life (docs/model/run_life.pml) is checked by Debian's spin, whose
# verifier is C compiled with gcc (tests/foundation/test_run_model.py).
model-checker:
	(command -v spin && command -v gcc) >/dev/null || (apt-get update && apt-get install -y spin gcc)

# The one-clock test (tests/scheduler/test_faketime.py) and the soak's clock faults
# (SOAK_EXTRA_FAULTS clock, jump) run a scheduler whose clock is skewed and jumps, with Debian's libfaketime.
faketime:
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || (apt-get update && apt-get install -y faketime)

# /metrics passes Prometheus's own linter, `promtool check metrics` (tests/observability/test_promtool.py),
# shipped by Debian's prometheus package; its server is stopped and disabled (the tests need only promtool).
promtool:
	command -v promtool >/dev/null || (apt-get update && apt-get install -y --no-install-recommends prometheus \
		&& ((systemctl disable --now prometheus || service prometheus stop) >/dev/null 2>&1 || true))

# The tests behind PgBouncer (tests/support/pgbouncer.py, docs/operations.md "Behind PgBouncer") start
# Debian's pgbouncer themselves, on a free port with their own ini; the package's own service
# (port 6432) is stopped and disabled.
pgbouncer:
	test -x /usr/sbin/pgbouncer || (apt-get update && apt-get install -y pgbouncer \
		&& ((systemctl disable --now pgbouncer || service pgbouncer stop) >/dev/null 2>&1 || true))

# The API benchmark (bench/bench_api.py) drives the web process with Debian's wrk.
wrk:
	command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)

# The scheduler benchmark's peers (bench/bench_scheduler.py): celery-redbeat from PyPI
# (requirements/bench.txt) and BullMQ from npm, installed from its lock file in bench/peers/bullmq.
bench-peers: $(BIN)/.bench-installed bench/peers/bullmq/node_modules/.package-lock.json

bench/peers/bullmq/node_modules/.package-lock.json: bench/peers/bullmq/package-lock.json
	command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	cd bench/peers/bullmq && npm ci --no-audit --no-fund

## make bench: every benchmark in bench/ (each uses its own database and Redis index) and the
## chaos soak; writes bench/RESULTS.md (figures, machine, date, commit).
bench: install-dev bench-peers services wrk
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/results.py

## make soak: the chaos soak (SOAK_SECONDS, default 600) on its own PostgreSQL and Redis.
SOAK_SECONDS ?= 600
soak: install-dev faketime
	PATH="$(CURDIR)/$(BIN):$$PATH" SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m soak

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
