"""`kvgate sweep` end to end on simulator arms over loopback: sizes measured, committed, resumed.

Everything is real: the launched engine processes, HTTP, the KV files on the target (a loop
device of its own where root allows, tests/_owndisk.py), fio's device reference, SQLite, the
signed page. The baseline arm reads its tier at 1 MB/s and the candidate's is unthrottled, so
the candidate clears G3's limits at every size by a wide margin whatever the machine is doing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _ctrlc import sigint_as_in_a_terminal
from _owndisk import own_disk
from _timing import accept_unfair

from gates.inference import SweepPoint
from gates.report import new_key
from gates.report.pages import self_hashed
from gates.report.sealing import check_seal
from gates.report.sweep_page import SWEEP_HASH_KEY, SweepRecord

WORLD_ENV = "KVGATE_E2E_WORLD"
SIM = ('["{python}", "-m", "gates.sim", "--profile", "tiny", "--port", "{port}", '
       '"--prefill-tokens-per-s", "2000", "--gpu-cache", "{gpu_cache}", "--cpu-tier", '
       '"{cpu_tier}"')
KiB = 1024


def site_text(target: Path, sizes: list[str], pairs: int = 2, tiers: str = "") -> str:
    # The arms' own GPU cache is one 16 KiB chunk: every size restores unless tiers (the
    # [sweep] gpu_cache and cpu_tier lines) give the sweep bigger ones.
    arm = ('kind = "launch"\nengine = "kvgate-sim"\nmodel = "kvgate-sim-tiny"\n'
           'startup_timeout = "60s"\nstop_timeout = "10s"\nwrite_quiet = "0.3s"\n'
           'gpu_cache = "16KiB"\n')
    return f"""
[site]
name = "sweep site"
[target]
directory = "{target}"
create = true
min_free = "0B"
[fio]
file_size = "16MiB"
[workload]
contexts = 17  # G2's levels need 16; the sweep sets its own per size
context_tokens = 256
question_tokens = 8
output_tokens = 8
chunk_tokens = 16
kv_bytes_per_token = 1024
warmup = 1
[sweep]
sizes = {json.dumps(sizes)}
pairs = {pairs}
concurrency = 2
{tiers}
[arms.baseline]
{arm}command = {SIM}, "--kv-dir", "{{kv_dir}}", "--read-limit", "1MB/s"]
kv_dir = "{target}/kv-baseline"
[arms.candidate]
{arm}command = {SIM}, "--kv-dir", "{{kv_dir}}"]
kv_dir = "{target}/kv-candidate"
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory, repo):
    root = tmp_path_factory.mktemp("sweep")
    (root / "thresholds.toml").write_text((repo / "thresholds.toml").read_text())
    # The sweeps sign with a key of the world's own (tests never use the runner's key).
    private, public, _ = new_key(root / "keys" / "performer")
    (root / "signing.env").write_text(f"{private}\n{public}\n")
    with own_disk(root / "disk") as disk:
        (root / "disk-note.txt").write_text(f"targets on {disk}")
        yield root


def sweep(world: Path, *args: str, site: str = "", out: str = "out",
          popen: bool = False):
    argv = [sys.executable, "-m", "gates.cli", "sweep", "--out", str(world / out), *args]
    if site:
        path = world / f"site-{abs(hash(site))}.toml"
        path.write_text(site)
        argv += ["--site", str(path), "--thresholds", str(world / "thresholds.toml")]
    private = (world / "signing.env").read_text().split()[0]
    env = {**os.environ, WORLD_ENV: str(world), "KVGATE_SIGNING_KEY": private}
    if popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True,
                                preexec_fn=sigint_as_in_a_terminal)
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def record_of(world: Path, out: str = "out") -> tuple[SweepRecord, Path]:
    folder = next(p for p in (world / out).glob("sweep-*") if p.is_dir())  # not its bundle
    body = json.loads((folder / "sweep.json").read_text())
    return SweepRecord.model_validate({k: v for k, v in body.items()
                                       if k != SWEEP_HASH_KEY}), folder


BUSY = "the machine is busy"  # the load generator's own word when other processes took the CPU


def fair(done, r: SweepRecord) -> dict[int, SweepPoint]:
    """The points the machine gave a fair chance, by contexts; a point whose load generator was
    unfit while other processes took the CPU is accepted, visibly (tests/_timing.py), and its
    exit code 1 with it; any other error fails the test."""
    points = {}
    for p in r.points:
        if p.error.startswith("INCONCLUSIVE: the load generator was unfit") and BUSY in p.error:
            accept_unfair({}, f"sweep point {p.contexts} contexts: {p.error}")
            continue
        assert not p.error, (p, done.stdout + done.stderr)
        points[p.contexts] = p
    assert done.returncode == (0 if len(points) == len(r.points) else 1), \
        done.stdout + done.stderr
    return points


# 256-token contexts of 1 KiB a token are 16 chunks of 16 KiB: 3 contexts and the warm-up's
# 4 chunks fit a 56-chunk GPU cache, 5 contexts a 96-chunk CPU tier, 9 contexts neither.
TIERS = 'gpu_cache = "896KiB"\ncpu_tier = "1536KiB"'


