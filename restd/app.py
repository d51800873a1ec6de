"""The HTTP side of shoal-restd (aiohttp): slurmrestd's v0.0.44 paths, each acting as the token's user.

Every handler is a plain function (context, call, identity) -> JSON object, run in a worker thread
because the gRPC calls block. The wrapper authenticates, parses the body, and always answers in
slurmrestd's envelope: the endpoint's own fields, then meta, errors and warnings. A failure keeps
the endpoint's required fields (empty), carries Slurm's errno and words, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pwd
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from restd import convert, gpus
from restd.auth import Identity, authenticate
from restd.backend import Backend
from restd.bodies import job_spec, node_update, signal_number
from restd.errors import (
    INVALID_JOB_ID,
    INVALID_NODE_NAME,
    INVALID_PARTITION,
    REST_FAIL_PARSING,
    REST_INVALID_QUERY,
    SLURM_ERROR,
    RestError,
    from_daemon,
)
from shoal import SLURM_VERSION
from shoal.states import FINISHED_STATES
from shoal.v1 import accounting_pb2, controller_pb2
from shoal.why_view import as_json

log = logging.getLogger("shoal.restd")

Json = dict[str, Any]
SLURM = "/slurm/v0.0.44"
SLURMDB = "/slurmdb/v0.0.44"
SHOAL = "/shoal/v1"  # beyond slurmrestd: shoal's own reads (the web view's GPUs and explainer)
MAX_BODY = 16 * 1024 * 1024


@dataclass
class RestContext:
    backend: Backend
    jwt_key: bytes
    cluster: str
    clock: Callable[[], float] = time.time


@dataclass
class Call:
    """What a handler reads from the request: path and query parameters, the parsed body."""

    params: dict[str, str]
    query: dict[str, str]
    body: object = None
    warnings: list[str] = field(default_factory=list)


Handler = Callable[[RestContext, Call, Identity], Json]


# --- slurm (ctld) ----------------------------------------------------------------------------------


def ping(ctx: RestContext, call: Call, who: Identity) -> Json:
    started = time.monotonic()
    resp = ctx.backend.ctld(
        who, "Ping", controller_pb2.PingRequest(), controller_pb2.PingResponse, "slurm_ping()"
    )
    return {"pings": [convert.ping(resp, int((time.monotonic() - started) * 1_000_000))]}


def shoal_gpus(ctx: RestContext, call: Call, who: Identity) -> Json:
    """shoal's own: every GPU with its live state, job, user and idle flag (restd/gpus.py)."""
    resp = ctx.backend.ctld(
        who,
        "GetLiveUsage",
        controller_pb2.GetLiveUsageRequest(gpus=True),
        controller_pb2.GetLiveUsageResponse,
        "shoal_get_gpus()",
    )
    return gpus.gpus_json(resp)


def diag(ctx: RestContext, call: Call, who: Identity) -> Json:
    """ctld's sdiag counters (GetDiag), in slurmrestd's field names."""
    resp = ctx.backend.ctld(
        who,
        "GetDiag",
        controller_pb2.GetDiagRequest(),
        controller_pb2.GetDiagResponse,
        "slurm_get_statistics()",
    )
    return {"statistics": convert.statistics(resp)}


def _changed(job: Any) -> int:
    """When a job last changed, as far as its record tells (an end time counts once it has ended)."""
    ended = job.end_time if job.state in FINISHED_STATES else 0
    return int(max(job.submit_time, job.eligible_time, job.start_time, ended, job.suspend_time))


def jobs(ctx: RestContext, call: Call, who: Identity) -> Json:
    since = _integer(call.query.get("update_time", ""), "update_time")
    resp = ctx.backend.ctld(
        who,
        "GetJobs",
        controller_pb2.GetJobsRequest(include_finished=True, show_all=True),
        controller_pb2.GetJobsResponse,
        "slurm_load_jobs()",
    )
    listed = [j for j in resp.jobs if since is None or _changed(j) > since]
    return {
        "jobs": [convert.job_info(j) for j in listed],
        "last_backfill": convert.no_val(None),
        "last_update": convert.no_val(resp.now),
    }


def job(ctx: RestContext, call: Call, who: Identity) -> Json:
    job_id = _job_id(call)
    resp = ctx.backend.ctld(
        who,
        "GetJobs",
        controller_pb2.GetJobsRequest(job_id_strs=[job_id], include_finished=True, show_all=True),
        controller_pb2.GetJobsResponse,
        "slurm_load_job()",
    )
    if not resp.jobs:
        raise RestError(INVALID_JOB_ID, "Invalid job id specified", "slurm_load_job()")
    return {
        "jobs": [convert.job_info(j) for j in resp.jobs],
        "last_backfill": convert.no_val(None),
        "last_update": convert.no_val(resp.now),
    }


