"""restd's /metrics endpoints: who may read them (Slurm 25.11's rules) and one ctld round per scrape.

MetricsType=metrics/openmetrics turns them on. MetricsAuthUsers set: a JWT (X-SLURM-USER-TOKEN) of
root, SlurmUser or a listed user is required. Otherwise they are open to all, unless PrivateData is
set, which turns them off unless MetricsParameters=ignore_private_data (Slurm 25.11's Metrics Guide:
disabled while any PrivateData is set; 26.05 lets root and SlurmUser in instead). ctld is asked as restd's
own user (SlurmUser), which sees every job, as slurmctld's own metrics do.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import pwd
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web
from google.protobuf.message import Message

from restd import gpus, metrics
from restd.auth import Identity, authenticate
from restd.backend import Backend
from restd.errors import RestError
from shoal.conf.slurm import SlurmConfig
from shoal.v1 import controller_pb2 as pb

log = logging.getLogger("shoal.restd")
OPENMETRICS = "metrics/openmetrics"
M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class MetricsAccess:
    enabled: bool
    auth_users: frozenset[str]  # MetricsAuthUsers plus root and SlurmUser; empty: no token asked
    open: bool  # no PrivateData, or ignore_private_data

    @classmethod
    def from_config(cls, cfg: SlurmConfig) -> MetricsAccess:
        users = frozenset(cfg.metrics_auth_users)
        return cls(
            enabled=cfg.metrics_type == OPENMETRICS,
            auth_users=users | {"root", cfg.slurm_user} if users else frozenset(),
            open=not cfg.private_data or "ignore_private_data" in cfg.metrics_parameters,
        )

    def refusal(self, headers: Mapping[str, str], jwt_key: bytes, now: float) -> web.Response | None:
        """None when the request may read the metrics, else the answer that says why not."""
        if self.auth_users:
            try:
                who = authenticate(headers, jwt_key, now)
            except RestError as exc:
                return web.Response(status=401, text=f"{exc.message}\n")
            if who.name not in self.auth_users:
                return web.Response(status=403, text=f"user {who.name} is not in MetricsAuthUsers\n")
            return None
        if not self.open:
            return web.Response(
                status=403,
                text="metrics are disabled while PrivateData is set "
                "(MetricsParameters=ignore_private_data)\n",
            )
        return None


def _self() -> Identity:
    uid, gid = os.getuid(), os.getgid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return Identity(name=name, uid=uid, gid=gid, group=group)


def _latency_us() -> int:
    start = time.perf_counter_ns()
    for _ in range(1000):
        time.time()
    return (time.perf_counter_ns() - start) // 1000


class Scrapes:
    """The text of each endpoint, from ctld's answers (blocking: run in a thread)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.who = _self()

    def _ctld(self, method: str, request: Message, response_type: type[M]) -> M:
        return self.backend.ctld(self.who, method, request, response_type, "metrics")

    def jobs(self) -> pb.GetJobsResponse:
        return self._ctld(
            "GetJobs", pb.GetJobsRequest(include_finished=True, show_all=True), pb.GetJobsResponse
        )

    def nodes(self) -> pb.GetNodesResponse:
        return self._ctld("GetNodes", pb.GetNodesRequest(), pb.GetNodesResponse)

    def partitions(self) -> pb.GetPartitionsResponse:
        return self._ctld("GetPartitions", pb.GetPartitionsRequest(), pb.GetPartitionsResponse)

    def diag(self) -> pb.GetDiagResponse:
        return self._ctld("GetDiag", pb.GetDiagRequest(), pb.GetDiagResponse)

    def live(self) -> pb.GetLiveUsageResponse:
        return self._ctld("GetLiveUsage", pb.GetLiveUsageRequest(gpus=True), pb.GetLiveUsageResponse)

    def text(self, endpoint: str) -> str:
        if endpoint == "gpus":
            return metrics.exposition(gpus.gpu_families(self.live()))
        if endpoint == "jobs":
            families = metrics.jobs_families(self.jobs())
        elif endpoint == "jobs-users-accts":
            families = metrics.users_accounts_families(self.jobs())
        elif endpoint == "nodes":
            families = metrics.nodes_families(self.nodes())
        elif endpoint == "partitions":
            families = metrics.partitions_families(self.partitions(), self.nodes(), self.jobs())
        else:
            families = metrics.scheduler_families(self.diag(), _latency_us())
        return metrics.exposition(families)


Serve = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(
    app: web.Application,
    cfg: SlurmConfig,
    backend: Backend,
    jwt_key: bytes,
    clock: Callable[[], float] = time.time,
) -> None:
    """GET /metrics and /metrics/{jobs,jobs-users-accts,nodes,partitions,scheduler,gpus} when MetricsType says so."""
    access = MetricsAccess.from_config(cfg)
    if not access.enabled:
        return
    scrapes = Scrapes(backend)

    def endpoint(name: str | None) -> Serve:
        async def serve(request: web.Request) -> web.StreamResponse:
            refused = access.refusal(request.headers, jwt_key, clock())
            if refused is not None:
                return refused
            if name is None:
                return web.Response(text=metrics.index(), content_type="text/plain")
            try:
                body = await asyncio.to_thread(scrapes.text, name)
            except RestError as exc:
                return web.Response(status=503, text=f"{exc.message}\n")
            except Exception:  # noqa: BLE001 - the scraper gets a clean error; the log gets the traceback
                log.exception("GET /metrics/%s failed", name)
                return web.Response(status=500, text="Unspecified error\n")
            return web.Response(body=body.encode(), headers={"Content-Type": metrics.CONTENT_TYPE})

        return serve

    app.router.add_get("/metrics", endpoint(None))
    for path in metrics.ENDPOINTS:
        app.router.add_get(path, endpoint(path.removeprefix("/metrics/")))
