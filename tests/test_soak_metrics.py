"""The soak's Prometheus endpoint: scraped over loopback HTTP, read with prometheus_client's parser.

The metric names, label names and help texts are a contract with site dashboards; CONTRACT
spells them out so that a rename fails here first.
"""

import socket
import urllib.request

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gates.soak import SoakExporter
from gates.soak.metrics import render
from gates.soak.rules import WindowRecord
from gates.soak.runner import SoakStatus

STATUS = SoakStatus(run_id="r1", committed=3, planned=864, effective_s=900.0, gap_s=0.0,
                    eta_s=258300.0, shortened=False,
                    health={"fio_verify": "ok", "smart": "not applicable", "kernel_log": "alert"})
WINDOW = WindowRecord(index=2, start=600.0, end=900.0, requests=120, errors=1, timeouts=0,
                      output_tokens=3840, throughput=12.8, ttft_p50=0.4, ttft_p99=0.9)

STATUS_CONTRACT = {
    "kvgate_soak_windows_committed": "windows committed so far",
    "kvgate_soak_windows_planned": "windows the soak must commit",
    "kvgate_soak_effective_seconds": "seconds under load, gaps excluded",
    "kvgate_soak_gap_seconds": "seconds the soak was not running",
    "kvgate_soak_eta_seconds": "estimated seconds until the soak ends",
    "kvgate_soak_signal_healthy": "1 ok, 0 alert or error, -1 not applicable",
}
WINDOW_CONTRACT = {
    "kvgate_soak_window_throughput_tokens_per_second": "latest window's output throughput",
    "kvgate_soak_window_ttft_p50_seconds": "latest window's TTFT p50",
    "kvgate_soak_window_ttft_p99_seconds": "latest window's TTFT p99",
    "kvgate_soak_window_requests": "latest window's requests",
    "kvgate_soak_window_errors": "latest window's failed requests",
}
CONTRACT = {**STATUS_CONTRACT, **WINDOW_CONTRACT}
EXPECTED = {  # (name, labels) -> value for STATUS and WINDOW
    ("kvgate_soak_windows_committed", (("run_id", "r1"),)): 3,
    ("kvgate_soak_windows_planned", (("run_id", "r1"),)): 864,
    ("kvgate_soak_effective_seconds", (("run_id", "r1"),)): 900.0,
    ("kvgate_soak_gap_seconds", (("run_id", "r1"),)): 0.0,
    ("kvgate_soak_eta_seconds", (("run_id", "r1"),)): 258300.0,
    ("kvgate_soak_window_throughput_tokens_per_second", (("run_id", "r1"),)): 12.8,
    ("kvgate_soak_window_ttft_p50_seconds", (("run_id", "r1"),)): 0.4,
    ("kvgate_soak_window_ttft_p99_seconds", (("run_id", "r1"),)): 0.9,
    ("kvgate_soak_window_requests", (("run_id", "r1"),)): 120,
    ("kvgate_soak_window_errors", (("run_id", "r1"),)): 1,
    ("kvgate_soak_signal_healthy", (("run_id", "r1"), ("signal", "fio_verify"))): 1,
    ("kvgate_soak_signal_healthy", (("run_id", "r1"), ("signal", "kernel_log"))): 0,
    ("kvgate_soak_signal_healthy", (("run_id", "r1"), ("signal", "smart"))): -1,
}


def families(text: str) -> dict:
    """name -> (type, help) of every metric family in a body."""
    return {f.name: (f.type, f.documentation) for f in text_string_to_metric_families(text)}


def samples(text: str) -> dict:
    """(name, sorted labels) -> value of every sample in a body."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def scrape(port: int, path: str = "/metrics") -> tuple[str, str]:
    """One GET over loopback: the Content-Type and the body."""
    # The timeout only bounds a hung server; no assertion depends on how long a scrape takes.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
        assert response.status == 200
        return response.headers["Content-Type"], response.read().decode()


def test_render_serves_the_contract_names_labels_and_values():
    text = render(STATUS, WINDOW)
    assert families(text) == {name: ("gauge", doc) for name, doc in CONTRACT.items()}
    assert samples(text) == EXPECTED


def test_render_without_a_window_has_only_the_soak_gauges():
    text = render(STATUS, None)
    assert set(families(text)) == set(STATUS_CONTRACT)


def test_exporter_serves_the_latest_window_on_loopback():
    with SoakExporter(0) as exporter:
        assert exporter.port > 0
        content_type, body = scrape(exporter.port)
        assert content_type.startswith("text/plain")
        assert samples(body) == {}  # nothing committed yet: no sample a dashboard could misread
        exporter.update(STATUS, WINDOW)
        _, body = scrape(exporter.port)
        assert families(body) == {name: ("gauge", doc) for name, doc in CONTRACT.items()}
        assert samples(body) == EXPECTED
        # Each update replaces the whole picture: a signal gone from the status goes too.
        later = STATUS.model_copy(update={"committed": 4, "health": {"fio_verify": "error"}})
        exporter.update(later, WINDOW.model_copy(update={"errors": 7}))
        now = samples(scrape(exporter.port)[1])
        assert now[("kvgate_soak_windows_committed", (("run_id", "r1"),))] == 4
        assert now[("kvgate_soak_window_errors", (("run_id", "r1"),))] == 7
        assert {labels for name, labels in now if name == "kvgate_soak_signal_healthy"} == {
            (("run_id", "r1"), ("signal", "fio_verify"))}
        assert now[("kvgate_soak_signal_healthy",
                    (("run_id", "r1"), ("signal", "fio_verify")))] == 0
        port = exporter.port
    # After stop the port is closed: a connection is refused rather than left hanging.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=30).close()


def test_exporter_uses_a_private_registry():
    with SoakExporter(0) as exporter:
        exporter.update(STATUS, WINDOW)
        assert b"kvgate_soak" not in generate_latest(REGISTRY)
        # ...and the process's default metrics (python_gc_*, process_*) are not served.
        assert set(families(scrape(exporter.port)[1])) == set(CONTRACT)


def test_exporter_stops_once():
    exporter = SoakExporter(0)
    exporter.close()
    assert exporter.close() is None  # the second call returns, it does not raise


def test_a_taken_port_is_a_clear_error_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # A ValueError: the G4 fixture reports it as the gate's error, not a traceback.
        with pytest.raises(ValueError, match=rf"127\.0\.0\.1:{port}: .*--soak-metrics-port"):
            SoakExporter(port)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "localhost"])
def test_only_loopback_127_0_0_1_is_served(host):
    with pytest.raises(ValueError, match="127.0.0.1 only"):
        SoakExporter(0, host=host)


def test_a_port_out_of_range_is_refused():
    with pytest.raises(ValueError, match="70000"):
        SoakExporter(70000)
