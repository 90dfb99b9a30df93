"""The soak's Prometheus endpoint on loopback, read back with kvgate's own parser."""

import urllib.error
import urllib.request

import pytest

from gates._promtext import parse_metrics
from gates._soak import WindowRecord
from gates._soak_metrics import SoakExporter, render
from gates._soak_runner import SoakStatus

STATUS = SoakStatus(run_id="r1", committed=3, planned=864, effective_s=900.0, gap_s=0.0,
                    eta_s=258300.0, shortened=False,
                    health={"fio_verify": "ok", "smart": "not applicable", "kernel_log": "alert"})
WINDOW = WindowRecord(index=2, start=600.0, end=900.0, requests=120, errors=1, timeouts=0,
                      output_tokens=3840, throughput=12.8, ttft_p50=0.4, ttft_p99=0.9)


def test_render_is_valid_prometheus_text():
    metrics = parse_metrics(render(STATUS, WINDOW))
    assert metrics.sum(r"kvgate_soak_windows_committed") == 3
    assert metrics.sum(r"kvgate_soak_window_errors") == 1
    assert metrics.sum(r"kvgate_soak_signal_healthy", {"signal": "kernel_log"}) == 0
    assert metrics.sum(r"kvgate_soak_signal_healthy", {"signal": "smart"}) == -1


def test_exporter_serves_the_latest_window_on_loopback():
    with SoakExporter(0) as exporter:
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        assert b"no window" in urllib.request.urlopen(url, timeout=5).read()
        exporter.update(STATUS, WINDOW)
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert parse_metrics(body).sum(r"kvgate_soak_window_ttft_p99_seconds") == 0.9
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/other", timeout=5)
