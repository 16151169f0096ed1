#!/bin/sh
# The container image's entrypoint. Its first argument names a Procfile process type
# (web, release, scheduler, worker_pro, housekeeping, ...): that line of the Procfile runs,
# exactly as honcho or Heroku would run it. Anything else runs as a command, e.g.
# `docker compose run --rm web python manage.py createsuperuser`.
set -eu
cd "$(dirname "$0")/.."
if [ "$#" -eq 1 ]; then
  command=$(awk -v name="$1" 'index($0, name ":") == 1 { print substr($0, length(name) + 2); exit }' Procfile)
  if [ -n "$command" ]; then
    # exec twice: the shell expands ${PORT:-8000} and the like, then the process itself
    # takes its place and receives the container's SIGTERM directly.
    exec sh -c "exec $command"
  fi
fi
exec "$@"
