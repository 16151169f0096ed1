# syntax=docker/dockerfile:1
# One image for every process type: the entrypoint runs the Procfile line its first argument
# names (deploy/entrypoint.sh), so `web`, `release`, `scheduler`, `worker_pro`, ... are the
# commands. docker-compose.yml runs the whole platform from it; docs/deploy.md says more.
#
# BASE_IMAGE: any Debian bookworm image with Python 3.11 and its venv module. The default is
# the registry's; where no registry is reachable, scripts/build-base-image.sh makes one from
# Debian's own packages (--build-arg BASE_IMAGE=cronsvc-base:bookworm).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- build: the pinned base requirements in a virtualenv (wheels only; no compiler needed) ---
FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
COPY requirements/base.txt /tmp/requirements/base.txt
# The optional build secret pip_ca: a CA bundle for a network whose TLS to the package index
# goes through an intercepting proxy (`--secret id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt`).
# A secret, so the bundle is used by this step only and kept in no layer.
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
 && /opt/venv/bin/pip install --requirement /tmp/requirements/base.txt

# --- runtime: the virtualenv, the code and the collected static files; a non-root user ---
FROM ${BASE_IMAGE}
# Script jobs run under bubblewrap with a seccomp filter (cronsvc/sandbox/): without them a
# worker refuses script jobs rather than running them unsandboxed.
RUN apt-get update \
 && apt-get install --yes --no-install-recommends bubblewrap libseccomp2 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 cronsvc \
 && useradd --system --uid 10001 --gid cronsvc --home-dir /app --no-create-home --shell /usr/sbin/nologin cronsvc
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STATIC_ROOT=/app/staticfiles \
    VAR_DIR=/tmp/cronsvc \
    PORT=8000
WORKDIR /app
COPY . /app
# Static files are collected into the image, so the web process never depends on a release
# step having run in its own container. (Settings load in embedded mode here: nothing is kept.)
# They belong to the image's user: the release step collects again, over them.
RUN VAR_DIR=/tmp/collect python manage.py collectstatic --noinput --verbosity 0 && rm -rf /tmp/collect \
 && chown -R cronsvc:cronsvc "$STATIC_ROOT"
USER cronsvc
EXPOSE 8000
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