def cancel(ctx: RestContext, call: Call, who: Identity) -> Json:
    job_id = _job_id(call)
    request = controller_pb2.SignalJobsRequest(
        job_ids=[job_id], signal=signal_number(call.query.get("signal", ""))
    )
    if call.query.get("flags", "") == "BATCH_JOB":
        request.batch_only = True
    resp = ctx.backend.ctld(
        who, "SignalJobs", request, controller_pb2.SignalJobsResponse, "slurm_kill_job2()"
    )
    for result in resp.results:
        if result.code:
            message = result.message or "Invalid job id specified"
            raise from_daemon(message, "slurm_kill_job2()")
    return {"status": []}


def submit(ctx: RestContext, call: Call, who: Identity) -> Json:
    home = _home(who)
    spec, warnings = job_spec(call.body, home, socket.gethostname().split(".")[0])
    call.warnings.extend(warnings)
    resp = ctx.backend.ctld(
        who,
        "SubmitJob",
        controller_pb2.SubmitJobRequest(spec=spec),
        controller_pb2.SubmitJobResponse,
        "slurm_submit_batch_job()",
    )
    return {"job_id": resp.job_id, "step_id": "batch", "job_submit_user_msg": resp.user_message}


def nodes(ctx: RestContext, call: Call, who: Identity) -> Json:
    names = [call.params["node_name"]] if "node_name" in call.params else []
    resp = ctx.backend.ctld(
        who,
        "GetNodes",
        controller_pb2.GetNodesRequest(names=names),
        controller_pb2.GetNodesResponse,
        "slurm_load_node()",
    )
    if names and not resp.nodes:
        raise RestError(INVALID_NODE_NAME, "Invalid node name specified", "slurm_load_node()")
    return {"nodes": [convert.node(n) for n in resp.nodes], "last_update": convert.no_val(resp.now)}


def update_node(ctx: RestContext, call: Call, who: Identity) -> Json:
    request = controller_pb2.UpdateNodeRequest(nodes=call.params["node_name"], fields=node_update(call.body))
    ctx.backend.ctld(who, "UpdateNode", request, controller_pb2.UpdateNodeResponse, "slurm_update_node()")
    return {}


def partitions(ctx: RestContext, call: Call, who: Identity) -> Json:
    names = [call.params["partition_name"]] if "partition_name" in call.params else []
    resp = ctx.backend.ctld(
        who,
        "GetPartitions",
        controller_pb2.GetPartitionsRequest(names=names),
        controller_pb2.GetPartitionsResponse,
        "slurm_load_partitions()",
    )
    found = [p for p in resp.partitions if not names or p.name in names]
    if names and not found:
        raise RestError(INVALID_PARTITION, "Invalid partition name specified", "slurm_load_partitions()")
    return {
        "partitions": [convert.partition(p, ctx.cluster) for p in found],
        "last_update": convert.no_val(int(ctx.clock())),
    }


def reservations(ctx: RestContext, call: Call, who: Identity) -> Json:
    names = [call.params["reservation_name"]] if "reservation_name" in call.params else []
    resp = ctx.backend.ctld(
        who,
        "GetReservations",
        controller_pb2.GetReservationsRequest(names=names),
        controller_pb2.GetReservationsResponse,
        "slurm_load_reservations()",
    )
    found = [r for r in resp.reservations if not names or r.name in names]
    if names and not found:
        raise RestError(SLURM_ERROR, "Reservation not found", "slurm_load_reservations()")
    return {"reservations": [convert.reservation(r) for r in found], "last_update": convert.no_val(resp.now)}


def shares(ctx: RestContext, call: Call, who: Identity) -> Json:
    resp = ctx.backend.ctld(
        who,
        "GetShares",
        controller_pb2.GetSharesRequest(),
        controller_pb2.GetSharesResponse,
        "slurm_associations_get_shares()",
    )
    return {"shares": convert.shares(resp, ctx.cluster)}


# --- slurmdb (dbd) ---------------------------------------------------------------------------------


def db_jobs(ctx: RestContext, call: Call, who: Identity) -> Json:
    query = accounting_pb2.JobQuery(clusters=[ctx.cluster])
    if "job_id" in call.params:
        query.job_ids.append(_job_id(call))
    for param, target in (
        ("users", query.users),
        ("account", query.accounts),
        ("partition", query.partitions),
        ("job_name", query.names),
        ("state", query.states),
    ):
        target.extend(v for v in call.query.get(param, "").split(",") if v)
    for param, attr in (("start_time", "start"), ("end_time", "end")):
        value = _integer(call.query.get(param, ""), param)
        if value is not None:
            setattr(query, attr, value)
    resp = ctx.backend.dbd(
        who,
        "GetJobs",
        accounting_pb2.AcctJobsRequest(query=query),
        accounting_pb2.AcctJobsResponse,
        "slurmdb_jobs_get()",
    )
    rows = convert.table_rows(resp.jobs)
    if "job_id" in call.params and not rows:
        raise RestError(INVALID_JOB_ID, "Invalid job id specified", "slurmdb_jobs_get()")
    return {"jobs": [convert.db_job(r) for r in rows]}


