"""shoal-restd's read-only web view: HTML pages, the JSON they poll, and the what-if plots."""

from __future__ import annotations

from aiohttp import web

from restd.app import RestContext
from shoal.conf.slurm import SlurmConfig


def add_routes(app: web.Application, ctx: RestContext, cfg: SlurmConfig, conf: str) -> None:
    """/web/ on restd's app; the what-if page replays history only where accounting keeps it."""
    from restd.web.routes import add_routes as add
    from restd.web.whatif import WhatIf

    accounting = cfg.accounting_storage_type == "accounting_storage/slurmdbd"
    capacity = sum(n.cpus for n in cfg.nodes)
    add(app, ctx, WhatIf(conf, capacity) if accounting else None)
