"""The bubblewrap launcher's pure parts: the sandbox's view, limits, errors, cgroup discovery."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from toolbridge._sandbox.bwrap.cgroups import _own_paths, _v1_mounts
from toolbridge._sandbox.bwrap.launcher import SandboxLimits, _view
from toolbridge._sandbox.bwrap.outcome import describe_setup_error, setup_error
from toolbridge._sandbox.bwrap.plan import (
    STAGE_DIR,
    Bind,
    SandboxView,
    Stage,
    group_text,
    hidden_site_packages,
    passwd_text,
    sandbox_args,
    stage_args,
)
from toolbridge._sandbox.bwrap.user import allows
from toolbridge._sandbox.launcher import LaunchSpec

MOUNTINFO = """\
22 1 8:1 / / rw,relatime - ext4 /dev/root rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def _view_of(binds: list[Bind], masks: list[Path] | None = None) -> SandboxView:
    return SandboxView(
        binds=binds, masks=masks or [], cwd=Path("/work"), tmp_size=1024, passwd_fd=5, group_fd=6
    )


def _pairs(args: list[str], option: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, arg in enumerate(args) if arg == option]


def test_the_sandbox_unshares_everything_and_drops_privileges() -> None:
    args = sandbox_args(_view_of([]), None)
    required = ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session")
    assert set(required) <= set(args)
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in args
    last_mount = args.index("--remount-ro")
    assert args[last_mount + 1 : last_mount + 3] == ["/", "--chdir"]


def test_only_system_directories_and_the_spec_paths_are_bound() -> None:
    binds = [Bind(Path("/opt/runtime"), "ro"), Bind(Path("/work"), "ro"), Bind(Path("/scratch"), "rw")]
    args = sandbox_args(_view_of(binds), None)
    read_only = dict(_pairs(args, "--ro-bind"))
    assert read_only["/usr"] == "/usr"
    assert read_only["/opt/runtime"] == "/opt/runtime"
    assert read_only["/work"] == "/work"
    assert _pairs(args, "--bind") == [("/scratch", "/scratch")]
    bound_targets = set(read_only.values()) | {target for _, target in _pairs(args, "--ro-bind-try")}
    assert not {"/", "/home", "/root", "/etc", "/var", "/proc", "/sys"} & bound_targets
    # /tmp is a private tmpfs of bounded size, before the binds that may sit inside it.
    size_at = args.index("--size")
    assert args[size_at + 1] == "1024"
    assert args[size_at + 2 : size_at + 4] == ["--tmpfs", "/tmp"]
    assert size_at < args.index("/opt/runtime")


def test_as_root_every_source_is_staged_for_the_unprivileged_second_stage() -> None:
    stage = Stage()
    binds = [Bind(Path("/root/.cache/runtime"), "ro"), Bind(Path("/tmp/snippet"), "rw")]
    inner = sandbox_args(_view_of(binds), stage)
    assert _pairs(inner, "--ro-bind")[-1] == (f"{STAGE_DIR}/0", "/root/.cache/runtime")
    assert _pairs(inner, "--bind") == [(f"{STAGE_DIR}/1", "/tmp/snippet")]
    outer = stage_args(stage)
    assert outer[:3] == ["--dev-bind", "/", "/"]
    assert _pairs(outer, "--ro-bind") == [("/root/.cache/runtime", f"{STAGE_DIR}/0")]
    assert _pairs(outer, "--bind") == [("/tmp/snippet", f"{STAGE_DIR}/1")]
    # The staging directory may be traversed by the sandbox uid, not listed.
    assert outer[outer.index(STAGE_DIR) - 3 : outer.index(STAGE_DIR)] == ["--perms", "0711", "--dir"]


def test_masks_hide_a_directory_behind_an_empty_read_only_tmpfs() -> None:
    hidden = Path("/opt/python/lib/python3.11/site-packages")
    args = sandbox_args(_view_of([Bind(Path("/opt/python"), "ro")], [hidden]), None)
    at = args.index(str(hidden))
    assert args[at - 1] == "--tmpfs"
    assert args[at + 1 : at + 3] == ["--remount-ro", str(hidden)]


