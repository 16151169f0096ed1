"""Which kind of Celery broker a CELERY_BROKER_URL names, and what each kind needs.

Three kinds are supported (docs/brokers.md):
- ``filesystem``: the embedded mode's folder broker (``make run``, one machine);
- ``redis``: Redis lists (``redis://``, ``rediss://``, ``unix://``);
- ``amqp``: RabbitMQ (``amqp://``, ``amqps://``, ``pyamqp://``), through py-amqp.

Free of Django so the settings, the tests and the soak can all ask.
"""

AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
REDIS_SCHEMES = ("redis", "rediss", "unix")

#: py-amqp connection options on RabbitMQ. With publisher confirms a publish returns only
#: once the broker has taken the message (for a persistent message in a durable queue:
#: written to disk), and a refusal raises instead of vanishing, so a publish that failed
#: is logged and left queued in the database for the sweeper to send again.
AMQP_TRANSPORT_OPTIONS = {"confirm_publish": True}

#: Seconds a publish waits for RabbitMQ's confirm before it counts as failed (a broker
#: that blocks publishers under a memory or disk alarm would otherwise hold the scheduler).
CONFIRM_TIMEOUT = 5.0


def broker_kind(url):
    scheme = url.partition("://")[0].lower()
    if scheme == "filesystem":
        return "filesystem"
    if scheme in AMQP_SCHEMES:
        return "amqp"
    if scheme in REDIS_SCHEMES:
        return "redis"
    raise ValueError(f"unsupported Celery broker URL scheme {scheme!r}: use redis://, amqp:// or filesystem://")
