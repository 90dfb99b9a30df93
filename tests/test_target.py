"""Target safety: fio writes only its own files under the target directory; raw devices are
written only with --destructive, the serial typed back, and never while anything uses them."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from _loopdev import loop_device, mkfs_xfs, mounted, need_root, tmpfs

from gates.core.configuration import Target
from gates.storage import TargetError, check_directory, resolve_target, watched_device
from gates.storage.jobs import READ_FILE, WRITE_FILE
from gates.storage.target import (
    DeviceFacts,
    device_bytes,
    device_facts,
    ensure_directory,
    raw_device_refusal,
    vet_filenames,
)

MiB = 1024**2
OURS = {READ_FILE, WRITE_FILE}


# ---- file names and the directory ---------------------------------------------------------

@pytest.mark.parametrize("name", ["", "/etc/passwd", "sub/file", "..", ".", "a\x00b", " .. ",
                                  "a:b", "${HOME}", "$jobname", "a\nfilename=/dev/sda",
                                  "back\\slash"])
def test_vet_filenames_refuses_names_that_leave_the_directory(name):
    with pytest.raises(TargetError, match="refusing fio file name"):
        vet_filenames({READ_FILE, name})


def test_vet_filenames_accepts_plain_names():
    assert vet_filenames({READ_FILE, WRITE_FILE, "..hidden-but-plain", "a.b-c_d"}) is None


@pytest.mark.parametrize("bad", ["a:b", "x$HOME", "new\nline"])
def test_directory_fio_would_misread_is_refused(tmp_path, bad):
    # fio splits directory= at ':' and expands '$': the files would land elsewhere.
    directory = tmp_path / bad
    directory.mkdir()
    with pytest.raises(TargetError, match="refusing target directory"):
        check_directory(Target(directory=directory), 0, OURS)


def test_missing_directory_without_create(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(TargetError) as err:
        check_directory(Target(directory=missing), 0, OURS)
    assert str(missing) in str(err.value)
    assert "create = true" in str(err.value)
    assert not missing.exists()


def test_missing_directory_is_created_when_allowed(tmp_path):
    wanted = tmp_path / "made"
    assert check_directory(Target(directory=wanted, create=True), 0, OURS) == wanted
    assert wanted.is_dir()


def test_create_with_missing_parent_is_refused(tmp_path):
    deep = tmp_path / "no-parent" / "target"
    with pytest.raises(TargetError, match="parent") as err:
        check_directory(Target(directory=deep, create=True), 0, OURS)
    assert str(deep.parent) in str(err.value)
    assert not deep.parent.exists()


def test_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(TargetError, match="dangling"):
        check_directory(Target(directory=link, create=True), 0, OURS)


def test_not_a_directory(tmp_path):
    plain = tmp_path / "file"
    plain.write_text("x")
    with pytest.raises(TargetError, match="not a directory"):
        check_directory(Target(directory=plain), 0, OURS)


def test_not_writable_for_an_ordinary_user(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores permission bits; the read-only mount test covers root")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(TargetError, match="not writable"):
            check_directory(Target(directory=locked), 0, OURS)
    finally:
        locked.chmod(0o700)


def test_not_writable_read_only_mount(tmp_path):
    # access(2) reports EROFS even to root, so this holds for every user.
    with tmpfs(tmp_path / "ro", "ro,size=1M") as ro:
        with pytest.raises(TargetError, match="not writable") as err:
            check_directory(Target(directory=ro), 0, OURS)
        assert str(ro) in str(err.value)


def test_create_on_read_only_mount_is_a_target_error(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1M") as ro, \
            pytest.raises(TargetError, match="cannot create"):
        check_directory(Target(directory=ro / "sub", create=True), 0, OURS)


def test_too_little_free_space(tmp_path):
    with tmpfs(tmp_path / "small", "size=8M") as small:
        target = Target(directory=small, min_free=2 * MiB)
        with pytest.raises(TargetError) as err:
            check_directory(target, 16 * MiB, OURS)
        text = str(err.value)
        assert str(small) in text
        assert "16 MiB" in text and "2 MiB" in text  # what is needed, and min_free
        assert "MiB free" in text
        assert "[fio] file_size" in text and "[target] min_free" in text
        # What does fit passes.
        assert check_directory(Target(directory=small), 4 * MiB, OURS) == small


def test_existing_kvgate_files_count_as_reusable(tmp_path):
    with tmpfs(tmp_path / "small", "size=8M") as small:
        for name in OURS:  # an earlier run's files fill most of the filesystem
            (small / name).write_bytes(b"\xa5" * (3 * MiB))
        assert len(os.listdir(small)) == 2
        # 6 MiB needed, ~2 MiB free, but the 6 MiB of our old files will be reused.
        assert check_directory(Target(directory=small), 6 * MiB, OURS) == small
        # A stranger's file is not ours to reuse.
        (small / WRITE_FILE).rename(small / "someone-else.dat")
        with pytest.raises(TargetError, match="free"):
            check_directory(Target(directory=small), 6 * MiB, OURS)


def test_reusable_space_is_what_the_files_occupy(tmp_path):
    with tmpfs(tmp_path / "small", "size=8M") as small:
        for name in OURS:  # sparse: large on paper, nothing allocated
            with (small / name).open("wb") as handle:
                handle.truncate(64 * MiB)
        with pytest.raises(TargetError, match="free"):
            check_directory(Target(directory=small), 16 * MiB, OURS)


def test_reusable_space_counts_each_file_only_up_to_its_share(tmp_path):
    with tmpfs(tmp_path / "small", "size=8M") as small:
        # One big old read file stays as it is (fio does not shrink it); the write file must
        # still find its own room.
        (small / READ_FILE).write_bytes(b"\xa5" * (7 * MiB))
        with pytest.raises(TargetError, match="free"):
            check_directory(Target(directory=small), 2 * 3 * MiB, OURS)


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_our_file_name_taken_by_something_else_is_refused(tmp_path, kind):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target_dir = tmp_path / "target"
    target_dir.mkdir()
    ours = target_dir / WRITE_FILE
    if kind == "symlink":  # fio would follow it and overwrite the victim
        ours.symlink_to(victim)
    elif kind == "directory":
        ours.mkdir()
    else:
        os.mkfifo(ours)
    with pytest.raises(TargetError, match="not a regular file"):
        check_directory(Target(directory=target_dir), 0, OURS)
    assert victim.read_text() == "precious"


# ---- raw devices --------------------------------------------------------------------------

GOOD = DeviceFacts(path="/dev/nvme9n1", is_block=True, serial="S4EWNX0R123456")


@pytest.mark.parametrize(("facts", "destructive", "serial", "expected"), [
    (DeviceFacts(path="/tmp/f", is_block=False), True, "X", "not a block device"),
    (GOOD.__class__(**{**GOOD.__dict__, "mounted_at": ["/mnt/a"]}), True, GOOD.serial,
     "mounted filesystem (/mnt/a)"),
    (GOOD.__class__(**{**GOOD.__dict__, "used_by": ["held by md0"]}), True, GOOD.serial,
     "in use (held by md0)"),
    (GOOD, False, GOOD.serial, "--destructive"),
    (DeviceFacts(path="/dev/loop9", is_block=True, serial=""), True, "anything",
     "cannot read the serial"),
    (GOOD, True, "S4EWNX0R999999", "does not match"),
    (GOOD, True, "", "(nothing) does not match"),
    (GOOD, True, f"  {GOOD.serial}\n", ""),
    (GOOD, True, GOOD.serial, ""),
], ids=["not-block", "mounted", "held", "no-destructive", "no-serial", "wrong-serial",
        "empty-serial", "serial-with-whitespace", "all-good"])
def test_raw_device_refusal(facts, destructive, serial, expected):
    refusal = raw_device_refusal(facts, destructive, serial)
    if expected:
        assert expected in refusal
    else:
        assert refusal == ""


def test_wrong_serial_does_not_reveal_the_real_one():
    assert GOOD.serial not in raw_device_refusal(GOOD, True, "WRONG")


def test_non_block_path_as_device_is_refused(tmp_path):
    fake = tmp_path / "disk.img"
    fake.write_bytes(b"\0" * 4096)
    target = Target(directory=tmp_path, device=str(fake))
    with pytest.raises(TargetError, match="not a block device"):
        resolve_target(target, 0, OURS, destructive=True, typed_serial="x")
    assert fake.read_bytes() == b"\0" * 4096


def test_missing_device_is_refused(tmp_path):
    target = Target(directory=tmp_path, device=str(tmp_path / "no-such-device"))
    with pytest.raises(TargetError, match="not a block device"):
        resolve_target(target, 0, OURS, destructive=True, typed_serial="x")


def test_resolve_target_directory(tmp_path):
    directory, device = resolve_target(Target(directory=tmp_path), MiB, OURS, False, "")
    assert (directory, device) == (tmp_path, "")


def test_resolve_target_vets_file_names(tmp_path):
    with pytest.raises(TargetError, match="refusing fio file name"):
        resolve_target(Target(directory=tmp_path), 0, {"../escape"}, False, "")


# ---- device_facts on a fake sysfs (SCSI disk with partitions, holders, swap) --------------

def _fake_sysfs(root: Path) -> tuple[Path, Path]:
    """/sys/class/block with sdz (VPD serial) and its partitions sdz1, sdz2."""
    devices = root / "devices" / "sdz"
    (devices / "device").mkdir(parents=True)
    (devices / "dev").write_text("65:144\n")
    (devices / "holders").mkdir()
    serial = b"  WD-123456789  "
    (devices / "device" / "vpd_pg80").write_bytes(bytes([0, 0x80, 0, len(serial)]) + serial)
    for n, minor in ((1, 145), (2, 146)):
        part = devices / f"sdz{n}"
        (part / "holders").mkdir(parents=True)
        (part / "partition").write_text(f"{n}\n")
        (part / "dev").write_text(f"65:{minor}\n")
    sysfs = root / "class-block"
    sysfs.mkdir()
    (sysfs / "sdz").symlink_to(devices)
    for n in (1, 2):
        (sysfs / f"sdz{n}").symlink_to(devices / f"sdz{n}")
    dev = root / "dev"
    dev.mkdir()
    for name in ("sdz", "sdz1", "sdz2"):
        (dev / name).write_text("")
    return sysfs, dev


def _mountinfo(*rows: tuple[str, str, str]) -> str:
    return "".join(f"{i} 1 {num} / {point} rw,relatime - xfs {source} rw\n"
                   for i, (num, point, source) in enumerate(rows, start=30))


def test_device_facts_fake_sysfs_idle_disk(tmp_path):
    sysfs, dev = _fake_sysfs(tmp_path)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(_mountinfo(("254:0", "/", "/dev/vda"), ("0:21", "/proc", "proc")))
    swaps = tmp_path / "swaps"
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n")
    facts = device_facts(str(dev / "sdz"), sysfs, mountinfo, swaps)
    assert facts.is_block is False  # a plain file stands in for the node
    assert facts.serial == "WD-123456789"
    assert facts.mounted_at == [] and facts.used_by == []


def test_device_facts_sees_a_partition_mounted_under_another_name(tmp_path):
    # /dev/root (or any alias) in the mount table: the device number still gives it away.
    sysfs, dev = _fake_sysfs(tmp_path)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(_mountinfo(("65:146", "/srv/with\\040space", "/dev/root")))
    facts = device_facts(str(dev / "sdz"), sysfs, mountinfo, tmp_path / "no-swaps")
    assert facts.mounted_at == ["/srv/with space"]


def test_device_facts_sees_holders_and_swap(tmp_path):
    sysfs, dev = _fake_sysfs(tmp_path)
    (sysfs / "sdz1" / "holders" / "md127").mkdir()
    swaps = tmp_path / "swaps"
    swaps.write_text(f"Filename\tType\tSize\tUsed\tPriority\n{dev / 'sdz2'}\tpartition\t8\t0\t-2\n")
    facts = device_facts(str(dev / "sdz"), sysfs, tmp_path / "empty", swaps)
    assert facts.used_by == ["held by md127", f"active swap {dev / 'sdz2'}"]
    refusal = raw_device_refusal(DeviceFacts(**{**facts.__dict__, "is_block": True}), True,
                                 facts.serial)
    assert "in use" in refusal


def test_device_facts_partition_takes_the_disk_serial(tmp_path):
    sysfs, dev = _fake_sysfs(tmp_path)
    facts = device_facts(str(dev / "sdz1"), sysfs, tmp_path / "none", tmp_path / "none")
    assert facts.serial == "WD-123456789"


# ---- device_facts on a real loop device ---------------------------------------------------

def test_device_facts_real_loop_device(tmp_path):
    need_root("losetup", "mkfs.xfs", "mount")
    # mkfs.xfs (xfsprogs >= 5.19) refuses filesystems under 300 MB; the image is sparse.
    with loop_device(tmp_path / "disk.img", 320 * MiB) as loopdev:
        facts = device_facts(loopdev)
        assert facts.is_block is True
        assert stat.S_ISBLK(os.stat(loopdev).st_mode)
        assert facts.serial == ""  # loop devices have none
        assert facts.mounted_at == [] and facts.used_by == []
        # Unmounted, consenting, but no serial to confirm: still refused.
        with pytest.raises(TargetError, match="cannot read the serial"):
            resolve_target(Target(directory=tmp_path, device=loopdev), 0, OURS, True, "x")

        mkfs_xfs(loopdev)
        with mounted(loopdev, tmp_path / "mnt") as mnt:
            facts = device_facts(loopdev)
            assert str(mnt) in facts.mounted_at
            refusal = raw_device_refusal(
                DeviceFacts(**{**facts.__dict__, "serial": "SER"}), True, "SER")
            assert "mounted" in refusal  # even with --destructive and the right serial
            with pytest.raises(TargetError, match="mounted filesystem") as err:
                resolve_target(Target(directory=tmp_path, device=loopdev), 0, OURS,
                               destructive=True, typed_serial="")
            assert str(mnt) in str(err.value)
        assert device_facts(loopdev).mounted_at == []


def test_the_candidates_kv_must_live_on_the_targets_filesystem(tmp_path):
    from gates.storage import foreign_filesystem

    assert foreign_filesystem(tmp_path / "kv" / "not-yet", tmp_path) == ""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) beside the test's tmp folder")
    why = foreign_filesystem(shm / "kv", tmp_path)
    assert "another filesystem" in why and str(tmp_path) in why


# ---- the device whose counters show other I/O on the target ------------------------------

def test_ensure_directory_creates_only_what_check_directory_would(tmp_path):
    made = tmp_path / "made"
    assert ensure_directory(Target(directory=made, create=True)) == made and made.is_dir()
    with pytest.raises(TargetError, match="does not exist"):
        ensure_directory(Target(directory=tmp_path / "absent"))
    with pytest.raises(TargetError, match="refusing target directory"):
        ensure_directory(Target(directory=tmp_path / "a:b", create=True))
    assert not (tmp_path / "a:b").exists()


def _fake_dev_block(root: Path, number: str, partition: bool) -> Path:
    """/sys/dev/block/MAJ:MIN linking into a disk vdz (or its partition vdz1)."""
    disk = root / "devices" / "vdz"
    node = disk / "vdz1" if partition else disk
    node.mkdir(parents=True)
    if partition:
        (node / "partition").write_text("1\n")
    dev_block = root / "dev-block"
    dev_block.mkdir()
    (dev_block / number).symlink_to(node)
    return dev_block


@pytest.mark.parametrize("partition", [False, True])
def test_watched_device_is_the_disk_under_the_target(tmp_path, partition):
    st = os.stat(tmp_path)
    number = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysfs = _fake_dev_block(tmp_path / "sys", number, partition)
    # a partition's whole disk: I/O on its other partitions contends for the same drive
    assert watched_device(tmp_path, sysfs) == ("vdz", "")


def test_watched_device_says_why_there_is_none(tmp_path):
    (tmp_path / "empty").mkdir()
    name, why = watched_device(tmp_path, tmp_path / "empty")
    assert name == "" and "on no local block device" in why and str(tmp_path) in why
    name, why = watched_device(tmp_path / "gone")
    assert name == "" and "cannot stat" in why


def test_device_bytes_reads_sectors_from_sysfs_stat(tmp_path):
    (tmp_path / "vdz").mkdir()
    # read I/Os, merges, sectors, ticks; write I/Os, merges, sectors, ticks; ...
    (tmp_path / "vdz" / "stat").write_text("  100 0 2048 10  50 0 4096 20 0 30 30\n")
    assert device_bytes("vdz", tmp_path) == (2048 * 512, 4096 * 512)
    assert device_bytes("absent", tmp_path) is None
    (tmp_path / "vdz" / "stat").write_text("garbage\n")
    assert device_bytes("vdz", tmp_path) is None


def test_the_real_device_under_a_directory_has_counters(tmp_path):
    name, why = watched_device(tmp_path)
    if not name:
        pytest.skip(why)
    counted = device_bytes(name)
    assert counted is not None and all(n >= 0 for n in counted)


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_a_symlinked_target_reaches_fio_as_the_directory_it_leads_to(tmp_path):
    """#27: fio lstats directory= and refuses a link ("is not a directory"): kvgate hands it
    the real directory, and real fio writes its file there."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    given = ensure_directory(Target(directory=tmp_path / "link"))
    assert given == real.resolve()
    done = subprocess.run(["fio", "--name=t", f"--directory={given}", "--size=64k",
                           "--rw=write", "--bs=4k", "--output-format=terse"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert list(real.iterdir())