def _show(
    ctx: RestContext, who: Identity, kind: str, source: str, with_assoc: bool = False
) -> list[dict[str, str]]:
    resp = ctx.backend.dbd(
        who,
        "Show",
        accounting_pb2.ShowRequest(kind=kind, with_assoc=with_assoc),
        accounting_pb2.ShowResponse,
        source,
    )
    return [dict(row.fields) for row in resp.rows]


def accounts(ctx: RestContext, call: Call, who: Identity) -> Json:
    return {"accounts": [convert.account(r) for r in _show(ctx, who, "account", "slurmdb_accounts_get()")]}


def associations(ctx: RestContext, call: Call, who: Identity) -> Json:
    rows = _show(ctx, who, "association", "slurmdb_associations_get()")
    return {"associations": [convert.association(r) for r in rows]}


def qos(ctx: RestContext, call: Call, who: Identity) -> Json:
    rows = _show(ctx, who, "qos", "slurmdb_qos_get()")
    return {"qos": [convert.qos(r, i + 1) for i, r in enumerate(rows)]}


def users(ctx: RestContext, call: Call, who: Identity) -> Json:
    plain = _show(ctx, who, "user", "slurmdb_users_get()")
    assocs = _show(ctx, who, "user", "slurmdb_users_get()", with_assoc=True)
    out = []
    for row in plain:
        name = row.get("user", "")
        mine = [a for a in assocs if a.get("user") == name]
        out.append(convert.user(name, [row, *mine]))
    return {"users": out}


# --- shoal's own -----------------------------------------------------------------------------------


def why(ctx: RestContext, call: Call, who: Identity) -> Json:
    """`shoal why` (ctld's Why read): the caller's own job, any for an operator; another user's job
    is not visible, so it is answered as slurmrestd answers a job id it cannot load."""
    resp = ctx.backend.ctld(
        who,
        "Why",
        controller_pb2.WhyRequest(job_id=_job_id(call)),
        controller_pb2.WhyResponse,
        "slurm_load_job()",
    )
    return as_json(resp)


# --- routing ---------------------------------------------------------------------------------------

_EMPTY_JOBS = {"jobs": [], "last_backfill": convert.no_val(None), "last_update": convert.no_val(None)}

# (method, path, handler, the response's required fields when it fails, openapi plugin)
ROUTES: tuple[tuple[str, str, Handler, Json, str], ...] = (
    ("GET", f"{SLURM}/ping/", ping, {"pings": []}, "slurmctld"),
    ("GET", f"{SLURM}/diag/", diag, {"statistics": {}}, "slurmctld"),
    ("GET", f"{SLURM}/jobs/", jobs, _EMPTY_JOBS, "slurmctld"),
    ("POST", f"{SLURM}/job/submit", submit, {}, "slurmctld"),
    ("GET", f"{SLURM}/job/{{job_id}}", job, _EMPTY_JOBS, "slurmctld"),
    ("DELETE", f"{SLURM}/job/{{job_id}}", cancel, {"status": []}, "slurmctld"),
    ("GET", f"{SLURM}/nodes/", nodes, {"nodes": [], "last_update": convert.no_val(None)}, "slurmctld"),
    (
        "GET",
        f"{SLURM}/node/{{node_name}}",
        nodes,
        {"nodes": [], "last_update": convert.no_val(None)},
        "slurmctld",
    ),
    ("POST", f"{SLURM}/node/{{node_name}}", update_node, {}, "slurmctld"),
    (
        "GET",
        f"{SLURM}/partitions/",
        partitions,
        {"partitions": [], "last_update": convert.no_val(None)},
        "slurmctld",
    ),
    (
        "GET",
        f"{SLURM}/partition/{{partition_name}}",
        partitions,
        {"partitions": [], "last_update": convert.no_val(None)},
        "slurmctld",
    ),
    (
        "GET",
        f"{SLURM}/reservations/",
        reservations,
        {"reservations": [], "last_update": convert.no_val(None)},
        "slurmctld",
    ),
    (
        "GET",
        f"{SLURM}/reservation/{{reservation_name}}",
        reservations,
        {"reservations": [], "last_update": convert.no_val(None)},
        "slurmctld",
    ),
    ("GET", f"{SLURM}/shares", shares, {"shares": {}}, "slurmctld"),
    ("GET", f"{SHOAL}/gpus", shoal_gpus, {"gpus": []}, "shoal"),
    ("GET", f"{SLURMDB}/jobs/", db_jobs, {"jobs": []}, "slurmdbd"),
    ("GET", f"{SLURMDB}/job/{{job_id}}", db_jobs, {"jobs": []}, "slurmdbd"),
    ("GET", f"{SLURMDB}/accounts/", accounts, {"accounts": []}, "slurmdbd"),
    ("GET", f"{SLURMDB}/associations/", associations, {"associations": []}, "slurmdbd"),
    ("GET", f"{SLURMDB}/qos/", qos, {"qos": []}, "slurmdbd"),
    ("GET", f"{SLURMDB}/users/", users, {"users": []}, "slurmdbd"),
    ("GET", f"{SHOAL}/why/{{job_id}}", why, {}, "slurmctld"),
)


