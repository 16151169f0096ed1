"""A loopback TCP proxy the chaos can cut and blackhole, in front of PostgreSQL or Redis
for the platform's processes (the soak itself talks to both directly).

Run as ``python -m soak.proxy UPSTREAM_PORT``; it prints the port it listens on (127.0.0.1)
on its first line, once its signal handlers are in place. Signals steer it:

- SIGUSR1, a cut: every connection is reset on both sides at once (SO_LINGER 0: an RST,
  as a firewall or a failed-over load balancer does), mid-query or idle;
- SIGUSR2, a blackhole: from now on nothing passes. New connections are accepted and
  never forwarded, bytes on existing ones are swallowed (a userspace proxy acknowledges
  them, so a client's TCP timeouts do not fire: only its own read timeouts do);
- SIGHUP ends the blackhole: every connection it held is reset, then traffic flows again.
"""

import asyncio
import signal
import socket
import struct
import sys

CHUNK = 65536


def _reset(writer):
    """Close with an RST rather than a FIN, discarding whatever is buffered."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class Proxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.connections = {}  # {client writer: [upstream writer, None until connected]}
        self.open = asyncio.Event()
        self.open.set()
        self.cuts = 0

    async def handle(self, client_reader, client_writer):
        upstream = [None]
        self.connections[client_writer] = upstream
        try:
            await self.open.wait()  # blackholed: accepted, never forwarded
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            upstream[0] = up_writer
            pumps = [asyncio.ensure_future(self._pump(client_reader, up_writer)),
                     asyncio.ensure_future(self._pump(up_reader, client_writer))]
            _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for pump in pending:
                pump.cancel()
        except OSError:
            pass
        finally:
            self.connections.pop(client_writer, None)
            _reset(client_writer)
            _reset(upstream[0])

    async def _pump(self, reader, writer):
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    return
                await self.open.wait()  # a blackhole swallows it; its end resets the connection
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            return

    def cut(self):
        for client_writer, upstream in list(self.connections.items()):
            _reset(client_writer)
            _reset(upstream[0])
        self.cuts += 1

    def blackhole(self):
        self.open.clear()

    def restore(self):
        self.cut()
        self.open.set()


async def serve(upstream_port):
    proxy = Proxy(upstream_port)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, proxy.cut)
    loop.add_signal_handler(signal.SIGUSR2, proxy.blackhole)
    loop.add_signal_handler(signal.SIGHUP, proxy.restore)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await stop.wait()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    asyncio.run(serve(int(argv[0])))


if __name__ == "__main__":
    main()
