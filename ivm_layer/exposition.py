"""Prometheus text over HTTP (``/metrics``) for the drivers' ``--metrics-port`` (``ivm serve``,
``ivm daemon``): prometheus-client's own server on a private registry, in a daemon thread.

A scrape runs the registry's collectors on the server's thread; each driver's collectors read
its figures then, so nothing is computed between scrapes.
"""

from __future__ import annotations

from .errors import ConfigError


class Exposition:
    """Serves ``registry`` on ``host:port`` (port 0: any free port; :attr:`port` is the one bound)."""

    def __init__(self, registry, port: int, host: str = "127.0.0.1", flag: str = "--metrics-port"):
        from prometheus_client import start_http_server

        try:
            self._http = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise ConfigError(f"{flag} {port}: cannot listen on {host}:{port} ({e.strerror or e})") from None
        server = self._http[0] if isinstance(self._http, tuple) else None
        self.host = host
        self.port = server.server_port if server is not None else port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        http = self._http
        if isinstance(http, tuple):
            http[0].shutdown()
            http[0].server_close()