def meta(plugin: str, source: str, who: Identity | None) -> Json:
    major, minor, micro = (SLURM_VERSION.split(".") + ["0", "0"])[:3]
    return {
        "plugin": {
            "type": f"openapi/{plugin}",
            "name": f"Slurm OpenAPI {plugin}",
            "data_parser": "data_parser/v0.0.44",
            "accounting_storage": "",
        },
        "client": {"source": source, "user": who.name if who else "", "group": who.group if who else ""},
        "command": [],
        "slurm": {
            "version": {"major": major, "minor": minor, "micro": micro},
            "release": SLURM_VERSION,
            "cluster": "",
        },
    }


def _respond(
    status: int,
    fields: Json,
    plugin: str,
    source: str,
    who: Identity | None,
    errors: list[Json],
    warnings: list[str],
    cluster: str,
) -> web.Response:
    envelope = meta(plugin, source, who)
    envelope["slurm"]["cluster"] = cluster
    body = {
        **fields,
        "meta": envelope,
        "errors": errors,
        "warnings": [{"description": w, "source": ""} for w in warnings],
    }
    return web.json_response(body, status=status)


def _endpoint(ctx: RestContext, handler: Handler, empty: Json, plugin: str) -> Callable[..., Any]:
    async def serve(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        source = f"[{peer[0]}]:{peer[1]}" if peer else ""
        who: Identity | None = None
        call = Call(params=dict(request.match_info), query=dict(request.query))
        try:
            who = authenticate(request.headers, ctx.jwt_key, ctx.clock(), cookie=request.method == "GET")
            if request.method == "POST":
                call.body = _parse(await request.text())
            fields = await asyncio.to_thread(handler, ctx, call, who)
        except RestError as exc:
            return _respond(exc.status, empty, plugin, source, who, [exc.entry()], call.warnings, ctx.cluster)
        except Exception:  # noqa: BLE001 - the user gets a clean error; the log gets the traceback
            log.exception("%s %s failed", request.method, request.path)
            error = RestError(-1, "Unspecified error", handler.__name__)
            return _respond(500, empty, plugin, source, who, [error.entry()], call.warnings, ctx.cluster)
        return _respond(200, fields, plugin, source, who, [], call.warnings, ctx.cluster)

    return serve


def make_app(ctx: RestContext) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_not_found])
    for method, path, handler, empty, plugin in ROUTES:
        serve = _endpoint(ctx, handler, empty, plugin)
        app.router.add_route(method, path, serve)
        alternate = path[:-1] if path.endswith("/") else path + "/"
        app.router.add_route(method, alternate, serve)  # slurmrestd answers with and without the slash
    return app


@web.middleware
async def _not_found(request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
    """Unknown paths and methods: slurmrestd's 404 body, not aiohttp's HTML."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        error = RestError(
            REST_INVALID_QUERY,
            f"Unable to find requested URL: {request.method} {request.path}",
            "_on_http_request",
        )
        return web.json_response(
            {"meta": meta("slurmctld", "", None), "errors": [error.entry()], "warnings": []},
            status=exc.status,
        )


def _parse(text: str) -> object:
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError as exc:
        raise RestError(
            REST_FAIL_PARSING,
            "Unable to parse request body as JSON",
            "_parse_http_body",
            f"line {exc.lineno} column {exc.colno}: {exc.msg}",
        ) from exc


def _integer(text: str, name: str) -> int | None:
    if not text:
        return None
    if not text.isdigit():
        raise RestError(REST_INVALID_QUERY, f"Invalid {name}: {text}", "_parse_query")
    return int(text)


def _job_id(call: Call) -> str:
    job_id = call.params.get("job_id", "")
    if not job_id.split("_")[0].isdigit():
        raise RestError(INVALID_JOB_ID, "Invalid job id specified", "_parse_job_id")
    return job_id


def _home(who: Identity) -> str:
    try:
        return pwd.getpwuid(who.uid).pw_dir or "/"
    except KeyError:
        return "/"
