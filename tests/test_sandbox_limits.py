"""Each sandboxed command's limits and the walls around unix sockets, through the real bash tool with an
asker that always denies: a program over a limit ends in an error naming that limit and the next command
runs; without the network no unix socket reaches the host, with it one does."""
import os
import platform
import secrets
import socket
import struct
import textwrap
from pathlib import Path

import pytest
import trio

from orchestrator.tools import cgroup, seccomp
from orchestrator.tools.base import ToolContext, ToolOutput
from orchestrator.tools.jail import Confinement, Settings, SettingsError, backend
from orchestrator.tools.limits import MIB, Limits, ran_into, stopped
from orchestrator.tools.process import run_command
from orchestrator.tools.session import ToolSession
from orchestrator.tools.shell import BASH, JOB_STATUS

WHY = backend().unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"no OS sandbox here: {WHY}")

# Low, so every hog ends within a second or two of CPU and the machine barely notices.
LOW = Limits(processes=32, memory=96 * MIB, file_size=MIB, tmp=2 * MIB, shm=2 * MIB, cpu=1, job_cpu=1,
             disk=48 * MIB)
CELLS = cgroup.place() is not None

PROGRAMS = {  # programs as an agent would write them: files, so only the walls see what they do
    "forks.py": """
        import os, time
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
    """,
    "hog.py": "b = bytearray(512 * 1024 * 1024)\n",
    "hogs.py": """
        import os, sys, time
        kids = []
        for _ in range(3):  # each below the limit, together above it: only a cgroup sees the sum
            pid = os.fork()
            if pid == 0:
                b = bytearray(45 * 1024 * 1024)
                for i in range(0, len(b), 4096):
                    b[i] = 1
                time.sleep(1)
                os._exit(0)
            kids.append(pid)
        sys.exit(1 if any(os.waitpid(k, 0)[1] for k in kids) else 0)
    """,
    "fill.py": """
        import os, sys
        os.makedirs(sys.argv[1], exist_ok=True)
        for n in range(int(sys.argv[2])):
            with open(os.path.join(sys.argv[1], str(n)), "wb") as f:
                f.write(bytes(256 * 1024))
    """,
    "spin.py": "while True:\n    pass\n",
    "loop.sh": "for i in $(seq 100); do sleep 30 & done\nwait\n",
    "connect.py": """
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect("\\0" + sys.argv[1][1:] if sys.argv[1].startswith("@") else sys.argv[1])
        print("CONNECTED")
    """,
}


async def deny(agent, category, summary):
    return "deny"


async def grant(agent, category, summary):
    return "once"


async def call(session, **raw) -> ToolOutput:
    out = await BASH.run(BASH.parse(raw), ToolContext(agent="dev", call_id="c1", session=session))
    return out if isinstance(out, ToolOutput) else ToolOutput(out)


@pytest.fixture
def ws(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in PROGRAMS.items():
        (ws / name).write_text(textwrap.dedent(text).lstrip())
    return ws


def _no_cells_left():
    place = cgroup.place()
    if place is None:
        return True
    return not [d for p in place.parents.values() for d in p.glob(f"{cgroup.PREFIX}{os.getpid()}-*")]


# --- each limit, then the next command ----------------------------------------------------------

HOGS = [
    ("processes", "python3 forks.py"),
    ("memory", "python3 hog.py"),
    ("tmp", "python3 fill.py /tmp/f 40"),
    ("tmp", "python3 fill.py /var/tmp/f 40"),  # the jail's /var/tmp is its /tmp
    ("shm", "python3 fill.py /dev/shm/f 40"),
    ("file_size", "head -c 8M /dev/zero > big.bin"),
    ("file_size", "python3 -c \"open('big.bin', 'wb').write(bytes(8 << 20))\""),
    ("cpu", "python3 spin.py"),
    # many files, each under the file size limit: only the disk limit sees them all
    ("disk", "mkdir fill && for i in $(seq 1 400); do head -c 512K /dev/zero > fill/$i; done"),
]


@pytest.mark.parametrize("limit, command", HOGS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOGS)])
async def test_a_command_over_a_limit_is_told_which_and_the_next_one_runs(ws, limit, command):
    if limit == "processes" and os.getuid() == 0 and not CELLS:
        pytest.skip("root's processes are not counted by RLIMIT_NPROC, and no cgroup can be made here")
    session = ToolSession(ws, ask=deny, sandbox=Settings(limits=LOW))
    out = await call(session, command=command, timeout=60)
    assert out.is_error and out.text.endswith(stopped(limit, LOW)), out.text
    assert "config.toml" in out.text.splitlines()[-1]
    after = await call(session, command="echo fine && test ! -e /tmp/f && echo fresh")  # its own /tmp again
    assert not after.is_error and after.text.startswith("fine\nfresh\n"), after.text
    assert _no_cells_left()


