#!/usr/bin/env bash
# Start PostgreSQL, Redis and RabbitMQ on 127.0.0.1 when they are not already answering.
set -euo pipefail

if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  echo "Starting PostgreSQL..."
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 -q || { echo "PostgreSQL did not start" >&2; exit 1; }

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "Starting Redis..."
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis did not start" >&2; exit 1; }

# RabbitMQ (the second supported broker; its end-to-end tests use the machine's server).
rabbitmq_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if ! rabbitmq_up; then
  echo "Starting RabbitMQ..."
  command -v rabbitmq-server >/dev/null || { echo "rabbitmq-server is not installed (apt-get install rabbitmq-server)" >&2; exit 1; }
  rabbitmq-server -detached
  # The AMQP listener opens last in the boot: once it answers, the broker is ready.
  for _ in $(seq 1 60); do rabbitmq_up && break; sleep 1; done
fi
rabbitmq_up || { echo "RabbitMQ did not start" >&2; exit 1; }