def test_an_installations_site_packages_are_hidden_but_a_venvs_are_not(tmp_path: Path) -> None:
    installation = tmp_path / "python"
    (installation / "lib/python3.11/site-packages").mkdir(parents=True)
    venv = tmp_path / "venv"
    (venv / "lib/python3.11/site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /x\n")
    assert hidden_site_packages(installation) == [installation / "lib/python3.11/site-packages"]
    assert hidden_site_packages(venv) == []


def test_the_cwd_is_read_only_unless_it_is_writable(tmp_path: Path) -> None:
    def view(writable: list[Path]) -> SandboxView:
        spec = LaunchSpec(
            argv=["true"],
            env={},
            cwd=tmp_path,
            timeout=1,
            writable_paths=writable,
            socket_dir=Path("/run/sock"),
        )
        return _view(spec, 5, 6, 1024)

    assert Bind(tmp_path, "ro") in view([]).binds
    assert Bind(tmp_path, "rw") in view([tmp_path]).binds
    assert Bind(tmp_path, "ro") not in view([tmp_path]).binds
    assert Bind(Path("/run/sock"), "ro") in view([]).binds


def test_generated_accounts_name_the_sandbox_user() -> None:
    passwd = passwd_text(2000000007, 2000000000)
    assert "sandbox:x:2000000007:2000000000:sandbox:/tmp:/usr/sbin/nologin" in passwd
    assert "sandbox:x:2000000000:" in group_text(2000000000)


def test_permission_bits_are_read_for_the_right_class(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("")
    path.chmod(0o750)
    st = path.stat()
    assert allows(st, st.st_uid, -1, 7)
    assert allows(st, -2, st.st_gid, 5)
    assert not allows(st, -2, st.st_gid, 2)
    assert not allows(st, -2, -2, 4)
    assert stat.S_IMODE(st.st_mode) == 0o750


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory", 0),
        ("processes", 4),
        ("open_files", 8),
        ("cpu_time", 0),
        ("cpus", 0.0),
        ("tmp_size", -1),
        ("file_size", 1.5),
        ("memory", True),
    ],
)
def test_limits_refuse_values_a_sandbox_cannot_run_with(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"SandboxLimits.{field}"):
        SandboxLimits(**{field: value})  # type: ignore[arg-type]


def test_default_limits_are_generous_enough_for_node() -> None:
    limits = SandboxLimits()
    assert limits.memory > 512 * 1024 * 1024  # Node aborts under an address space of 512 MiB
    assert limits.processes >= 64


def test_bwraps_own_complaints_are_told_apart_from_the_commands_output() -> None:
    assert setup_error(b"bwrap: Can't chdir to /x: Permission denied\n") == (
        "bwrap: Can't chdir to /x: Permission denied"
    )
    assert setup_error(b"Traceback (most recent call last):\nbwrap: x\n") is None
    assert setup_error(b"") is None


def test_setup_errors_say_what_to_change() -> None:
    spec = LaunchSpec(argv=["node"], env={"PATH": "/rt/bin:/usr/bin"}, cwd=Path("/w"), timeout=1)
    assert describe_setup_error("bwrap: execvp node: No such file or directory", spec) == (
        "cannot start 'node': not found on the sandbox PATH '/rt/bin:/usr/bin'"
    )
    userns = describe_setup_error(
        "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
        "non-privileged user namespaces.",
        spec,
    )
    assert "unprivileged user namespaces" in userns
    assert "sysctl" in userns
    chdir = describe_setup_error("bwrap: Can't chdir to /w: Permission denied", spec)
    assert "working directory /w" in chdir


def test_cgroup_v1_controllers_are_found_in_mountinfo() -> None:
    mounts = _v1_mounts(MOUNTINFO)
    assert mounts == {
        "cpu": Path("/sys/fs/cgroup/cpu,cpuacct"),
        "memory": Path("/sys/fs/cgroup/memory"),
        "pids": Path("/sys/fs/cgroup/pids"),
    }
    own = _own_paths("4:memory:/process_api/abc\n8:pids:/\n2:cpu,cpuacct:/\n0::/\n")
    assert own["memory"] == "/process_api/abc"
    assert own["cpu"] == own["cpuacct"] == "/"
