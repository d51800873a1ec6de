"""The pages a runner's child writes (cli/hotpages.py): what a child is seen to have copied, and
what a spare copies ahead. Real forks and the real /proc/self/pagemap."""

from __future__ import annotations

import ctypes
import os

import pytest

from cli import hotpages
from cli.hotpages import PAGE, Learner


def _in_a_fork(body: object) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if body() else 3  # type: ignore[operator]
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _address(buf: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def _pages_of(buf: bytearray) -> list[int]:
    """The pages wholly inside `buf`."""
    start = _address(buf)
    first = (start + PAGE - 1) // PAGE * PAGE
    return [first + i * PAGE for i in range((start + len(buf) - first) // PAGE)]


def _written_pages(pagemap: int, maps: list[tuple[int, int]]) -> set[int]:
    return {start + i * PAGE for start, n in hotpages.written(pagemap, maps) for i in range(n)}


@pytest.fixture
def shared_buffer() -> bytearray:
    buf = bytearray(b"x" * (64 * PAGE))  # written here, so every page is present before the fork
    hotpages.libc()
    return buf


def test_a_child_sees_the_pages_it_wrote_and_those_copied_ahead(shared_buffer: bytearray) -> None:
    pages = _pages_of(shared_buffer)
    maps = hotpages.shared_maps()
    if not os.path.exists("/proc/self/pagemap"):
        pytest.skip("no /proc/self/pagemap")

    def child() -> bool:
        pagemap = hotpages.open_pagemap()
        assert pagemap is not None
        before = _written_pages(pagemap, maps)
        for i in (3, 4, 5):
            shared_buffer[pages[i] - _address(shared_buffer) + 1] = 0  # one byte in each of these pages
        after_writes = _written_pages(pagemap, maps)
        hotpages.copy_ahead([(pages[10], 2)])
        after_copy = _written_pages(pagemap, maps)
        # told to stop (a caller waits), it stops after the first `every` pages
        done = hotpages.copy_ahead([(pages[20], 2), (pages[30], 2)], stop=lambda: True, every=2)
        after_stop = _written_pages(pagemap, maps)
        return (
            not before & set(pages)
            and {pages[3], pages[4], pages[5]} <= after_writes
            and not after_writes & {pages[9], pages[10], pages[11]}
            and {pages[10], pages[11]} <= after_copy
            and pages[12] not in after_copy
            and not done
            and {pages[20], pages[21]} <= after_stop
            and not after_stop & {pages[30], pages[31]}
        )

    assert _in_a_fork(child) == 0


def test_the_hot_pages_are_those_half_the_commands_wrote() -> None:
    base = 1 << 30
    learner = Learner()
    learner.add([(base, 3)])  # pages 0, 1, 2
    learner.add([(base + PAGE, 1), (base + 5 * PAGE, 1)])  # 1, 5
    learner.add([(base + PAGE, 2)])  # 1, 2
    learner.add([(base + 9 * PAGE, 1)])  # 9
    assert learner.hot() == [(base + PAGE, 2)]  # 1 (three times) and 2 (twice), as one run
    assert Learner(limit=1).hot() == []
    capped = Learner(limit=2)
    capped.add([(base, 5)])
    assert capped.hot() == [(base, 2)]


def test_ranges_travel_whole() -> None:
    ranges = [(1 << 40, 7), (1 << 41, 1)]
    assert hotpages.decode(hotpages.encode(ranges)) == ranges
    assert hotpages.decode(hotpages.encode(ranges) + b"\x01\x02") == ranges  # a torn tail is dropped
