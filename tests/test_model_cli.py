"""`kvgate model …`: tables, JSON, help with examples, and clear errors."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gates.commands import add_model_commands, model_command

REPO = Path(__file__).resolve().parent.parent
MODELS = Path(__file__).parent / "data" / "models"


def run(capsys, *argv):
    parser = argparse.ArgumentParser(prog="kvgate")
    add_model_commands(parser.add_subparsers(dest="command", required=True))
    code = model_command(parser.parse_args(["model", *argv]))
    out, err = capsys.readouterr()
    return code, out, err


def test_kv_table_for_the_issue_example(capsys):
    code, out, _ = run(capsys, "kv", "--model", "qwen3-coder-480b", "--dtype", "fp8", "--tp",
                       "8", "--context", "128k")
    assert code == 0
    for text in ("Qwen3-Coder-480B-A35B (FP8, TP8)", "126,976 B", "15,872 B", "16.6 GB",
                 "4,063,232 B", "4,096 (512 × TP8"):
        assert text in out


def test_kv_json_at_bf16(capsys):
    code, out, _ = run(capsys, "kv", "--model", "qwen3-coder-480b", "--dtype", "bf16",
                       "--context", "128k", "--json")
    body = json.loads(out)
    assert code == 0
    assert body["geometry"]["bytes_per_token"] == 253_952
    assert body["chunking"]["context_stored_bytes"] == 33_285_996_544  # ≈ 33.3 GB


def test_kv_from_a_config_file(capsys):
    code, out, _ = run(capsys, "kv", "--model", str(MODELS / "deepseek-v3.json"), "--tp", "8",
                       "--json")
    geometry = json.loads(out)["geometry"]
    assert code == 0
    assert (geometry["attention"], geometry["dtype"]) == ("mla", "bf16")
    assert geometry["stored_bytes_per_token"] == 8 * 70_272


def test_size_table_and_json(capsys):
    args = ("size", "--model", "qwen3-coder-480b", "--sessions", "64", "--context", "32k",
            "--reuse", "4", "--new-contexts-per-s", "2")
    code, out, _ = run(capsys, *args)
    assert code == 0
    for text in ("working set (64 sessions × 4 × 32K)", "1.07 TB", "1.33 TB", "8.32 GB/s"):
        assert text in out
    code, out, _ = run(capsys, *args, "--json")
    assert json.loads(out)["sizing"]["write_bps"] == 2 * 32_768 * 126_976


def test_predict_with_baseline_and_break_even(capsys):
    code, out, _ = run(capsys, "predict", "--tp", "8", "--context", "32k", "--bw", "5.2GB/s",
                       "--baseline-bw", "1GB/s", "--prefill-rate", "8192")
    assert code == 0
    assert "80.8 %" in out  # 1 − 1/5.2, ideal model
    assert "baseline: 1 GB/s baseline" in out
    assert "break-even read bandwidth vs recompute: 1.04 GB/s" in out  # 4.16 GB in 4 s
    assert "assumption: ideal case" in out


def test_predict_calibrates_from_points(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen2.5-32b", "--context", "8k",
                       "--concurrent", "16", "--point", "0.98GB/s=37.97s", "--point",
                       "5.23GB/s=9.30s", "--bw", "12GB/s", "--json")
    body = json.loads(out)
    assert code == 0
    assert body["calibration"]["a_s"] == pytest.approx(2.689, abs=0.01)
    assert body["calibration"]["b_bytes"] == pytest.approx(34.58e9, rel=0.001)
    [p] = body["predictions"]
    assert p["ttft_s"] == pytest.approx(2.689 + 34.58 / 12, rel=0.002)


def test_cost_table_ranks_the_seed_catalogue(capsys):
    code, out, _ = run(capsys, "cost", "--catalog", str(REPO / "catalog" / "arrays.toml"),
                       "--model", "qwen3-coder-480b", "--context", "32k")
    assert code == 0
    for text in ("FX100", "¥371,200", "¥2,014", "¥1,797", "¥5,014", "(example bw)",
                 "TTFT reduction vs 0.98 GB/s"):
        assert text in out
    assert out.index("FX100") < out.index("FX200") < out.index("FX300")


def test_cost_json_with_capacity(capsys):
    code, out, _ = run(capsys, "cost", "--catalog", str(REPO / "catalog" / "arrays.toml"),
                       "--sessions", "20000", "--reuse", "4", "--rank-by", "tb", "--json")
    body = json.loads(out)
    assert code == 0
    assert [r["name"] for r in body["rows"]] == ["FX200", "FX100", "FX300"]
    assert {r["units_needed"] for r in body["rows"]} == {3}  # 416 TB over 184.3 TB arrays


@pytest.mark.parametrize(("argv", "message"), [
    (("kv", "--model", "gpt-5"), "unknown model 'gpt-5'"),
    (("kv", "--model", "qwen2.5-32b", "--tp", "3"), "cannot be split over TP 3"),
    (("cost", "--catalog", "/nonexistent/arrays.toml"), "no such file"),
    (("predict", "--point", "1GB/s=3s", "--point", "1GB/s=4s"), "distinct bandwidths"),
    (("predict", "--bw", "1GB/s", "--efficiency", "0"), "efficiency"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_bad_units_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as info:
        run(capsys, "kv", "--context", "32KB")
    assert info.value.code == 2
    assert "not a token count" in capsys.readouterr().err


def test_help_shows_examples_as_a_subprocess():
    done = subprocess.run([sys.executable, "-m", "gates.commands.model", "model", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0
    assert "kvgate model kv --model qwen3-coder-480b --dtype fp8 --tp 8 --context 128k" in (
        done.stdout)
    assert "qwen3-coder-480b-a35b" in done.stdout  # the built-in models are listed


def test_break_even_never_is_null_in_json_and_said_in_words(capsys):
    argv = ("predict", "--bw", "5GB/s", "--prefill-rate", "1000000000", "--overhead", "1s")
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    assert json.loads(out)["predictions"][0]["break_even_bps"] is None
    code, out, _ = run(capsys, *argv)
    assert "break-even: never" in out


def test_cost_finds_the_shipped_catalogue_from_any_folder(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gates.commands.model", "model", "cost", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {r["name"] for r in json.loads(done.stdout)["rows"]} == {"FX100", "FX200", "FX300"}
