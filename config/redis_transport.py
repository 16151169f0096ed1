"""The Redis broker transport, surviving a broker restart.

When Redis goes away mid-consume, Celery 5.7 closes the broken connection
(``Consumer.on_connection_error_after_connected``), and a task finishing afterwards acks its
message on the closed channel. Both reach kombu's Redis channel after its connection is
gone, where building a client dereferences ``connection.client`` (None) and raises
AttributeError — not a connection error, so the worker calls it unrecoverable and exits
(found by the chaos soak; tests/operations/test_broker_loss.py). Here that case raises
the connection error it is: Celery logs it, drops the ack (the message comes back after
the visibility timeout, and the run's claim makes a second delivery a no-op) and
reconnects.
"""

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection is closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