async def test_a_shell_at_the_process_limit_times_out_retrying_and_is_told_why(ws):
    if os.getuid() == 0 and not CELLS:
        pytest.skip("root's processes are not counted by RLIMIT_NPROC, and no cgroup can be made here")
    session = ToolSession(ws, ask=deny, sandbox=Settings(limits=LOW))
    out = await call(session, command="bash loop.sh", timeout=2)
    assert out.is_error and "[timed out after 2 s" in out.text and out.text.endswith(stopped("processes", LOW))
    assert not (await call(session, command="echo fine")).is_error


@pytest.mark.skipif(not CELLS, reason="no cgroup can be made here; each process is still held by RLIMIT_DATA")
async def test_processes_together_over_the_memory_limit_are_stopped_by_the_cgroup(ws):
    session = ToolSession(ws, ask=deny, sandbox=Settings(limits=LOW))
    out = await call(session, command="python3 hogs.py", timeout=60)
    assert out.is_error and out.text.endswith(stopped("memory", LOW)), out.text
    assert _no_cells_left()
    roomy = ToolSession(ws, ask=deny, sandbox=Settings(limits=Limits(memory=512 * MIB)))
    assert (await call(roomy, command="python3 hogs.py", timeout=60)).text.endswith("[exit code 0]")


async def test_a_background_job_over_a_limit_says_which_and_the_next_job_runs(ws):
    async with trio.open_nursery() as nursery:
        session = ToolSession(ws, ask=deny, spawn=lambda fn, *a: nursery.start_soon(fn, *a),
                              sandbox=Settings(limits=LOW))
        counted = os.getuid() != 0 or CELLS  # root's forks are counted only by a cgroup
        hogs = {"cpu": "python3 spin.py", "tmp": "python3 fill.py /tmp/f 40", "memory": "python3 hog.py",
                **({"processes": "python3 forks.py"} if counted else {})}
        jobs = {}
        for limit, command in (*hogs.items(), ("none", "echo fine")):
            said = await call(session, command=command, background=True)
            jobs[limit] = session.jobs.get(said.text.split()[3])
        with trio.fail_after(30):
            for job in jobs.values():
                await job.done.wait()
        ctx = ToolContext(agent="dev", call_id="c2", session=session)
        statuses = {k: await JOB_STATUS.run(JOB_STATUS.parse({"job": j.id}), ctx) for k, j in jobs.items()}
    for limit in hogs:
        assert statuses[limit].endswith(stopped(limit, LOW, job=True)), statuses[limit]
    assert "job_cpu" in statuses["cpu"] and "[sandbox: /tmp is full]" in jobs["tmp"].output.recent().decode()
    assert "exited with code 0" in statuses["none"] and "stopped" not in statuses["none"]
    assert _no_cells_left()


async def test_the_jail_keeps_root_and_dev_read_only_and_var_its_own(ws):
    session = ToolSession(ws, ask=grant)
    tag = secrets.token_hex(6)
    out = await call(session, command=f"touch /planted; touch /dev/planted; echo x > /dev/null && echo null-ok; "
                                      f"echo x > /dev/shm/s && echo shm-ok; test -e /var/log && echo log-seen; "
                                      f"test -d /var/lib/dpkg && echo dpkg-seen; echo t > /var/tmp/{tag} && "
                                      f"cat /tmp/{tag}")
    said = out.text.splitlines()
    assert sum("Read-only file system" in line for line in said) == 2 and {"null-ok", "shm-ok", "t"} <= set(said)
    assert "log-seen" not in said and ("dpkg-seen" in said) == os.path.isdir("/var/lib/dpkg")
    assert not Path(f"/var/tmp/{tag}").exists()


