"""Each job's listing view, as GetJobs sends it: the job's wire form without its script and environment,
serialised.

A listing leaves out the script and the exported environment (most of a record's bytes; no listing
shows them) and the controller's own bookkeeping (ctld.record.INTERNAL). Each job is converted to its
wire form without its spec on every listing, so a job changed in memory without a save (the
applier's reasons, priorities, planned starts) is listed as it is now; the spec's listing form is
kept per job and rebuilt only when the record's spec is replaced (specs are never edited in place).
"""

from __future__ import annotations

from ctld import record
from ctld.record import JobRecord
from shoal.v1 import jobs_pb2

_SPEC_TAG = 0x2A  # JobInfo.spec: field 5, length-delimited
_JOBS_TAG = b"\x0a"  # GetJobsResponse.jobs: field 1, length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _spec_at(data: bytes) -> int | None:
    """Where JobInfo's `spec` goes in a JobInfo serialised without it: after fields 1-4 (varints),
    fields being written in field-number order. Anything else: None (slow path)."""
    pos = 0
    while pos < len(data):
        tag, end = _read_varint(data, pos)
        if tag >> 3 > 5:
            return pos
        if tag & 7 != 0 or tag >> 3 == 5:
            return None
        _, pos = _read_varint(data, end)
    return pos


def listing_view(job: JobRecord) -> jobs_pb2.JobInfo:
    """The job as a listing shows it (the reference form; ListingViews gives its bytes)."""
    view = record.wire(job)
    view.spec.ClearField("environment")
    view.spec.ClearField("script")
    return view


class ListingViews:
    """Per job: the spec last listed (the object: a record's spec is replaced, never edited) and the
    spec field a listing sends in its place."""

    def __init__(self) -> None:
        self._specs: dict[int, tuple[jobs_pb2.JobSpec, bytes]] = {}

    def entry(self, job: JobRecord) -> bytes:
        """`job`'s listing view as one `jobs` entry of a GetJobsResponse, serialised."""
        data = record.wire(job, spec=False).SerializeToString()
        at = _spec_at(data)
        if at is None:
            body = listing_view(job).SerializeToString()
        else:
            known = self._specs.get(job.job_id)
            if known is None or known[0] is not job.spec:
                known = (job.spec, self._spec_field(job.spec))
                self._specs[job.job_id] = known
            body = b"".join((data[:at], known[1], data[at:]))
        return b"".join((_JOBS_TAG, _varint(len(body)), body))

    def forget(self, alive: set[int] | dict[int, JobRecord]) -> None:
        """Drop what is kept for jobs no longer in `alive` (purged by MinJobAge)."""
        for job_id in [j for j in self._specs if j not in alive]:
            del self._specs[job_id]

    def __len__(self) -> int:
        return len(self._specs)

    @staticmethod
    def _spec_field(spec: jobs_pb2.JobSpec) -> bytes:
        short = jobs_pb2.JobSpec()
        short.CopyFrom(spec)
        short.ClearField("environment")
        short.ClearField("script")
        value = short.SerializeToString()
        return b"".join((bytes((_SPEC_TAG,)), _varint(len(value)), value))
