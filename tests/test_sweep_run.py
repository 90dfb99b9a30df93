"""The engine as the sweep runs it: [sweep] eviction and tiers on the site's own arms only."""

from _llamacpp_fakes import fake_install

from gates.core.configuration import EngineChoice, load_site
from gates.engines import EngineRun
from gates.engines.choice import choose_engine
from gates.sweep.run import sweep_run

MiB = 1024**2


def site_and_run(repo):
    site, _ = load_site(repo / "site.toml")
    return site, EngineRun(arms=site.arms, workload={}, engine="kvgate simulator", real=False)


def test_the_sweeps_tiers_and_eviction_replace_the_site_arms_own(repo):
    site, run = site_and_run(repo)
    assert site.arms["candidate"].gpu_cache == MiB and site.arms["candidate"].cpu_tier is None
    swept = sweep_run(run, site)
    for name in ("baseline", "candidate"):
        arm = swept.arms[name]
        assert (arm.gpu_cache, arm.cpu_tier) == (12 * MiB, 24 * MiB), name
        # the engine is given what the chart draws and the proof holds: one value, said once
        assert "{gpu_cache}" in arm.command and "{cpu_tier}" in arm.command
    assert swept.workload == {"eviction": "none"} and swept.engine == run.engine
    assert site.arms["candidate"].cpu_tier is None  # the site itself is left as it was


def test_an_installed_engines_arms_keep_their_own_and_the_sweep_says_so(repo, tmp_path):
    site, _ = site_and_run(repo)
    fake_install(tmp_path)
    llama = choose_engine(EngineChoice(prefer="llamacpp", slots=4, slot_tokens=1024,
                                       workload={"contexts": 24}),
                          site.arms, tmp_path / "target", root=tmp_path)
    swept = sweep_run(llama, site)
    assert swept.arms == llama.arms
    assert swept.engine.endswith("; [sweep] gpu_cache and cpu_tier not applied: llama.cpp's "
                                 "arms are kvgate's own")
    assert swept.workload == {"contexts": 24, "eviction": "none"}


def test_without_sweep_tiers_the_arms_are_as_written(repo):
    site, run = site_and_run(repo)
    bare = site.model_copy(update={"sweep": site.sweep.model_copy(
        update={"gpu_cache": None, "cpu_tier": None, "eviction": "reset"})})
    swept = sweep_run(run, bare)
    assert swept.arms == run.arms and swept.workload == {"eviction": "reset"}
