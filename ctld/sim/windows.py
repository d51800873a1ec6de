"""Which windows of a trace the baseline protocol replays: the same ones RLScheduler drew.

The published baselines (../shared/traces/BASELINES.md) replay 10 windows of 1,024 consecutive
jobs, each window's first index drawn by the environment's RNG seeded with `--seed`: gym's
`seeding.np_random(seed)` (a numpy `RandomState` seeded with the first 8 bytes of SHA-512 of the
seed's decimal text, as a list of 32-bit words) and one `randint(size, n - size - 1)` per window
(`HPCSimPickJobs.reset_for_test`). numpy's legacy `RandomState` is the same Mersenne Twister as
Python's `random` with the same `init_by_array` seeding, and its `randint` on a range under 2**32
takes 32-bit outputs masked to the range's bit length, rejecting those past it. So the exact
windows come from the standard library, with no numpy: `start_indices(1, 10000, 1024, 10)` is
[1981, 2756, 4299, 8850, 3316, 2714, 5228, 7762, 4022, 7085], as numpy gives.
"""

from __future__ import annotations

import hashlib
import random
import struct


def _gym_seed_words(seed: int) -> list[int]:
    """gym's hash_seed(create_seed(seed)) as the 32-bit words RandomState.seed() receives."""
    digest = hashlib.sha512(str(seed % 2**64).encode()).digest()[:8]
    low, high = struct.unpack("<2I", digest)
    return [low, high] if high else [low]


def start_indices(seed: int, jobs: int, size: int, count: int) -> list[int]:
    """The first job index of each of `count` windows of `size` jobs in a trace of `jobs` jobs.

    Drawn uniformly from [size, jobs - size - 1), as the protocol does; a trace too short for
    that gives window 0 every time.
    """
    low, high = size, jobs - size - 1
    if high - low < 1:
        return [0] * count
    words = _gym_seed_words(seed)
    stream = random.Random(sum(word << (32 * i) for i, word in enumerate(words)))
    span = high - 1 - low  # numpy's closed range: low + [0, span]
    mask = (1 << span.bit_length()) - 1
    starts = []
    for _ in range(count):
        while True:
            value = stream.getrandbits(32) & mask
            if value <= span:
                break
        starts.append(low + value)
    return starts
