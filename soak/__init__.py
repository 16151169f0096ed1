"""The chaos soak (issue 12): the platform's real processes on a private PostgreSQL and
Redis (``--broker rabbitmq``: and a private RabbitMQ node as the broker), a recording
target, a seeded chaos driver, and the invariants checked afterwards.

Run ``python -m soak --help``; ``make soak`` runs the 10-minute version and
``tests/soak/`` a short one inside ``make test``.
"""