def test_a_sweep_measures_every_size_and_writes_a_sealed_page(world):
    target = world / "disk" / "one"
    done = sweep(world, site=site_text(target, ["768KiB", "1280KiB", "2304KiB"], tiers=TIERS))
    r, folder = record_of(world)
    assert [(p.contexts, p.working_set) for p in r.points] == \
        [(3, 768 * KiB), (5, 1280 * KiB), (9, 2304 * KiB)]
    points = fair(done, r)
    for p in points.values():
        assert len(p.baseline_ttft_p50) == len(p.candidate_ttft_p50) == 2
    # In the GPU cache (no eviction: the working set evicts) and in the CPU tier, both arms
    # answer from memory: no gain, and no storage read to prove.
    if gpu := points.get(3):
        assert not gpu.clears and not gpu.proven and "GPU-cache hits" in gpu.proof_note, gpu
    if cpu := points.get(5):
        assert not cpu.clears and cpu.proof_note.startswith("INCONCLUSIVE: ") and \
            "CPU tier (1.5 MiB) can hold the whole working set" in cpu.proof_note, cpu
    # Past both, 1 MB/s against an unthrottled tier: both gains far past G3's limits, at 2
    # pairs' 50 %, and the storage reads proven.
    if storage := points.get(9):
        assert storage.ttft_reduction.level == 0.5 and storage.clears and storage.proven
        assert r.break_even == r.proof_from == 2304 * KiB, r
    assert r.sizes_planned == 3 and r.simulated
    assert [(t.name, t.bytes) for t in r.tiers[:2]] == [("GPU KV cache", 896 * KiB),
                                                        ("CPU tier", 1536 * KiB)]
    assert r.tiers[2].name == "host memory (page cache)"
    # no G1 ran in this world: no candidate bandwidth for the KV model, and the page says so
    assert r.forecast is None and any("no G1 record of this site" in n for n in r.notes)
    # the page and its JSON carry their own hashes; the terminal says where they are
    body = json.loads((folder / "sweep.json").read_text())
    assert body[SWEEP_HASH_KEY] == json.loads(self_hashed(r, SWEEP_HASH_KEY))[SWEEP_HASH_KEY]
    html = (folder / "sweep.html").read_text()
    assert check_seal(html) == "" and "<svg" in html and "Simulated engine" in html
    assert (folder / "sweep.json.sig").is_file() and "Signed by ed25519 key" in html
    assert f"{folder / 'sweep.html'}" in done.stdout
    # every repetition's engine log and the KV device's readings are in the run's evidence
    evidence = world / "out" / r.run_id / "evidence"
    # two pairs of two arms, and two more logs for each pair set aside unfit and measured again
    three = next(p for p in r.points if p.contexts == 3)
    assert len(list(evidence.glob("sweep-arm-*-3ctx-*.log"))) == 4 + 2 * three.set_aside
    assert list(evidence.glob("fio-sweep-5ctx-devref-*.json"))
    assert not (world / "out" / f".{folder.name}.partial").exists()
    public = (world / "signing.env").read_text().split()[1]
    checked = subprocess.run([sys.executable, "-m", "gates.cli", "verify", "--key", public,
                              str(folder)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "every evidence file they list" in checked.stdout
    # a sweep bundles as a run does: its folder and its run's evidence, verified as a bundle
    packed = subprocess.run([sys.executable, "-m", "gates.cli", "bundle", "--out",
                             str(world / "out"), folder.name], capture_output=True, text=True,
                            timeout=120)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    archive = world / "out" / f"{folder.name}.bundle.tar.gz"
    assert f"run(s) {r.run_id}, {folder.name}" in packed.stdout
    checked = subprocess.run([sys.executable, "-m", "gates.cli", "verify", "--key", public,
                              str(archive)], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "every evidence file they list" in checked.stdout


@pytest.mark.parametrize(("sizes", "says"), [
    (["256KiB"], "sweep.sizes[0] = 256 KiB is below the smallest working set at concurrency 2"),
    (["1MiB", "768KiB"], "sizes must grow"),
])
def test_sizes_the_sweep_cannot_measure_are_refused_before_anything_runs(world, sizes, says):
    target = world / "disk" / "bad"
    done = sweep(world, site=site_text(target, sizes), out="bad")
    assert done.returncode == 2 and says in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not list((world / "bad").glob("sweep-*"))


def test_a_finished_sweep_is_not_resumed(world):
    r, folder = record_of(world)
    done = sweep(world, "--resume", r.run_id)
    assert done.returncode == 2 and f"sweep {r.run_id} is finished" in done.stderr


def test_a_sweep_resumed_on_another_workload_is_refused(world):
    from gates.model import sweep_sizes
    from gates.store import Store
    from gates.sweep.store import SweepPlan, SweepStore

    out, run_id = world / "moved", "20261205T000000Z-0a0b0c"
    site = world / "site-moved.toml"
    site.write_text(site_text(world / "disk" / "moved", ["768KiB"]))
    with Store(out) as store:  # a sweep begun with contexts of 512 tokens, not the site's 256
        store.begin_run(run_id, "sweep site")
        SweepStore(store).save_plan(SweepPlan(
            run_id=run_id, site_file=str(site), thresholds_file=str(world / "thresholds.toml"),
            sizes=sweep_sizes([], 2, 512 * KiB), pairs=2, concurrency=2,
            context_bytes=512 * KiB))
    done = sweep(world, "--resume", run_id, out="moved")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "began with contexts of 524,288 B of KV; the site's workload now gives 262,144 B" \
        in done.stderr and "Traceback" not in done.stderr
