"""A local HTTP server that answers a byte at a time, for the clients' total deadlines (the HTTP client's timeout
bounds each wait for a part of an answer, so it never times out such a server)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def dripping_server(every_s: float = 0.1) -> Iterator[str]:
    """Yield the base URL (`http://127.0.0.1:PORT/v1`) of a server that sends a 200 header announcing a long body,
    then one space every `every_s` seconds, to each connection until the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(every_s):
                conn.sendall(b" ")

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed
            while True:
                threading.Thread(target=drip, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        listener.close()
