"""Reading Celery messages straight out of the real Redis broker."""

import base64
import json
import uuid


def use_private_queue(tenant):
    """Give the tenant's plan a queue no other test uses, so parallel tests never mix."""
    plan = tenant.organization.plan
    plan.queue = f"test.{uuid.uuid4().hex[:12]}"
    plan.save(update_fields=["queue"])
    return plan.queue


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
