"""sacct's job and step records as columns on the wire (RecordTable), and as tuples in Python.

dbd sends one repeated field per record field (`encode`); sacct turns the columns back into one
named tuple per job and step (`decode`). Both directions run in C for the bulk of the work, where
one protobuf message per record cost most of a 100,000-job sacct. `gc_paused()` keeps the cyclic
garbage collector from walking those records again and again while they are built.
"""

from __future__ import annotations

import gc
import threading
from collections import namedtuple
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any, NamedTuple

from google.protobuf.descriptor import FieldDescriptor

from shoal.v1 import accounting_pb2 as pb

JOB_FIELDS = tuple(f.name for f in pb.JobRecord.DESCRIPTOR.fields)
STEP_FIELDS = tuple(f.name for f in pb.StepRecord.DESCRIPTOR.fields)
TEXT_FIELDS = frozenset(
    f.name
    for d in (pb.JobRecord.DESCRIPTOR, pb.StepRecord.DESCRIPTOR)
    for f in d.fields
    if f.type == FieldDescriptor.TYPE_STRING
)
JOB_INDEX = "job_index"


def _defaults(names: Sequence[str]) -> list[object]:
    return ["" if name in TEXT_FIELDS else 0 for name in names]


# a JobRecord / StepRecord as a tuple: same field names, same defaults ("" and 0)
JobRec: Any = namedtuple("JobRec", JOB_FIELDS, defaults=_defaults(JOB_FIELDS))  # type: ignore[misc]
StepRec: Any = namedtuple("StepRec", STEP_FIELDS, defaults=_defaults(STEP_FIELDS))  # type: ignore[misc]
Record = Any  # a JobRec or StepRec (built from the protobuf descriptors, so typed as Any)


class AcctEntry(NamedTuple):
    """One job with its steps (.batch and .extern first, then 0, 1, ...)."""

    job: Record  # JobRec
    steps: list[Record]  # [StepRec]


def encode(table: pb.RecordTable, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Fill `table` with `rows`, tuples whose values follow `names` (record fields or job_index)."""
    table.rows = len(rows)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    for name, values in zip(names, columns, strict=True):
        column = table.columns.add(name=name)
        (column.texts if name in TEXT_FIELDS else column.ints).extend(values)


def decode(resp: pb.AcctJobsResponse) -> list[AcctEntry]:
    """The jobs of a GetJobs answer, each with its steps."""
    entries = [AcctEntry(job, []) for job in _records(resp.jobs, JobRec)]
    index = next((list(c.ints) for c in resp.steps.columns if c.name == JOB_INDEX), [])
    for row, step in zip(index, _records(resp.steps, StepRec), strict=True):
        entries[row].steps.append(step)
    return entries


def _records(table: pb.RecordTable, kind: Any) -> list[Any]:
    count = table.rows
    given = {c.name: (c.texts if c.name in TEXT_FIELDS else c.ints) for c in table.columns}
    columns = [
        given.get(name) or repeat(default, count)
        for name, default in zip(kind._fields, kind._field_defaults.values(), strict=True)
    ]
    return list(map(kind._make, zip(*columns, strict=True))) if count else []


_paused = 0
_paused_lock = threading.Lock()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many records are built: they hold no cycles, and
    every collection pass walks all of them again (about half of a 100,000-job sacct's time).
    Reference counting still frees everything; nested and concurrent pauses end with the last."""
    global _paused
    with _paused_lock:
        _paused += 1
        gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if not _paused:
                gc.enable()
