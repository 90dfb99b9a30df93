"""The pytest plugin: gate markers and options, fixture registration, and the gate records.

Hooks live here and nowhere else; fixtures live in the repository's ``fixtures/`` folder.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from .core.configuration import ConfigError, shipped
from .core.verdicts import GATE_TITLES, GATES, INCOMPLETE, Measurement, Outcome
from .engines import EngineRun
from .model import SHIPPED_CATALOG
from .options import RunConfig, RunOptions, add_run_options
from .report import format_value, write_summary
from .session import GateSession
from .storage import TargetBusy
from .store import StoreError

MARKERS = {"gate": "a gate check (runs only with -m gate / -m g1 … g4)",
           **{g: f"a check of {GATE_TITLES[g]}" for g in GATES}}
SESSION_KEY = pytest.StashKey[GateSession | None]()
RECORDED_KEY = pytest.StashKey[bool]()
GATE_EXPR = re.compile(r"\b(gate|g[1-4])\b")
NAMED_GATE = re.compile(r"(\bnot\s+)?\b(g[1-4])\b")  # -m "g1 or g2"; "not g4" names none
PROPERTY_PREFIX = "kvgate."  # JUnit properties: kvgate.<measurement>.<field>
CHECKS = "kvgate-checks"  # the Checks plugin's name


def pytest_addoption(parser: pytest.Parser) -> None:
    add_run_options(parser.getgroup("kvgate", "kvgate acceptance gates").addoption)


class PresetRun:
    """A run whose options, configuration and gates `kvgate run` already resolved (plugin)."""

    def __init__(self, options: RunOptions, config: RunConfig, gates: list[str] | None = None,
                 engine: EngineRun | None = None):
        self.options, self.config, self.gates, self.engine = options, config, gates, engine


class Checks:
    """The gate checks collected (before -k, -m or --deselect chose) and those that ran.

    A requested gate whose checks did not all run is INCOMPLETE, whatever chose them away.
    """

    def __init__(self):
        self.collected: list[pytest.Item] = []
        self.ran: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]):
        self.collected = [i for i in items if item_gate(i)]
        return (yield)

    def requested(self, config: pytest.Config) -> list[str]:
        """The gates the run was asked for: `kvgate run`'s, else those -m names or that ran."""
        preset = next((p for p in config.pluginmanager.get_plugins()
                       if isinstance(p, PresetRun)), None)
        if preset and preset.gates is not None:
            return sorted(preset.gates)
        if not gates_selected(config):
            return []
        named = {g for negated, g in NAMED_GATE.findall(config.option.markexpr or "")
                 if not negated}
        ran = {item_gate(i) for i in self.collected if i.nodeid in self.ran}
        return sorted((named & {item_gate(i) for i in self.collected}) | ran)

    def not_run(self, gate: str) -> list[str]:
        """The gate's checks that were collected but never ran (deselected, or the run stopped)."""
        return [i.name for i in self.collected if item_gate(i) == gate and i.nodeid not in self.ran]


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[SESSION_KEY] = None
    config.pluginmanager.register(Checks(), CHECKS)
    # pytest-html's hooks exist only when it is loaded; an unknown hook name would be an error.
    if config.pluginmanager.hasplugin("html"):
        config.pluginmanager.register(HtmlColumns(), "kvgate-html-columns")
    folder = shipped("fixtures")
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if path.name.startswith("_"):
            continue
        name = f"kvgate_fixtures_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        spec.loader.exec_module(module)
        config.pluginmanager.register(module, name)


