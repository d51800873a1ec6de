"""A BPF_PROG_TYPE_CGROUP_DEVICE program for cgroup v2, built and attached with bpf(2) via ctypes.

cgroup v2 has no devices.deny file: the kernel asks an eBPF program attached to the cgroup for
each device open/mknod. The program here denies the listed (type, major, minor) devices and
allows every other one, like v1's devices.deny lines. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from collections.abc import Sequence

BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6
BPF_F_ALLOW_MULTI = 2
DEV_CHAR = 2  # BPF_DEVCG_DEV_CHAR
DEV_BLOCK = 1
_SYSCALL = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351}
_ATTR_SIZE = 128

# instruction opcodes
_LDX_W = 0x61  # r_dst = *(u32 *)(r_src + off)
_AND32_K = 0x54  # w_dst &= imm
_JNE_K = 0x55  # if r_dst != imm goto pc + 1 + off
_MOV64_K = 0xB7  # r_dst = imm
_EXIT = 0x95


class BpfError(OSError):
    """bpf(2) failed; the verifier log, when there is one, is in the message."""


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def deny_program(denied: Sequence[tuple[int, int, int]]) -> bytes:
    """Instructions: return 0 (deny) for each (type, major, minor) in `denied`, else 1 (allow)."""
    code = [
        _insn(_LDX_W, dst=2, src=1, off=0),  # access_type
        _insn(_AND32_K, dst=2, imm=0xFFFF),  # low half: device type
        _insn(_LDX_W, dst=3, src=1, off=4),  # major
        _insn(_LDX_W, dst=4, src=1, off=8),  # minor
    ]
    for dev_type, major, minor in denied:
        code += [
            _insn(_JNE_K, dst=2, off=4, imm=dev_type),
            _insn(_JNE_K, dst=3, off=3, imm=major),
            _insn(_JNE_K, dst=4, off=2, imm=minor),
            _insn(_MOV64_K, dst=0, imm=0),
            _insn(_EXIT),
        ]
    code += [_insn(_MOV64_K, dst=0, imm=1), _insn(_EXIT)]
    return b"".join(code)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    number = _SYSCALL.get(platform.machine())
    if number is None:
        raise BpfError(0, f"bpf(2) syscall number unknown on {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(ctypes.c_long(number), ctypes.c_int(cmd), attr, ctypes.c_uint(_ATTR_SIZE)))
    if result < 0:
        err = ctypes.get_errno()
        raise BpfError(err, f"bpf({cmd}): {os.strerror(err)}")
    return result


def load(program: bytes) -> int:
    """Load the program; returns its fd."""
    insns = ctypes.create_string_buffer(program, len(program))
    license = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(65536)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into(
        "<IIQQIIQ",
        attr,
        0,
        BPF_PROG_TYPE_CGROUP_DEVICE,
        len(program) // 8,
        ctypes.addressof(insns),
        ctypes.addressof(license),
        1,
        len(log),
        ctypes.addressof(log),
    )
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except BpfError as exc:
        raise BpfError(exc.errno or 0, f"{exc.strerror}: {log.value.decode(errors='replace')}") from None


def attach_deny_list(cgroup_dir: str, denied: Sequence[tuple[int, int, int]]) -> None:
    """Attach a program denying `denied` to the v2 cgroup at `cgroup_dir` (detached when it is removed)."""
    prog = load(deny_program(denied))
    cg = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        attr = ctypes.create_string_buffer(_ATTR_SIZE)
        struct.pack_into("<IIII", attr, 0, cg, prog, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)
        _bpf(BPF_PROG_ATTACH, attr)
    finally:
        os.close(cg)
        os.close(prog)
