"""An optional Prometheus endpoint for a running soak, on loopback, for a site's dashboards.

The metric names, label names and meanings below are a contract with site dashboards: a
rename breaks someone's panel, so change them only on purpose. Exposition and HTTP are
prometheus_client's; the metrics sit in a private registry, never the process-wide default
one, so nothing else registered in the process (by kvgate or a library) is served with them.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .rules import WindowRecord
from .runner import SoakStatus

HOST = "127.0.0.1"
HEALTH_VALUES = {"ok": 1, "not applicable": -1, "alert": 0, "error": 0}
HEALTH_HELP = "1 ok, 0 alert or error, -1 not applicable"

# (name, help, value from SoakStatus): served from the first update on.
STATUS_GAUGES = [
    ("kvgate_soak_windows_committed", "windows committed so far", lambda s: s.committed),
    ("kvgate_soak_windows_planned", "windows the soak must commit", lambda s: s.planned),
    ("kvgate_soak_effective_seconds", "seconds under load, gaps excluded",
     lambda s: s.effective_s),
    ("kvgate_soak_gap_seconds", "seconds the soak was not running", lambda s: s.gap_s),
    ("kvgate_soak_eta_seconds", "estimated seconds until the soak ends", lambda s: s.eta_s),
]
# (name, help, value from WindowRecord): served once a window is committed. A figure the
# window could not measure is 0, as it always was, so a dashboard's series has no holes.
WINDOW_GAUGES = [
    ("kvgate_soak_window_throughput_tokens_per_second", "latest window's output throughput",
     lambda w: w.throughput or 0.0),
    ("kvgate_soak_window_ttft_p50_seconds", "latest window's TTFT p50",
     lambda w: w.ttft_p50 or 0.0),
    ("kvgate_soak_window_ttft_p99_seconds", "latest window's TTFT p99",
     lambda w: w.ttft_p99 or 0.0),
    ("kvgate_soak_window_requests", "latest window's requests", lambda w: w.requests),
    ("kvgate_soak_window_errors", "latest window's failed requests", lambda w: w.errors),
]


# A ValueError so the G4 fixture's existing handler reports it as the gate's error message
# instead of a fixture traceback.
class ExporterError(ValueError):
    """The soak's metrics cannot be served as asked (address not loopback, port taken)."""


class _SoakCollector(Collector):
    """Yields the gauges of one (status, window) snapshot on every scrape."""

    def __init__(self) -> None:
        self.snapshot: tuple[SoakStatus, WindowRecord | None] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The latest snapshot's gauges; nothing before the first update."""
        # One read of the reference: a scrape racing an update sees the old or the new
        # snapshot whole, never run_id or signals of one with values of the other.
        snapshot = self.snapshot
        if snapshot is None:
            return
        status, window = snapshot
        rows = [(name, text, value(status)) for name, text, value in STATUS_GAUGES]
        if window is not None:
            rows += [(name, text, value(window)) for name, text, value in WINDOW_GAUGES]
        for name, text, value in rows:
            gauge = GaugeMetricFamily(name, text, labels=["run_id"])
            gauge.add_metric([status.run_id], value)
            yield gauge
        healthy = GaugeMetricFamily("kvgate_soak_signal_healthy", HEALTH_HELP,
                                    labels=["run_id", "signal"])
        for signal, health in sorted(status.health.items()):
            healthy.add_metric([status.run_id, signal], HEALTH_VALUES.get(health, 0))
        yield healthy


def _registry() -> tuple[CollectorRegistry, _SoakCollector]:
    # auto_describe=False: registering must not call collect() on an empty snapshot.
    registry = CollectorRegistry(auto_describe=False)
    collector = _SoakCollector()
    registry.register(collector)
    return registry, collector


def render(status: SoakStatus, window: WindowRecord | None) -> str:
    """Prometheus text for the soak's progress and its latest window."""
    registry, collector = _registry()
    collector.snapshot = (status, window)
    return generate_latest(registry).decode()


class SoakExporter:
    """Serves the latest soak metrics at http://127.0.0.1:PORT/metrics from a thread."""

    def __init__(self, port: int, host: str = HOST):
        # Loopback only: the endpoint has no authentication, and the soak host is the
        # storage under test, not a place to open a port to the network.
        if host != HOST:
            raise ExporterError(f"soak metrics are served on {HOST} only, not on {host}")
        if not 0 <= port <= 65535:
            raise ExporterError(f"soak metrics port {port} is not a TCP port (0-65535)")
        self.registry, self._collector = _registry()
        # Bound here, as before, so a taken port fails before the soak's first window.
        try:
            self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ExporterError(f"cannot serve soak metrics on {host}:{port}: "
                                f"{exc.strerror or exc} (choose another --soak-metrics-port)"
                                ) from exc
        self.port = self.server.server_address[1]
        self._closed = False

    def __enter__(self) -> SoakExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and free the port; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def update(self, status: SoakStatus, window: WindowRecord | None) -> None:
        """Publish the newest status and window."""
        self._collector.snapshot = (status, window)
