"""Read cronsvc's event stream with a Redis consumer group (docs/event-stream.md).

    pip install redis
    python event_consumer.py --redis redis://localhost:6379/0 \
        --stream cronsvc:events:org:<organization id> --group billing --consumer billing-1

Prints each event as a line of JSON and acknowledges it after handling it. Started again
under the same consumer name, it first handles the entries it had read but not
acknowledged (a crash between reading and XACK), so every event is handled at least once;
handle each event idempotently, keyed on its ``id``.
"""

import argparse
import json

import redis


def handle(event):
    """Your code here: it must tolerate seeing an event again (same ``id``)."""
    print(json.dumps(event), flush=True)


def consume(client, stream, group, consumer, *, max_events=None, block_ms=5000):
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)  # from the first entry kept
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    handled = 0
    position = "0"  # first our own pending entries, then new ones (">")
    while max_events is None or handled < max_events:
        reply = client.xreadgroup(group, consumer, {stream: position}, count=100, block=block_ms)
        entries = reply[0][1] if reply else []
        if position == "0" and not entries:
            position = ">"
            continue
        for entry_id, fields in entries:
            handle(json.loads(fields[b"event"]))
            client.xack(stream, group, entry_id)
            handled += 1
    return handled


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", required=True, help="redis://[user:password@]host:port/db")
    parser.add_argument("--stream", required=True, help="cronsvc:events:org:<organization id>")
    parser.add_argument("--group", required=True)
    parser.add_argument("--consumer", required=True)
    parser.add_argument("--max-events", type=int, help="stop after this many (default: run forever)")
    args = parser.parse_args()
    # A read blocks up to 5 s for new events: the socket must wait longer than that.
    client = redis.Redis.from_url(args.redis, socket_timeout=30)
    consume(client, args.stream, args.group, args.consumer, max_events=args.max_events)


if __name__ == "__main__":
    main()
