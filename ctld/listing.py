"""Each job's listing view, as GetJobs sends it: the job's wire form without its script and environment,
serialised.

A listing leaves out the script and the exported environment (most of a record's bytes; no listing
shows them) and the controller's own bookkeeping (ctld.record.INTERNAL). A job's wire bytes are kept
until its record's `changes` moves (any assignment to a field, saved or not: the applier's reasons,
priorities, planned starts are listed as they are now); the spec's listing form until the record's
spec is replaced (specs are never edited in place); steps are serialised on every listing.

A brief listing (GetJobsRequest.brief: what squeue's usual formats read) sends each job's
BRIEF_FIELDS only, kept the same way until `changes` moves. A folded one (fold_pending_tasks) sends
an array's pending tasks as their first task's entry with array_task_str and the reasons appended (`with_fields`).
"""

from __future__ import annotations

from ctld import record
from ctld.record import JobRecord
from shoal.jobview import BRIEF_FIELDS, BRIEF_SPEC_FIELDS
from shoal.v1 import jobs_pb2

_SPEC_TAG = 0x2A  # JobInfo.spec: field 5, length-delimited
_JOBS_TAG = b"\x0a"  # GetJobsResponse.jobs: field 1, length-delimited
_STEPS_TAG = b"\xd2\x05"  # JobInfo.steps: field 90, length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _part(job: JobRecord, names: tuple[str, ...]) -> bytes:
    return jobs_pb2.JobInfo(**{n: v for n in names if (v := getattr(job, n))}).SerializeToString()


def listing_view(job: JobRecord) -> jobs_pb2.JobInfo:
    """The job as a listing shows it (the reference form; ListingViews gives its bytes)."""
    view = record.wire(job)
    view.spec.ClearField("environment")
    view.spec.ClearField("script")
    return view


def with_fields(entry: bytes, task_str: str, reason: str) -> bytes:
    """A `jobs` entry (tag, length, JobInfo) with its array_task_str and state_reason set: the fields
    appended (a message's later value of a field wins), the cached bytes reused."""
    extra = jobs_pb2.JobInfo(array_task_str=task_str, state_reason=reason).SerializeToString()
    start = 1  # past the tag; then the length's varint
    while entry[start] & 0x80:
        start += 1
    body = entry[start + 1 :]
    return b"".join((_JOBS_TAG, _varint(len(body) + len(extra)), body, extra))


class ListingViews:
    """Per job: its wire bytes but the spec and the steps, kept while the record's `changes` stays;
    the spec last listed (the object: a record's spec is replaced, never edited) and the spec field a
    listing sends in its place. Steps (edited in place) are serialised on every listing."""

    def __init__(self) -> None:
        self._parts: dict[int, tuple[JobRecord, int, bytes, bytes, bytes]] = {}
        self._specs: dict[int, tuple[jobs_pb2.JobSpec, bytes]] = {}
        self._briefs: dict[int, tuple[JobRecord, int, bytes]] = {}

    def entry(self, job: JobRecord) -> bytes:
        """`job`'s listing view as one `jobs` entry of a GetJobsResponse, serialised (fields in number
        order, as protobuf writes them: the same bytes as `listing_view(job)`'s)."""
        parts = self._parts.get(job.job_id)
        if parts is None or parts[0] is not job or parts[1] != job.changes:
            head, middle, tail = record.WIRE_PARTS
            parts = (job, job.changes, _part(job, head), _part(job, middle), _part(job, tail))
            self._parts[job.job_id] = parts
        known = self._specs.get(job.job_id)
        if known is None or known[0] is not job.spec:
            known = (job.spec, self._spec_field(job.spec))
            self._specs[job.job_id] = known
        steps = b"".join(
            b"".join((_STEPS_TAG, _varint(len(data)), data))
            for data in (s.SerializeToString() for s in job.steps)
        )
        body = b"".join((parts[2], known[1], parts[3], steps, parts[4]))
        return b"".join((_JOBS_TAG, _varint(len(body)), body))

    def brief_entry(self, job: JobRecord) -> bytes:
        """`job`'s brief listing (BRIEF_FIELDS, and BRIEF_SPEC_FIELDS of its spec) as one `jobs` entry."""
        kept = self._briefs.get(job.job_id)
        if kept is None or kept[0] is not job or kept[1] != job.changes:  # a new spec moves `changes` too
            view = jobs_pb2.JobInfo(**{n: v for n in BRIEF_FIELDS if (v := getattr(job, n))})
            spec = {n: v for n in BRIEF_SPEC_FIELDS if (v := getattr(job.spec, n))}
            if spec:
                view.spec.MergeFrom(jobs_pb2.JobSpec(**spec))
            body = view.SerializeToString()
            kept = (job, job.changes, b"".join((_JOBS_TAG, _varint(len(body)), body)))
            self._briefs[job.job_id] = kept
        return kept[2]

    def entry_of(self, job: JobRecord, brief: bool) -> bytes:
        """`brief_entry` or `entry`, as the request asks."""
        return self.brief_entry(job) if brief else self.entry(job)

    def forget(self, alive: set[int] | dict[int, JobRecord]) -> None:
        """Drop what is kept for jobs no longer in `alive` (purged by MinJobAge)."""
        for kept in (self._parts, self._specs, self._briefs):
            for job_id in [j for j in kept if j not in alive]:
                del kept[job_id]

    def __len__(self) -> int:
        return max(len(self._parts), len(self._specs), len(self._briefs))

    @staticmethod
    def _spec_field(spec: jobs_pb2.JobSpec) -> bytes:
        short = jobs_pb2.JobSpec()
        short.CopyFrom(spec)
        short.ClearField("environment")
        short.ClearField("script")
        value = short.SerializeToString()
        return b"".join((bytes((_SPEC_TAG,)), _varint(len(value)), value))