def test_limits_are_parsed_from_settings_and_refused_clearly(tmp_path):
    s = Settings.parse({"processes": 64, "memory": "512M", "file_size": "2 GiB", "tmp": "unlimited",
                        "cpu": "10m", "job_cpu": "2h", "shm": 64 * MIB})
    assert s.limits == Limits(64, 512 * MIB, 2 << 30, None, 64 * MIB, 600, 7200)
    assert Settings.parse(None).limits == Limits() and Settings.parse("off").limits == Limits()
    for bad, said in (({"processes": 2}, "sandbox.processes: expected a number"), ({"memory": "lots"}, "sandbox.memory"),
                      ({"memory": "1k"}, "at least 16 MiB"), ({"cpu": "0"}, "sandbox.cpu"), ({"pids": 3}, "unknown key")):
        with pytest.raises(SettingsError, match=said):
            Settings.parse(bad)
    team = Settings.parse({"memory": "1G", "processes": 100})
    agent = team.over({"memory": "4G"})
    assert agent.limits.memory == 4 << 30 and agent.limits.processes == 100 and agent.limits.cpu == 600
    assert team.over("off").limits == team.limits


def test_config_team_and_agent_limits_layer_and_a_bad_one_names_its_file(tmp_path, monkeypatch):
    from orchestrator.core.errors import InputError
    from orchestrator.room.sandboxes import sandboxes as _sandboxes
    from orchestrator.team.schema import AgentDef, Team

    config = tmp_path / "config.toml"
    config.write_text('[sandbox]\nprocesses = 64\nmemory = "1G"\n')
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", str(config))
    team = Team(sandbox={"cpu": 30}, agents=[AgentDef(name="big", sandbox={"memory": "4G"}), AgentDef(name="dev")])
    room, agents = _sandboxes(team, tmp_path)
    assert room.limits == Limits(processes=64, memory=1 << 30, cpu=30)
    assert agents["big"].limits == Limits(processes=64, memory=4 << 30, cpu=30)
    config.write_text('[sandbox]\ntmp = "a lot"\n')
    with pytest.raises(InputError, match=r"config.toml: \[sandbox\]: sandbox.tmp: expected a size"):
        _sandboxes(team, tmp_path)


def test_which_limit_a_failure_names():
    def said(code, text, counted=frozenset(), limits=Limits()):
        return ran_into(code, text, limits, counted)
    assert said(0, "MemoryError") is None
    assert said(1, "", frozenset({"processes"})) == "processes"
    assert said(128 + 24, "") == "cpu" and said(-25, "") == "file_size" and said(159, "") == "syscall"
    assert said(1, "x\n[sandbox: /dev/shm is full]\n") == "shm"
    assert said(1, "bash: fork: retry: Resource temporarily unavailable") == "processes"
    assert said(1, "Traceback ...\nMemoryError\n") == "memory"
    assert said(1, "MemoryError", limits=Limits(memory=None)) is None  # not ours to name
    assert said(1, "No such file or directory") is None
    assert said(137, "Killed") is None  # a SIGKILL without a cgroup's count could be anyone's
    assert ran_into(-9, "MemoryError", Limits(), timed_out=True) is None  # a long run prints anything
    assert ran_into(-9, "x: fork: retry: Resource temporarily unavailable", Limits(), timed_out=True) == "processes"
    assert Settings.parse({"processes": "unlimited"}).limits.processes is None
    with pytest.raises(SettingsError):
        Settings.parse({"processes": 0})


# --- unix sockets -------------------------------------------------------------------------------

def _listen(address) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    server.listen(4)
    return server


