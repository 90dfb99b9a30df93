"""nvme-cli JSON parsers across formats: 1.x, 2.3 (installed here) and 2.11 (written to format)."""

from __future__ import annotations

import pytest
from _tooldata import json_texts, tool_text
from hypothesis import given

from gates.storage import ParseError, parse_list_subsys, parse_smart_log
from gates.storage.nvme import parse_id_ctrl, parse_nvme_list


@pytest.mark.parametrize("name", ["nvme_list_2.3.json", "nvme_list_2.11.json"])
def test_list_two_versions(name):
    namespaces = parse_nvme_list(tool_text(name))
    assert len(namespaces) == 5
    array = namespaces[1]
    assert (array.device, array.controller, array.sector_size) == ("/dev/nvme1n1", "/dev/nvme1",
                                                                   4096)
    assert (array.model, array.serial, array.firmware) == ("KIOXIA KCD8XRUG3T84", "X3B0A017T0K8",
                                                           "0107")
    assert array.size == 3840755982336 and namespaces[0].sector_size == 512


def test_list_1x_has_index_and_product_name():
    (ns,) = parse_nvme_list(tool_text("nvme_list_1.x.json"))
    assert ns.serial == "S675NX0T123456" and ns.controller == "/dev/nvme0"


def test_list_verbose_form_is_refused_with_a_hint():
    with pytest.raises(ParseError, match="-v"):
        parse_nvme_list('{"Devices": [{"HostNQN": "x", "Subsystems": []}]}')


def test_smart_log_int_form():
    log = parse_smart_log(tool_text("nvme_smart_log_2.3.json"))
    assert (log.critical_warning, log.temperature_k, log.percent_used, log.media_errors) == (
        0, 310, 0, 0)
    assert log.temperature_c == pytest.approx(36.85) and log.warnings() == []


def test_smart_log_object_form():
    log = parse_smart_log(tool_text("nvme_smart_log_2.11_verbose.json"))
    assert (log.critical_warning, log.temperature_k, log.percent_used) == (0, 311, 1)
    bad = parse_smart_log(tool_text("nvme_smart_log_2.11_verbose_warning.json"))
    assert bad.critical_warning == 5
    assert bad.warnings() == ["available spare below threshold",
                              "NVM subsystem reliability degraded"]


def test_smart_log_object_without_value_is_rebuilt_from_its_flags():
    log = parse_smart_log('{"critical_warning": {"available_spare": 0, "temp_threshold": 1},'
                          ' "temperature": 350, "percent_used": 0, "media_errors": 0}')
    assert log.critical_warning == 2


def test_smart_log_media_errors_and_strings_for_128_bit_counters():
    assert parse_smart_log(tool_text("nvme_smart_log_2.3_media_errors.json")).media_errors == 12
    log = parse_smart_log('{"critical_warning": 0, "temperature": 300, "percent_used": 0,'
                          ' "media_errors": "340282366920938463463374607431768211455"}')
    assert log.media_errors == 2**128 - 1


def test_id_ctrl_identity_and_thresholds():
    ctrl = parse_id_ctrl(tool_text("nvme_id_ctrl_2.3.json"))
    assert (ctrl.model, ctrl.serial, ctrl.firmware) == ("KIOXIA KCD8XRUG3T84", "X3B0A017T0K8",
                                                        "0107")
    assert (ctrl.warning_temp_k, ctrl.critical_temp_k) == (343, 358)
    assert parse_id_ctrl(tool_text("nvme_id_ctrl_fabric_no_wctemp.json")).warning_temp_k == 0


def test_list_subsys_rdma_2_3():
    local, array = parse_list_subsys(tool_text("nvme_list_subsys_2.3_rdma.json"))
    assert local.paths[0].transport == "pcie"
    assert [(p.transport, p.state) for p in array.paths] == [("rdma", "live"), ("rdma", "live")]
    assert array.nqn == "nqn.2026-11.jp.example:kvarray01"


def test_list_subsys_2_11_adds_fields_and_shows_a_dead_tcp_path():
    (array,) = parse_list_subsys(tool_text("nvme_list_subsys_2.11_tcp.json"))
    assert (array.model, array.serial) == ("KVARRAY FX100", "a1b2c3d4e5f60718")
    assert [(p.transport, p.state, p.ana_state) for p in array.paths] == [
        ("tcp", "live", "optimized"), ("tcp", "connecting", "inaccessible")]


def test_list_subsys_1x_paths_follow_their_subsystem():
    (array,) = parse_list_subsys(tool_text("nvme_list_subsys_1.x.json"))
    assert [p.name for p in array.paths] == ["nvme1"]


@pytest.mark.parametrize("parse, text, words", [
    (parse_smart_log, '{"temperature": 300}', "critical_warning"),
    (parse_smart_log, '{"critical_warning": "warm", "temperature": 1, "percent_used": 0, '
                      '"media_errors": 0}', "critical_warning"),
    (parse_list_subsys, '[{"Subsystems": [{"Name": "s", "Paths": [{"Name": "n"}]}]}]',
     "Transport"),
    (parse_id_ctrl, "{}", "'sn'"),
])
def test_errors_name_the_command_and_field(parse, text, words):
    with pytest.raises(ParseError, match=words) as caught:
        parse(text)
    assert str(caught.value).startswith("cannot read the output of `nvme ")


@given(json_texts)
def test_parsers_raise_only_parse_errors(text):
    for parse in (parse_nvme_list, parse_smart_log, parse_id_ctrl, parse_list_subsys):
        try:
            parse(text)
        except ParseError as exc:
            assert "`nvme " in str(exc)
