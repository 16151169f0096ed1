"""Finding the worker's own cgroups from /proc/self (v1, v2 and hybrid hosts)."""

from __future__ import annotations

from cronsvc.sandbox import cgroup

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_OWN = "9:name=systemd:/\n8:pids:/\n4:memory:/worker/one\n0::/\n"
V2_MOUNTS = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V2_OWN = "0::/system.slice/cronsvc-worker.service/sandbox\n"


def test_v1_controllers_are_read_per_hierarchy():
    assert cgroup._mounts_from(V1_MOUNTS) == {
        "memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids",
        "cgroup2": "/sys/fs/cgroup/unified"}
    assert cgroup._own_paths_from(V1_OWN) == {
        "name=systemd": "", "pids": "", "memory": "/worker/one", "": ""}


def test_v2_has_one_path_for_every_controller():
    assert cgroup._mounts_from(V2_MOUNTS) == {"cgroup2": "/sys/fs/cgroup"}
    assert cgroup._own_paths_from(V2_OWN) == {"": "/system.slice/cronsvc-worker.service/sandbox"}


def test_a_v2_cgroup_that_delegates_no_memory_and_pids_is_not_used(tmp_path):
    proc = tmp_path / "proc"
    parent = tmp_path / "cg" / "worker"
    proc.mkdir()
    parent.mkdir(parents=True)
    (proc / "mountinfo").write_text(f"29 23 0:26 / {tmp_path / 'cg'} rw - cgroup2 cgroup2 rw\n")
    (proc / "cgroup").write_text("0::/worker\n")
    (parent / "cgroup.subtree_control").write_text("cpu io\n")
    assert cgroup.detect(str(proc)) is None


def test_a_host_without_cgroup_mounts_has_none(tmp_path):
    (tmp_path / "mountinfo").write_text("22 1 0:21 / / rw - ext4 /dev/vda rw\n")
    (tmp_path / "cgroup").write_text("0::/\n")
    assert cgroup.detect(str(tmp_path)) is None


def test_a_cgroup_hierarchy_that_fails_leaves_the_sandbox_working_without(monkeypatch, tmp_path):
    from cronsvc.sandbox import Language, Sandbox, Script

    missing = str(tmp_path / "gone")
    monkeypatch.setattr(cgroup, "detect", lambda: cgroup.Hierarchy(2, missing, missing))
    box = Sandbox()
    status = box.available()
    assert (status.ok, status.cgroups) == (True, "none"), status.reason
    assert box.run(Script(Language.SHELL, b"echo still")).stdout == b"still\n"


def test_the_cpu_account_comes_from_cpuacct_on_v1_and_the_group_itself_on_v2(tmp_path, monkeypatch):
    mounts = V1_MOUNTS + "43 31 0:40 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    assert cgroup._mounts_from(mounts)["cpuacct"] == "/sys/fs/cgroup/cpu,cpuacct"
    monkeypatch.setattr(cgroup, "_can_create", lambda hierarchy: True)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(mounts)
    (proc / "cgroup").write_text("9:name=systemd:/\n8:pids:/\n4:memory:/w\n3:cpu,cpuacct:/w\n0::/\n")
    assert cgroup.detect(str(proc)).cpu == "/sys/fs/cgroup/cpu,cpuacct/w"
    (proc / "mountinfo").write_text(V1_MOUNTS)
    assert cgroup.detect(str(proc)).cpu is None  # no cpuacct: bwrap's rusage is all there is
    (proc / "mountinfo").write_text(V2_MOUNTS)
    (proc / "cgroup").write_text(V2_OWN)
    read = cgroup._read
    monkeypatch.setattr(cgroup, "_read", lambda path: "memory pids" if path.endswith("subtree_control") else read(path))
    found = cgroup.detect(str(proc))
    assert found.cpu == found.memory == "/sys/fs/cgroup/system.slice/cronsvc-worker.service/sandbox"
