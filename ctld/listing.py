"""Each job's listing view, as GetJobs sends it: the job without its script and environment, serialised.

A listing leaves out the script and the exported environment (most of a record's bytes; no listing
shows them). Copying each job whole and clearing them cost most of a GetJobs; instead the job is
serialised (in C) and, when those bytes are not the ones last seen, its `spec` field is swapped for the
spec's listing form, itself kept per job and rebuilt only when the spec's bytes change. Every check is
by the bytes themselves, so a job changed in memory without a save (the applier's reasons,
priorities, planned starts) is listed as it is now.
"""

from __future__ import annotations

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


def _spec_span(data: bytes) -> tuple[int, int, int] | None:
    """Where JobInfo's `spec` lies in its serialised form: (tag start, value start, value end).
    Fields are written in field-number order and 1-4 are varints; anything else: None (slow path)."""
    pos = 0
    while pos < len(data):
        start = pos
        tag, pos = _read_varint(data, pos)
        if tag == _SPEC_TAG:
            size, pos = _read_varint(data, pos)
            return start, pos, pos + size
        if tag & 7 != 0 or tag >> 3 > 4:
            return None
        _, pos = _read_varint(data, pos)
    return None


def listing_view(job: jobs_pb2.JobInfo) -> jobs_pb2.JobInfo:
    """The job as a listing shows it (the reference form; ListingViews gives its bytes)."""
    view = jobs_pb2.JobInfo()
    view.CopyFrom(job)
    view.spec.ClearField("environment")
    view.spec.ClearField("script")
    return view


class ListingViews:
    """Per job: its bytes when last listed and their `jobs` entry; its spec's bytes and the spec field a
    listing sends in their place."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[bytes, bytes]] = {}
        self._specs: dict[int, tuple[bytes, bytes]] = {}

    def entry(self, job: jobs_pb2.JobInfo) -> bytes:
        """`job`'s listing view as one `jobs` entry of a GetJobsResponse, serialised."""
        data = job.SerializeToString()
        last = self._entries.get(job.job_id)
        if last is not None and last[0] == data:
            return last[1]
        entry = self._build(job, data)
        self._entries[job.job_id] = (data, entry)
        return entry

    def _build(self, job: jobs_pb2.JobInfo, data: bytes) -> bytes:
        span = _spec_span(data)
        if span is None:
            body = listing_view(job).SerializeToString()
        else:
            start, begin, end = span
            spec = data[begin:end]
            known = self._specs.get(job.job_id)
            if known is None or known[0] != spec:
                known = (spec, self._spec_field(job.spec))
                self._specs[job.job_id] = known
            body = b"".join((data[:start], known[1], data[end:]))
        return b"".join((_JOBS_TAG, _varint(len(body)), body))

    def forget(self, alive: set[int] | dict[int, jobs_pb2.JobInfo]) -> None:
        """Drop what is kept for jobs no longer in `alive` (purged by MinJobAge)."""
        for job_id in [j for j in self._entries if j not in alive]:
            del self._entries[job_id]
        for job_id in [j for j in self._specs if j not in alive]:
            del self._specs[job_id]

    def __len__(self) -> int:
        return max(len(self._entries), len(self._specs))

    @staticmethod
    def _spec_field(spec: jobs_pb2.JobSpec) -> bytes:
        short = jobs_pb2.JobSpec()
        short.CopyFrom(spec)
        short.ClearField("environment")
        short.ClearField("script")
        value = short.SerializeToString()
        return b"".join((bytes((_SPEC_TAG,)), _varint(len(value)), value))
