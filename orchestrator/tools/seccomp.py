"""The seccomp filter bubblewrap loads before a command runs: without the network no unix sockets (the
way out to the host's services), and never io_uring (a way around any filter); a classic BPF program."""
from __future__ import annotations

import os
import platform
import struct
from dataclasses import dataclass
from functools import cache

# Classic BPF, as the kernel's seccomp reads it (linux/filter.h, linux/seccomp.h).
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = the 32-bit word at offset k of seccomp_data
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

_NR, _ARCH = 0, 4  # offsets in struct seccomp_data; args[i] starts at 16 + 8 * i


def _arg(i: int) -> int:
    """Offset of argument i's low 32 bits (every machine below is little-endian). The kernel reads
    socket()'s domain and type as ints, so high bits a caller sets cannot change what it sees."""
    return 16 + 8 * i


ALLOW = 0x7FFF0000
KILL = 0x80000000  # the whole process (SECCOMP_RET_KILL_PROCESS); an older kernel kills the thread
EACCES, ENOSYS = 13, 38  # the same numbers on every machine below


def _errno(n: int) -> int:
    return 0x00050000 | n


AF_UNIX, SOCK_DGRAM, SOCK_TYPE_MASK = 1, 2, 0xF
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same arch value, other numbers, its own socket()


@dataclass(frozen=True)
class Machine:
    audit_arch: int
    socket: int
    socketpair: int
    io_uring: tuple[int, ...]  # setup, enter, register
    x32: bool = False


# The generic syscall table (aarch64, riscv64) shares numbers; io_uring is 425-427 everywhere.
MACHINES = {
    "x86_64": Machine(0xC000003E, 41, 53, (425, 426, 427), x32=True),
    "aarch64": Machine(0xC00000B7, 198, 199, (425, 426, 427)),
    "riscv64": Machine(0xC00000F3, 198, 199, (425, 426, 427)),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _assemble(program: list[tuple]) -> bytes:
    """Instructions as (code, k, then-label, else-label) and ("label", name) markers; a label is a jump
    target further down (BPF jumps only forward), None means the next instruction."""
    where, n = {}, 0
    for op in program:
        if op[0] == "label":
            where[op[1]] = n
        else:
            n += 1
    out, i = [], 0
    for op in program:
        if op[0] == "label":
            continue
        code, k, *targets = op
        jt, jf = ((where[t] - i - 1) if t is not None else 0 for t in (targets + [None, None])[:2])
        out.append(_insn(code, k, jt, jf))
        i += 1
    return b"".join(out)


@cache
def program(network: bool, machine: str | None = None) -> bytes | None:
    """The filter for this machine, or None where we have no syscall table (the command then runs
    without it). Without the network, socket(AF_UNIX) fails with EACCES, and so does a datagram
    socketpair: its ends may still send to, or connect to, any socket path, while a stream or seqpacket
    pair is connected for good. io_uring fails with ENOSYS, which its users take as "not here" and do
    without; its own socket and connect operations would pass the filter unseen."""
    m = MACHINES.get(machine or platform.machine())
    if m is None:
        return None
    # A syscall in an ABI this filter does not decode (32-bit compat, x32) could make the socket it
    # refuses. Without the network that would be a way around the wall, so such a process is killed
    # (loudly, by SIGSYS); with the network there is no wall to go around and it runs.
    foreign = ALLOW if network else KILL
    p: list[tuple] = [(_LD_ABS_W, _ARCH), (_JEQ, m.audit_arch, None, "foreign"), (_LD_ABS_W, _NR)]
    if m.x32:
        p.append((_JGE, X32_BIT, "foreign", None))
    p += [(_JEQ, nr, "enosys", None) for nr in m.io_uring]
    if not network:
        p += [(_JEQ, m.socket, "socket", None), (_JEQ, m.socketpair, "socketpair", None)]
    p += [(_RET, ALLOW),
          ("label", "foreign"), (_RET, foreign),
          ("label", "enosys"), (_RET, _errno(ENOSYS))]
    if not network:
        p += [("label", "socket"), (_LD_ABS_W, _arg(0)), (_JEQ, AF_UNIX, "eacces", "allow"),
              ("label", "socketpair"), (_LD_ABS_W, _arg(0)), (_JEQ, AF_UNIX, None, "allow"),
              (_LD_ABS_W, _arg(1)), (_AND, SOCK_TYPE_MASK), (_JEQ, SOCK_DGRAM, "eacces", "allow"),
              ("label", "eacces"), (_RET, _errno(EACCES)),
              ("label", "allow"), (_RET, ALLOW)]
    return _assemble(p)


def open_filter(network: bool) -> int | None:
    """A pipe's read end holding the filter, for bubblewrap's --seccomp (it reads to the end and closes
    its copy); the caller closes ours once the command has started. None: no filter for this machine."""
    prog = program(network)
    if prog is None:
        return None
    read, write = os.pipe()  # the program is far below a pipe's buffer, so the write cannot block
    try:
        os.write(write, prog)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