async def test_no_unix_socket_reaches_the_host_without_the_network(ws, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    abstract = "\0orchestrator-test-" + secrets.token_hex(6)
    servers = [_listen(str(ws / "host.sock")), _listen(str(shared / "host.sock")), _listen(abstract)]
    try:
        session = ToolSession(ws, ask=deny, sandbox=Settings(writable=(shared,)))
        named = "@" + abstract[1:]
        for target in ("host.sock", shared / "host.sock", named):
            out = await call(session, command=f"python3 connect.py {target}")
            assert "CONNECTED" not in out.text and "PermissionError" in out.text, out.text
        # Without the filter, the network namespace alone already hides the host's abstract sockets.
        argv = backend().argv(["python3", "connect.py", named], Confinement(ws, ws))
        alone = await run_command(argv, cwd=ws, timeout=30)
        assert "ConnectionRefusedError" in alone.output and "CONNECTED" not in alone.output, alone.output
        # With the network granted the same command reaches the host's sockets.
        granted = ToolSession(ws, ask=grant)
        for target in ("host.sock", named):
            out = await call(granted, command=f"python3 connect.py {target}", network=True)
            assert "CONNECTED" in out.text, out.text
    finally:
        for s in servers:
            s.close()


async def test_socketpair_still_works_and_io_uring_does_not(ws):
    session = ToolSession(ws, ask=deny)
    code = textwrap.dedent("""
        import ctypes, socket
        a, b = socket.socketpair()
        a.send(b"x"); print("stream", b.recv(1))
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        a.send(b"y"); print("seqpacket", b.recv(1))
        try:
            socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        except PermissionError:
            print("dgram refused")
        libc = ctypes.CDLL(None, use_errno=True)
        print("io_uring", libc.syscall(425, 1, ctypes.create_string_buffer(128)), ctypes.get_errno())
        socket.socket(socket.AF_INET).close(); print("inet ok")
    """)
    (ws / "pairs.py").write_text(code)
    out = await call(session, command="python3 pairs.py")
    assert out.text.splitlines()[:5] == ["stream b'x'", "seqpacket b'y'", "dgram refused", "io_uring -1 38",
                                         "inet ok"], out.text


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI is x86_64's")
async def test_a_syscall_of_an_abi_the_filter_does_not_read_kills_the_process(ws):
    (ws / "x32.py").write_text("import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 39)\nprint('alive')\n")
    out = await call(ToolSession(ws, ask=deny), command="python3 x32.py")
    assert "alive" not in out.text and out.text.endswith(stopped("syscall", Limits())), out.text


def _bpf(program: bytes, nr: int, arch: int, *args: int) -> int:
    """What the kernel would answer: a classic BPF interpreter for the few instructions the filter uses."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x54:
            a &= k
        elif code in (0x15, 0x35):
            pc += jt if (a == k if code == 0x15 else a >= k) else jf
        else:
            assert code == 0x06, hex(code)
            return k


def test_the_filter_answers_each_known_machine_as_intended():
    eacces, enosys = 0x50000 | 13, 0x50000 | 38
    for name, m in seccomp.MACHINES.items():
        closed, open_ = seccomp.program(False, name), seccomp.program(True, name)
        assert len(closed) % 8 == 0 and len(closed) // 8 < 64
        assert _bpf(closed, m.socket, m.audit_arch, 1, 1) == eacces  # socket(AF_UNIX, SOCK_STREAM)
        assert _bpf(closed, m.socket, m.audit_arch, 1 | 1 << 32, 1) == eacces  # high bits the kernel drops
        assert _bpf(closed, m.socket, m.audit_arch, 2, 1) == seccomp.ALLOW  # AF_INET: the netns holds it
        assert _bpf(closed, m.socketpair, m.audit_arch, 1, 1 | 0o2000000) == seccomp.ALLOW  # stream, CLOEXEC
        assert _bpf(closed, m.socketpair, m.audit_arch, 1, 2 | 0o4000) == eacces  # datagram, NONBLOCK
        assert _bpf(open_, m.socket, m.audit_arch, 1, 1) == seccomp.ALLOW
        for program in (closed, open_):
            assert [_bpf(program, nr, m.audit_arch) for nr in m.io_uring] == [enosys] * 3
            assert _bpf(program, 1, m.audit_arch) == seccomp.ALLOW
        assert _bpf(closed, 1, 0x40000003) == seccomp.KILL and _bpf(open_, 1, 0x40000003) == seccomp.ALLOW
        if m.x32:
            assert _bpf(closed, m.socket | seccomp.X32_BIT, m.audit_arch, 1) == seccomp.KILL
    assert seccomp.program(False, "sparc64") is None


# --- where a cgroup goes ----------------------------------------------------------------------------

def test_a_cgroup_v2_group_goes_beside_our_own_under_the_parent_that_hands_down_pids_and_memory(tmp_path,
                                                                                               monkeypatch):
    root = tmp_path / "cg"
    parent = root / "user.slice" / "user@1000.service" / "app.slice"
    (parent / "term.scope").mkdir(parents=True)
    (parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
    monkeypatch.setattr(cgroup, "_mounts", lambda: [(str(root), "/", "cgroup2", {"rw"})])
    monkeypatch.setattr(cgroup, "_own", lambda: {"": "/user.slice/user@1000.service/app.slice/term.scope"})
    assert cgroup.place.__wrapped__() == cgroup.Place(2, {"pids": parent, "memory": parent})
    (parent / "cgroup.subtree_control").write_text("cpu\n")  # nothing handed down: none made
    assert cgroup.place.__wrapped__() is None

    cell = cgroup.Cell(2, {"pids": parent / "x", "memory": parent / "x"})
    (parent / "x").mkdir()
    (parent / "x" / "pids.events").write_text("max 0\n")
    (parent / "x" / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n")
    assert cell.counted() == {"memory"}
    argv = cell.argv(["bwrap", "true"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-3:] == ["--", "bwrap", "true"]
    assert argv.count(str(parent / "x" / "cgroup.procs")) == 1  # v2: one folder for both controllers
