"""The pages a command runner's child writes: learnt from its first commands, copied ahead by spares.

Why: a forked child shares every page with the runner until it writes one, and each first write is
a copy-on-write fault, a few microseconds each on a virtual machine; a short command takes 400-900
of them (reference counts, the interpreter's inline caches in code objects, allocator pools), most
of its CPU. The same pages come up command after command, so a spare (cli/runner.py) that copies
them with one madvise(MADV_POPULATE_WRITE) per run of pages before it accepts a connection takes
those faults off the command's path. Which pages: what the first commands' children copied, read
from /proc/self/pagemap (present and exclusively mapped) over the mappings they shared with the
runner. Where the kernel lacks MADV_POPULATE_WRITE (before 5.14) or pagemap, nothing is learnt
or copied, and commands fault as before.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections import Counter
from collections.abc import Callable, Iterable

PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_WRITE = 23
PR_SET_PDEATHSIG = 1
MAX_PAGES = 4096  # what a spare copies at most (16 MiB): more than the runner's whole heap today
_PRESENT_EXCLUSIVE = (1 << 63) | (1 << 56)
_RANGE = struct.Struct("<QI")
_NOT_SHARED = ("[stack]", "[vvar]", "[vvar_vclock]", "[vsyscall]", "[vdso]")  # start address, pages

Ranges = list[tuple[int, int]]  # (start address, pages), sorted, not overlapping


class _Libc:
    """prctl(2) and madvise(2), looked up once in the runner so that no child pays for it."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = libc.prctl
        self.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        self.madvise = libc.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


_libc: _Libc | None = None


def libc() -> _Libc:
    global _libc
    if _libc is None:
        _libc = _Libc()
    return _libc


def parent_death_signal(sig: int) -> None:
    """Have the kernel send `sig` to this process when its parent dies (0: no longer)."""
    libc().prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def shared_maps() -> list[tuple[int, int]]:
    """(start, end) of this process's private writable mappings (heap, allocator arenas, libraries'
    data), the ones a fork shares copy-on-write; not the stack, which a child writes at once anyway."""
    maps = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                fields = line.split()
                name = fields[5] if len(fields) > 5 else ""
                if fields[1].startswith("rw") and fields[1][3] == "p" and name not in _NOT_SHARED:
                    start, end = fields[0].split("-")
                    maps.append((int(start, 16), int(end, 16)))
    except OSError:
        return []
    return maps


def open_pagemap() -> int | None:
    """/proc/self/pagemap, opened while the child may still read it (before it becomes the caller)."""
    try:
        return os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def written(pagemap: int, maps: Iterable[tuple[int, int]]) -> Ranges:
    """The pages of `maps` this process has copied since the fork (present and mapped by it alone)."""
    found: Ranges = []
    for start, end in maps:
        data = os.pread(pagemap, (end - start) // PAGE * 8, start // PAGE * 8)
        run_start, run = 0, 0
        for i, entry in enumerate(memoryview(data).cast("Q")):
            if entry & _PRESENT_EXCLUSIVE == _PRESENT_EXCLUSIVE:
                if run and run_start + run == i:
                    run += 1
                    continue
                if run:
                    found.append((start + run_start * PAGE, run))
                run_start, run = i, 1
        if run:
            found.append((start + run_start * PAGE, run))
    return found


class Learner:
    """How often each page was written over the commands reported; the hot pages are those at least
    half of them wrote (a page one odd command wrote is not worth copying for every other)."""

    def __init__(self, limit: int = MAX_PAGES) -> None:
        self.counts: Counter[int] = Counter()
        self.reports = 0
        self.limit = limit

    def add(self, ranges: Ranges) -> None:
        self.reports += 1
        for start, pages in ranges:
            self.counts.update(range(start, start + pages * PAGE, PAGE))

    def hot(self) -> Ranges:
        need = (self.reports + 1) // 2
        pages = sorted(page for page, seen in self.counts.items() if seen >= need)[: self.limit]
        ranges: Ranges = []
        for page in pages:
            if ranges and ranges[-1][0] + ranges[-1][1] * PAGE == page:
                ranges[-1] = (ranges[-1][0], ranges[-1][1] + 1)
            else:
                ranges.append((page, 1))
        return ranges


def encode(ranges: Ranges) -> bytes:
    return b"".join(_RANGE.pack(start, pages) for start, pages in ranges)


def decode(data: bytes) -> Ranges:
    usable = len(data) - len(data) % _RANGE.size
    return [(int(s), int(p)) for s, p in _RANGE.iter_unpack(data[:usable])]


def copy_ahead(ranges: Ranges, stop: Callable[[], bool] | None = None, every: int = 64) -> bool:
    """Take the copy-on-write faults of these pages now (pages no longer mapped are skipped). Asks
    `stop` after each `every` pages, and gives up when it says so: a caller is waiting, and copying
    pages is worth less than serving it. True when all were copied."""
    madvise = libc().madvise
    since = 0
    for start, pages in ranges:
        madvise(start, pages * PAGE, MADV_POPULATE_WRITE)
        since += pages
        if stop is not None and since >= every:
            since = 0
            if stop():
                return False
    return True
