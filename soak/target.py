"""The customers' endpoint, in its own process: it answers 200, 500 or slowly by a seeded
pattern and appends one JSON line per request it receives to a log.

Run as ``python -m soak.target --log FILE --seed N``; it prints its port on the first line.
The answer depends only on (seed, webhook-id, attempt), so a request repeated after a kill
gets the answer the first one got.
"""

import argparse
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: (share, answer): most runs succeed at once; some fail (retried); some are slow.
PATTERN = ((0.75, "ok"), (0.12, "error"), (0.13, "slow"))


def answer_for(seed, webhook_id, attempt):
    digest = hashlib.sha256(f"{seed}:{webhook_id}:{attempt}".encode()).digest()
    roll = int.from_bytes(digest[:4], "big") / 2**32
    delay = 0.5 + 2.5 * int.from_bytes(digest[4:6], "big") / 2**16
    for share, answer in PATTERN:
        if roll < share:
            return answer, delay
        roll -= share
    return "ok", delay


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seed = 0
    log = None
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _handle(self):
        arrived = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        webhook_id = self.headers.get("webhook-id", "")
        attempt = self.headers.get("X-Cronsvc-Attempt", "")
        answer, delay = answer_for(self.seed, webhook_id, attempt)
        record = {"id": webhook_id, "attempt": attempt, "at": arrived, "answer": answer,
                  "scheduled_for": self.headers.get("X-Cronsvc-Scheduled-For", "")}
        with self.lock:
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()
        if answer == "slow":
            time.sleep(delay)
        status = 500 if answer == "error" else 200
        payload = b'{"ok": false}' if status == 500 else b'{"ok": true}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def handle_error(self, request, client_address):
        # A worker killed mid-request hangs up on us: expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def read_log(path):
    records = []
    with open(path) as log:
        for line in log:
            if line.endswith("\n"):
                records.append(json.loads(line))
    return records


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    handler = type("Handler", (_Handler,), {"seed": args.seed, "log": open(args.log, "a")})
    server = _Server(("127.0.0.1", args.port), handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