def gates_selected(config: pytest.Config) -> bool:
    """Whether the user asked for gate checks: -m gate, -m g1 …, or a path inside suites/."""
    if GATE_EXPR.search(config.option.markexpr or ""):
        return True
    suites = shipped("suites")
    return config.args_source is pytest.Config.ArgsSource.ARGS and any(
        Path(arg.split("::")[0]).resolve().is_relative_to(suites) for arg in config.args)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Plain `pytest` runs the framework's own tests; the gates touch real storage.
    if gates_selected(config):
        return
    keep = [i for i in items if i.get_closest_marker("gate") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def item_gate(item: pytest.Item) -> str | None:
    """The gate (g1…g4) a test belongs to, from its markers."""
    return next((g for g in GATES if item.get_closest_marker(g)), None)


def gate_session(config: pytest.Config) -> GateSession:
    """The run's GateSession, opened on first use; a bad configuration stops the run."""
    session = config.stash[SESSION_KEY]
    if session is None:
        preset = next((p for p in config.pluginmanager.get_plugins()
                       if isinstance(p, PresetRun)), None)
        options = preset.options if preset else RunOptions.from_namespace(config.option)
        try:
            session = GateSession.open(options, *((preset.config, preset.engine) if preset
                                                  else ()))
        except ConfigError as exc:
            pytest.exit(f"configuration error: {exc}", returncode=2)
        except TargetBusy as exc:  # its own line says who holds the target and what to do
            pytest.exit(str(exc), returncode=2)
        except (FileExistsError, ValueError, StoreError) as exc:
            pytest.exit(f"cannot start the run in {options.out}: {exc}", returncode=2)
        config.stash[SESSION_KEY] = session
    return session


def record_measurement(item: pytest.Item, measurement: Measurement) -> None:
    """Store a test's measurement under its gate; the test's report shows it too."""
    gate = item_gate(item)
    if gate is None:
        raise pytest.UsageError(f"{item.nodeid}: a gate check needs a g1…g4 marker")
    try:
        gate_session(item.config).record(gate, measurement)
    except StoreError as exc:  # the run's record could not hold it: stop, and say why
        pytest.exit(f"{gate.upper()}: a measurement could not be stored, so the run stops: {exc}",
                    returncode=2)
    item.stash[RECORDED_KEY] = True
    item.user_properties.extend(measurement_properties(measurement))


def measurement_properties(m: Measurement) -> list[tuple[str, str]]:
    """A measurement as JUnit properties: kvgate.<name>.value, .unit, .limit, .outcome, …"""
    fields = {"value": "" if m.value is None else str(m.value), "unit": m.unit,
              "limit": str(m.limit) if m.limit else "", "outcome": m.outcome.value,
              "margin": "" if m.margin is None else str(m.margin)}
    if m.note:
        fields["note"] = m.note
    return [(f"{PROPERTY_PREFIX}{m.name}.{key}", value) for key, value in fields.items()]


def measurement_rows(properties: list[tuple[str, object]]) -> list[tuple[str, dict[str, str]]]:
    """The measurements in a report's user_properties, in order, as (name, {field: text})."""
    rows: list[tuple[str, dict[str, str]]] = []
    for key, value in properties:
        if not (isinstance(key, str) and key.startswith(PROPERTY_PREFIX) and "." in
                key[len(PROPERTY_PREFIX):]):
            continue
        name, field = key[len(PROPERTY_PREFIX):].rsplit(".", 1)
        # A repeated field starts the next measurement, even one of the same name.
        if not rows or rows[-1][0] != name or field in rows[-1][1]:
            rows.append((name, {}))
        rows[-1][1][field] = str(value)
    return rows


def _value_text(name: str, fields: dict[str, str]) -> str:
    value = fields.get("value", "")
    # The report's own number format; format_value reads only the value and the unit.
    return format_value(Measurement(name=name, value=float(value) if value else None,
                                    unit=fields.get("unit", ""), outcome=Outcome.PASS))


class HtmlColumns:
    """Value, Limit and Outcome columns in pytest-html's table; one line per measurement."""

    COLUMNS = ("Value", "Limit", "Outcome")

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = [f'<th class="kvgate-{c.lower()}">{c}</th>' for c in self.COLUMNS]

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        rows = measurement_rows(report.user_properties)
        named = len(rows) > 1  # several measurements: each value line says whose it is
        lines = {
            "Value": [(f"{n}: " if named else "") + _value_text(n, f) for n, f in rows],
            "Limit": [f.get("limit") or "—" for _, f in rows],
            "Outcome": [f.get("outcome", "") for _, f in rows],
        }
        cells[2:2] = [f'<td class="col-kvgate-{c.lower()}">'
                      + "<br>".join(html.escape(line) for line in lines[c]) + "</td>"
                      for c in self.COLUMNS]


def pytest_runtest_setup(item: pytest.Item) -> None:
    gate = item_gate(item)
    if gate is None:
        return
    item.config.pluginmanager.get_plugin(CHECKS).ran.add(item.nodeid)
    reason = gate_session(item.config).blocked_reason(gate)
    if reason:
        record_measurement(item, Measurement.blocked(item.name, reason))
        pytest.skip(f"BLOCKED: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    failed = call.excinfo.value if call.excinfo else None
    if item_gate(item) and isinstance(failed, StoreError):
        # The store failed under a check or its fixture (a lock, a full disk): every check after
        # it would fail the same way, a traceback each. Stop after this one, said once.
        item.session.shouldstop = (f"{item_gate(item).upper()}: the store failed, so the run "
                                   f"stops: {failed}")
        report.longrepr = None if report.skipped else "(the store failed: see the line below)"
        return report
    # A gate check that crashed or was skipped without recording must not vanish.
    if (item_gate(item) and call.when != "teardown" and not item.stash.get(RECORDED_KEY, False)
            and (report.failed or report.skipped)):
        text = str(call.excinfo.value) if call.excinfo else "no measurement recorded"
        record_measurement(item, Measurement.error(item.name, f"check did not measure: {text}"))
        report.user_properties = list(item.user_properties)  # made before this measurement
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    checks = session.config.pluginmanager.get_plugin(CHECKS)
    requested = checks.requested(session.config)
    gate_run = session.config.stash.get(SESSION_KEY, None)
    if gate_run is None and requested:
        gate_run = gate_session(session.config)  # none of their checks ran: still a record
    if gate_run is None:
        return
    for gate in requested:
        gate_run.expect(gate, checks.not_run(gate))
    writer = session.config.pluginmanager.get_plugin("terminalreporter")
    try:
        _finish(gate_run, writer)
        if gone := gate_run.store.gone(gate_run.run_id, requested):  # written, but no store
            pytest.exit(gone, returncode=2)
    except (StoreError, OSError) as exc:  # a full disk, a read-only mount: said, exit 2
        pytest.exit(f"the run's gate records could not be stored: {exc}", returncode=2)
    finally:
        gate_run.store.close()


def _finish(gate_run: GateSession, writer) -> None:
    finished = gate_run.finish()
    for record, files in finished:
        if writer:
            writer.write_line(f"{record.title}: {record.verdict.value} — {files['html']}")
            for m in record.measurements:
                if m.note.startswith(INCOMPLETE):
                    writer.write_line(f"  {m.note}")
    if finished:
        # Simulated arms are deviations in the records themselves, so runs cited by this one count.
        info = gate_run.site.site
        summary = write_summary(gate_run.store, info.name, gate_run.run_id, array=info.array,
                                catalog=info.catalog or SHIPPED_CATALOG,
                                profile_description=gate_run.thresholds.profile_description)
        if writer:
            writer.write_line(f"Procurement summary: {summary['html']}")


def terminal_visible(config: pytest.Config):
    """A context in which progress bars reach the terminal past pytest's output capture."""
    capture = config.pluginmanager.getplugin("capturemanager")
    return capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()


def outcome_failure(measurement: Measurement) -> str:
    """The text a gate check fails with, or "" when its outcome lets the test pass."""
    if measurement.outcome in (Outcome.PASS, Outcome.REPORTED, Outcome.NOT_APPLICABLE):
        return ""
    value = f"{measurement.value:.4g} {measurement.unit}" if measurement.value is not None \
        else "not measured"
    return (f"{measurement.outcome.value}: {measurement.name} = {value}; limit "
            f"{measurement.limit or '—'}" + (f"; {measurement.note}" if measurement.note else ""))
