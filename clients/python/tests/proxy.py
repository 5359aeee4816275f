"""A TCP proxy the tests can cut, to drop a client's connections like a flaky network does."""

from __future__ import annotations

import re
import socket
import threading

_HOST = re.compile(rb"(\r\nhost: *)[^\r]*\r\n", re.IGNORECASE)


class CuttableProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_port``; :meth:`cut` drops every connection.

    While ``blocked``, connections are dropped as soon as they are made, as if the network
    were down. ``requests`` keeps the first bytes each forwarded connection sent (its request
    line and headers), so a test can see what a reconnection asked for. The ``Host`` header is
    rewritten to the upstream's: the server refuses requests that do not name it.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.blocked = False
        self.requests: list[bytes] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self.blocked:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        first = from_client
        try:
            while data := source.recv(65536):
                if from_client:
                    data = _HOST.sub(b"\\g<1>127.0.0.1:%d\r\n" % self.upstream_port, data)
                if first:
                    with self._lock:
                        self.requests.append(data)
                    first = False
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Drops every open connection, both ways, at once."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self._listener.close()
        self.cut()

    def last_event_ids(self) -> list[str | None]:
        """The ``Last-Event-ID`` each connection's request carried, in order."""
        found: list[str | None] = []
        with self._lock:
            requests = list(self.requests)
        for request in requests:
            value = None
            for line in request.decode("latin-1").split("\r\n"):
                name, _, rest = line.partition(":")
                if name.strip().lower() == "last-event-id":
                    value = rest.strip()
            found.append(value)
        return found
