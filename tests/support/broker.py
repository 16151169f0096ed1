"""Reading Celery messages straight out of the real brokers (Redis lists, RabbitMQ
queues), and pointing the test process's own publishing at either."""

import base64
import json
import os
import uuid
from contextlib import contextmanager

#: The machine's shared RabbitMQ; tests keep to queues of their own on it (no vhost needed).
AMQP_URL = os.environ.get("TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def use_private_queue(tenant):
    """Give the tenant's plan a queue no other test uses, so parallel tests never mix."""
    plan = tenant.organization.plan
    plan.queue = f"test.{uuid.uuid4().hex[:12]}"
    plan.save(update_fields=["queue"])
    return plan.queue


def queued_runs(job, queue, count):
    """``count`` queued runs of ``job`` in ``queue``, due minutes ago (one per second)."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.executions.models import Execution

    start = timezone.now() - timedelta(minutes=5)
    return [Execution.objects.create(job=job, organization=job.organization, queue=queue,
                                     scheduled_for=start + timedelta(seconds=i)).id for i in range(count)]


def published_ids(client, queue):
    """Every execution id in the queue's pending messages (one entry per publish)."""
    ids = []
    for raw in client.lrange(queue, 0, -1):
        args, _kwargs, _embed = json.loads(_decode_body(json.loads(raw)))
        ids.extend(args[0])
    return ids


def _decode_body(message):
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body).decode()
    return body


class Broker:
    def __init__(self, client):
        self.client = client

    def published_ids(self, queue):
        return published_ids(self.client, queue)

    def drop(self, queue):
        self.client.delete(queue)


class _BrokerUnderTest:
    """What the end-to-end tests ask of either broker (see ``broker_under_test``)."""

    url = ""

    @property
    def env(self):
        """What the platform's processes need to use this broker."""
        return {"CELERY_BROKER_URL": self.url}

    def private_queue(self, tenant):
        """``use_private_queue``, dropped when the test ends (on RabbitMQ queues and
        exchanges are durable and would outlive the test)."""
        queue = use_private_queue(tenant)
        self.queues.add(queue)
        return queue

    def drop_private_queues(self):
        for queue in self.queues:
            self.drop(queue)


class RedisBroker(_BrokerUnderTest, Broker):
    kind = "redis"

    def __init__(self, url):
        import redis

        super().__init__(redis.Redis.from_url(url))
        self.url, self.queues = url, set()

    def close(self):
        self.drop_private_queues()
        self.client.close()


class AmqpBroker(_BrokerUnderTest):
    """A RabbitMQ broker seen as queues of Celery messages. Reading takes every message
    unacknowledged and puts them all back before it returns."""

    kind = "rabbitmq"

    def __init__(self, url=AMQP_URL):
        from kombu import Connection

        self.url, self.queues = url, set()
        self.connection = Connection(url, connect_timeout=5)

    def messages(self, queue):
        from amqp.exceptions import NotFound

        channel = self.connection.channel()
        found = []
        try:
            while (message := channel.basic_get(queue, no_ack=False)) is not None:
                found.append(message)
            for message in found:
                channel.basic_reject(message.delivery_tag, requeue=True)
            # Answered after the requeues (one channel's methods are handled in order): a
            # read right after this one sees every message again.
            channel.queue_declare(queue, passive=True)
        except NotFound:  # never declared: nothing was published to it
            return []
        finally:
            if channel.is_open:
                channel.close()
        return found

    def published_ids(self, queue):
        ids = []
        for message in self.messages(queue):
            args, _kwargs, _embed = json.loads(message.body)
            ids.extend(args[0])
        return ids

    def drop(self, queue):
        channel = self.connection.channel()
        try:
            channel.queue_delete(queue)
            channel.exchange_delete(queue)  # Celery declares a direct exchange per queue
        finally:
            channel.close()

    def close(self):
        self.drop_private_queues()
        self.connection.release()


@contextmanager
def broker_under_test(kind):
    """The real broker of that kind ("redis": the test's own, "rabbitmq": the machine's),
    with the test process's publishing (trigger_now, publishing.publish) going to it."""
    from django.conf import settings

    broker = RedisBroker(settings.CELERY_BROKER_URL) if kind == "redis" else AmqpBroker()
    try:
        with publishing_to(broker.url):
            yield broker
    finally:
        broker.close()


@contextmanager
def publishing_to(url):
    """This process's publishing (apps/executions/scheduling/publishing.py, which trigger_now and the
    sweeper use) goes to ``url`` through a second Celery app configured from the settings
    as config/settings.py sets them for that URL; back afterwards."""
    from unittest import mock

    from celery import Celery
    from django.test import override_settings

    from apps.executions.scheduling import publishing
    from cronsvc.brokers import AMQP_TRANSPORT_OPTIONS, broker_kind

    if broker_kind(url) != "amqp":  # the test settings' own broker (Redis): nothing to switch
        yield
        return
    with override_settings(CELERY_BROKER_URL=url, BROKER_KIND="amqp", CELERY_BROKER_TRANSPORT=None,
                           CELERY_BROKER_TRANSPORT_OPTIONS=dict(AMQP_TRANSPORT_OPTIONS)):
        sender = Celery("cronsvc-test", set_as_current=False)
        sender.config_from_object("django.conf:settings", namespace="CELERY")
        # Its connections stay in kombu's pools (one per URL) for the next test to reuse.
        with mock.patch.object(publishing, "app", sender):
            yield
