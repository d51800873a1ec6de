"""`shoal why`'s answer as JSON: one shape for `shoal why --json` and restd's /shoal/v1/why/{job_id}
(the web view reads it). Times are epoch seconds, null when there is none."""

from __future__ import annotations

from typing import Any

from shoal.v1 import controller_pb2 as pb

Json = dict[str, Any]


def _time(value: int) -> int | None:
    return value if value > 0 else None


def _wait(w: pb.WhyWait) -> Json:
    out: Json = {"kind": w.kind, "text": w.text}
    if w.kind == "resources":
        out |= {
            "resource": w.resource,
            "needed": w.needed,
            "free": w.free,
            "nodes": w.nodes,
            "held_by": [
                {"job_id": h.job_id, "user": h.user, "nodes": h.nodes, "end_time": _time(h.end_time)}
                for h in w.holders
            ],
        }
    elif w.kind == "limit":
        out |= {
            "scope": w.scope,
            "limit": w.limit,
            "in_use": w.in_use,
            "asks": w.needed,
            "job_ids": list(w.job_ids),
        }
    elif w.kind == "priority":
        out["job_ids"] = list(w.job_ids)
    elif w.kind == "dependency":
        out |= {
            "dependency": w.dependency,
            "job_id": w.job_ids[0] if w.job_ids else None,
            "job_state": w.job_state,
        }
    elif w.kind == "nodes_down":
        out["nodes"] = w.nodes
    return out


def as_json(resp: pb.WhyResponse) -> Json:
    """The answer's keys: job_id, state, reason, text, waits_for, planned_start, planned_nodes, ahead,
    suggestions (change, planned_start, nodes), then starts_now, partition, and a running job's nodes
    and end_time."""
    return {
        "job_id": resp.job_id,
        "state": resp.state,
        "reason": resp.reason,
        "text": resp.text,
        "waits_for": [_wait(w) for w in resp.waits_for],
        "planned_start": _time(resp.planned_start),
        "planned_nodes": resp.planned_nodes,
        "ahead": resp.ahead,
        "suggestions": [
            {"change": s.change, "planned_start": s.planned_start, "nodes": s.nodes} for s in resp.suggestions
        ],
        "starts_now": resp.starts_now,
        "partition": resp.partition,
        "nodes": resp.nodes,
        "end_time": _time(resp.end_time),
    }
