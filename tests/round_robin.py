"""A small round-robin load balancer in front of server replicas, for the replica tests and
`benchmarks/serve_load.py`: each request goes to the next upstream in turn; an upstream that
refuses the connection, or closes it before any answer (a replica killed mid-request), is passed
over and the request goes to the next one, as nginx's `proxy_next_upstream error` does. Answers
are relayed as they arrive (a stream stays a stream), one request per client connection."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
from collections import Counter

BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class RoundRobin:
    """Listening on a free loopback port (`port`) in a thread of its own, over `upstreams`."""

    def __init__(self, upstreams: list[int]) -> None:
        self.upstreams = upstreams
        self.turn = itertools.count()
        self.served: Counter[int] = Counter()  # answers relayed, by upstream port
        self.in_flight: Counter[int] = Counter()
        self.passed_over = 0  # requests an upstream failed and the next one took
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self.port = sock.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)

            async def start() -> None:
                self.server = await asyncio.start_server(self.handle, sock=sock)
                started.set()

            self.loop.run_until_complete(start())
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        started.wait(10)

    def stop(self) -> None:
        async def shut() -> None:
            self.server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:  # connections a client left open, waiting for a request
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await asyncio.sleep(0.1)  # the closed connections' callbacks run

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                (int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:")),
                0,
            )
            body = await reader.readexactly(length)
            kept = [x for x in lines[1:] if x and not x.lower().startswith("connection:")]
            request = "\r\n".join([lines[0], *kept, "Connection: close", "", ""]).encode("latin-1")
            start = next(self.turn)
            for i in range(len(self.upstreams)):
                port = self.upstreams[(start + i) % len(self.upstreams)]
                if await self.relay(port, request + body, writer):
                    return
                self.passed_over += 1
            writer.write(BAD_GATEWAY)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def relay(self, port: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        """Send `request` to the upstream at `port` and relay its answer; False if it gave
        none (nothing was sent to the client then)."""
        self.in_flight[port] += 1
        try:
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            self.in_flight[port] -= 1
            return False
        try:
            try:
                upstream.write(request)
                await upstream.drain()
                chunk = await upstream_reader.read(1 << 16)
            except ConnectionError:
                return False
            if not chunk:
                return False
            with contextlib.suppress(ConnectionError):  # cut mid-answer: the client sees it cut
                while chunk:
                    writer.write(chunk)
                    await writer.drain()
                    chunk = await upstream_reader.read(1 << 16)
            self.served[port] += 1
            return True
        finally:
            self.in_flight[port] -= 1
            upstream.close()
