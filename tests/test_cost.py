"""gates.model.cost: the array catalogue, prices per TB / GB/s / TTFT gain, and the ranking."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.model import CatalogError, RestoreModel, evaluate, load_catalog, rank
from gates.model.cost import parse_catalog

CATALOG = Path(__file__).resolve().parent.parent / "catalog" / "arrays.toml"
GB = 1e9
KV_32K = 32_768 * 126_976


def one(**over):
    array = {"name": "A", "price": 100_000, "capacity_tb": 50, "read_bandwidth": "5 GB/s",
             "bandwidth_basis": "example", **over}
    return {"catalog": {"currency": "CNY"}, "array": [array]}


def test_shipped_catalogue_carries_the_seed_quotes():
    c = load_catalog(CATALOG)
    by = {a.name: a for a in c.arrays}
    assert set(by) == {"FX100", "FX200", "FX300"}
    assert [by[n].price for n in ("FX100", "FX200", "FX300")] == [371_200, 331_200, 924_000]
    # Capacity derived from the seed's own ¥/TB: price / capacity gives the quote back.
    for name, per_tb in (("FX100", 2014), ("FX200", 1797), ("FX300", 5014)):
        assert round(by[name].price / by[name].capacity_tb) == pytest.approx(per_tb, abs=1)
    assert by["FX100"].read_bandwidth == 5.23 * GB and by["FX100"].bandwidth_basis != "example"
    assert by["FX100"].link == 12.5 * GB  # one 100GbE port
    assert {by["FX200"].bandwidth_basis, by["FX300"].bandwidth_basis} == {"example"}
    assert "example value" in evaluate(c, 1e9, baseline_bps=0.5e9)[1].note


def test_every_key_in_the_shipped_catalogue_has_a_comment():
    for line in CATALOG.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            assert "#" in line.split("=", 1)[1], f"no comment on: {line}"


def test_prices_by_hand():
    c = parse_catalog(one())
    [row] = evaluate(c, 10 * GB, baseline_bps=1 * GB)
    assert (row.price_per_tb, row.price_per_gbps) == (2000, 20_000)
    assert (row.restore_s, row.ttft_s) == (2.0, 2.0)
    assert row.ttft_reduction == pytest.approx(0.8)  # 10 s → 2 s
    assert row.seconds_saved == pytest.approx(8.0)
    assert row.price_per_pct == pytest.approx(100_000 / 80)
    assert row.price_per_s_saved == pytest.approx(100_000 / 8)
    assert (row.units_needed, row.workload_price) == (1, 100_000)


def test_capacity_decides_how_many_arrays_a_workload_needs():
    c = parse_catalog(one())
    [row] = evaluate(c, 10 * GB, capacity_bytes=120e12, baseline_bps=1 * GB)
    assert (row.units_needed, row.workload_price) == (3, 300_000)
    assert row.price_per_pct == pytest.approx(300_000 / 80)
    assert row.read_bps == 5 * GB  # extra arrays add no bandwidth in this model


def test_no_gain_means_no_price_per_gain_and_last_place():
    data = one()
    data["array"].append({**data["array"][0], "name": "slow", "read_bandwidth": "0.5 GB/s",
                          "price": 10})
    rows = evaluate(parse_catalog(data), 10 * GB, baseline_bps=1 * GB)
    slow = rows[1]
    assert slow.ttft_reduction < 0 and slow.price_per_pct is None
    assert [r.name for r in rank(rows, "ttft")] == ["A", "slow"]
    assert [r.name for r in rank(rows, "tb")] == ["slow", "A"]
    with pytest.raises(ValueError, match="rank by one of"):
        rank(rows, "colour")


def test_seed_catalogue_ranking_for_a_32k_context():
    rows = evaluate(load_catalog(CATALOG), KV_32K, baseline_bps=0.98 * GB,
                    restore=RestoreModel())
    assert [r.name for r in rank(rows, "tb")] == ["FX200", "FX100", "FX300"]
    assert rank(rows, "gbps")[0].name == "FX300"  # example bandwidth, and flagged as such
    assert rank(rows, "ttft")[0].name == "FX100"


def test_recompute_baseline():
    [row] = evaluate(parse_catalog(one()), 10 * GB, recompute_s=20.0)
    assert row.ttft_reduction == pytest.approx(0.9)


@pytest.mark.parametrize(("data", "message"), [
    (one(price=-1), r"array\[0\] \(A\)\.price"),
    (one(bandwith="5 GB/s"), r"array\[0\] \(A\)\.bandwith: Extra inputs"),
    (one(read_bandwidth="5 Gb/s", link="1 Gbit/s"), "exceeds the link ceiling"),
    (one(quoted_price_per_tb=2500), "quoted_price_per_tb says 2,500"),
    (one(read_bandwidth="fast"), "read_bandwidth"),
    (one(bandwidth_basis="guess"), "bandwidth_basis"),
    ({"catalog": {"currency": "CNY"}, "array": []}, "array: List should have at least 1"),
    ({"catalog": {"curency": "CNY"}, "array": one()["array"]}, "catalog.curency"),
    ({**one(), "arrays": []}, "unknown top-level key 'arrays'"),
])
def test_catalogue_errors_name_the_file_and_key(data, message):
    with pytest.raises(CatalogError, match=message) as info:
        parse_catalog(data, "site/arrays.toml")
    assert str(info.value).startswith("site/arrays.toml: ")


def test_unreadable_catalogues(tmp_path):
    with pytest.raises(CatalogError, match="no such file"):
        load_catalog(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[array]\nname = ")
    with pytest.raises(CatalogError, match="bad.toml: not valid TOML"):
        load_catalog(bad)


@given(st.floats(1e5, 1e7), st.floats(1, 1000), st.floats(0.5, 50), st.floats(1.01, 5))
def test_price_per_gain_falls_as_bandwidth_rises_at_equal_price(price, tb, gbps, factor):
    data = one(price=price, capacity_tb=tb, read_bandwidth=gbps * GB)
    data["array"].append({**data["array"][0], "name": "B", "read_bandwidth": gbps * factor * GB})
    a, b = evaluate(parse_catalog(data), 10 * GB, baseline_bps=0.4 * GB)
    assert b.price_per_pct < a.price_per_pct
    assert b.price_per_gbps < a.price_per_gbps
    assert a.price_per_tb == pytest.approx(price / tb)
