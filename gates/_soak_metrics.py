"""An optional Prometheus endpoint for a running soak, on loopback, for a site's dashboards."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ._soak import WindowRecord
from ._soak_runner import SoakStatus

HEALTH_VALUES = {"ok": 1, "not applicable": -1, "alert": 0, "error": 0}


def render(status: SoakStatus, window: WindowRecord | None) -> str:
    """Prometheus text for the soak's progress and its latest window."""
    run = f'run_id="{status.run_id}"'
    gauges = [
        ("kvgate_soak_windows_committed", "windows committed so far", status.committed),
        ("kvgate_soak_windows_planned", "windows the soak must commit", status.planned),
        ("kvgate_soak_effective_seconds", "seconds under load, gaps excluded", status.effective_s),
        ("kvgate_soak_gap_seconds", "seconds the soak was not running", status.gap_s),
        ("kvgate_soak_eta_seconds", "estimated seconds until the soak ends", status.eta_s),
    ]
    if window is not None:
        gauges += [
            ("kvgate_soak_window_throughput_tokens_per_second", "latest window's output "
             "throughput", window.throughput or 0.0),
            ("kvgate_soak_window_ttft_p50_seconds", "latest window's TTFT p50",
             window.ttft_p50 or 0.0),
            ("kvgate_soak_window_ttft_p99_seconds", "latest window's TTFT p99",
             window.ttft_p99 or 0.0),
            ("kvgate_soak_window_requests", "latest window's requests", window.requests),
            ("kvgate_soak_window_errors", "latest window's failed requests", window.errors),
        ]
    lines = []
    for name, text, value in gauges:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name}{{{run}}} {value}"]
    lines += ["# HELP kvgate_soak_signal_healthy 1 ok, 0 alert or error, -1 not applicable",
              "# TYPE kvgate_soak_signal_healthy gauge"]
    lines += [f'kvgate_soak_signal_healthy{{{run},signal="{name}"}} '
              f"{HEALTH_VALUES.get(health, 0)}" for name, health in sorted(status.health.items())]
    return "\n".join(lines) + "\n"


class SoakExporter:
    """Serves the latest soak metrics at http://127.0.0.1:PORT/metrics from a thread."""

    def __init__(self, port: int, host: str = "127.0.0.1"):
        exporter = self
        self.text = "# no window committed yet\n"

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = exporter.text.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes are not worth a log line
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SoakExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def update(self, status: SoakStatus, window: WindowRecord | None) -> None:
        """Publish the newest status and window."""
        self.text = render(status, window)
