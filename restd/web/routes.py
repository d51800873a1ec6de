"""The web view's routes: login (a token from the URL or the form becomes an HttpOnly cookie), the
pages, and the JSON they poll. Read-only: every call to ctld and dbd acts as the cookie's user, so a
user sees what the commands would show them.

  GET  /web/?token=T      the URL `shoal up` prints: T goes into the cookie, the address loses it
  GET  /web/login         the form that asks for the token `scontrol token` prints
  POST /web/login         the form's token into the cookie
  POST /web/logout        the cookie cleared
  GET  /web/{nodes,queue,shares,whatif}            the pages
  GET  /web/api/{nodes,queue,shares,whatif}        their data (401 + where to log in when the token is bad)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from restd import app as rest
from restd.auth import COOKIE, TOKEN_HEADER, Identity, authenticate, cookie_token
from restd.convert import table_rows
from restd.errors import RestError
from restd.web import model
from restd.web.whatif import WhatIf, history_query, sacct_text
from shoal.auth.token import EXPIRED_TOKEN
from shoal.v1 import accounting_pb2
from shoal.v1 import controller_pb2 as pb

WEB = "/web"
PAGES = (("nodes", "Nodes"), ("queue", "Queue"), ("shares", "Fair-share"), ("whatif", "What-if"))
# optional endpoints of restd the pages use when this restd serves them
OPTIONAL = {"gpus": "/shoal/v1/gpus", "why": "/shoal/v1/why/"}
LOGIN_MESSAGES = {
    "expired": "Your token has expired. Get a new one with scontrol token and paste it below.",
    "invalid": "That token is not valid for this cluster. Paste the token scontrol token prints.",
    "logout": "You are logged out.",
}
STATIC = {"view.js": "application/javascript", "view.css": "text/css"}
Json = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _login_error(exc: RestError) -> str:
    return "expired" if exc.description == EXPIRED_TOKEN else "invalid"


def _see_other(target: str, token: str | None = None) -> web.Response:
    """A redirect that sets the session cookie to `token` ("" clears it; None leaves it).

    The cookie lives as long as the browser session; the token's own expiry is checked on each request.
    """
    response = web.Response(status=303, headers={"Location": target})
    if token:
        response.set_cookie(COOKIE, token, path="/", httponly=True, samesite="Lax")
    elif token == "":
        response.del_cookie(COOKIE, path="/")
    return response


class WebView:
    def __init__(self, ctx: rest.RestContext, whatif: WhatIf | None, optional: dict[str, bool]) -> None:
        self.ctx = ctx
        self.whatif = whatif
        self.optional = optional

    # --- who is asking ------------------------------------------------------------------------

    def identify(self, token: str) -> Identity:
        return authenticate({TOKEN_HEADER: token}, self.ctx.jwt_key, self.ctx.clock())

    def login_with(self, token: str, target: str) -> web.StreamResponse:
        """A token from the URL or the form: into the cookie and on to `target`, else to the login page."""
        try:
            self.identify(token)
        except RestError as exc:
            return _see_other(f"{WEB}/login?error={_login_error(exc)}", "")
        return _see_other(target, token)

    # --- pages ---------------------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info.get("page", "") or "nodes"
        if name not in dict(PAGES):
            raise web.HTTPNotFound()
        if "token" in request.query:
            return self.login_with(request.query["token"], f"{WEB}/{name}")
        token = cookie_token(request.headers)
        if not token:
            return _see_other(f"{WEB}/login")
        try:
            who = self.identify(token)
        except RestError as exc:
            return _see_other(f"{WEB}/login?error={_login_error(exc)}", "")
        return _html(render_page(name, who, self.optional, self.ctx.cluster))

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        message = LOGIN_MESSAGES.get(request.query.get("error", ""), "")
        return _html(render_login(message, self.ctx.cluster))

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not _same_origin(request):
            return web.Response(status=403, text="cross-site login refused\n")
        form = await request.post()
        token = str(form.get("token", "")).strip()
        if token.startswith("SLURM_JWT="):  # pasted as scontrol token prints it
            token = token.removeprefix("SLURM_JWT=")
        return self.login_with(token, f"{WEB}/nodes")

    async def logout(self, request: web.Request) -> web.StreamResponse:
        if not _same_origin(request):
            return web.Response(status=403, text="cross-site logout refused\n")
        return _see_other(f"{WEB}/login?error=logout", "")

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        body = resources.files("restd.web").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=STATIC[name], headers={"Cache-Control": "no-cache"})

    # --- data ----------------------------------------------------------------------------------

    def api(self, build: Callable[[Identity], Json], then: Callable[[Json], Json] | None = None) -> Handler:
        """A JSON endpoint: `build` (blocking, in a thread) as the cookie's user, then `then` on the loop."""

        async def serve(request: web.Request) -> web.StreamResponse:
            try:
                who = self.identify(cookie_token(request.headers) or request.headers.get(TOKEN_HEADER, ""))
            except RestError as exc:
                login = f"{WEB}/login?" + urlencode({"error": _login_error(exc)})
                return web.json_response(
                    {"error": exc.description or exc.message, "login": login}, status=401
                )
            try:
                data = await asyncio.to_thread(build, who)
                if then is not None:
                    data = then(data)
            except RestError as exc:
                return web.json_response({"error": exc.message}, status=exc.status)
            return web.json_response(data, headers={"Cache-Control": "no-store"})

        return serve

    def _jobs(self, who: Identity) -> pb.GetJobsResponse:
        return self.ctx.backend.ctld(
            who, "GetJobs", pb.GetJobsRequest(show_all=True), pb.GetJobsResponse, "slurm_load_jobs()"
        )

    def nodes(self, who: Identity) -> Json:
        nodes = self.ctx.backend.ctld(
            who, "GetNodes", pb.GetNodesRequest(), pb.GetNodesResponse, "slurm_load_node()"
        )
        return model.gpu_grid(nodes, self._jobs(who))

    def queue(self, who: Identity) -> Json:
        return model.queue(self._jobs(who))

    def shares(self, who: Identity) -> Json:
        resp = self.ctx.backend.ctld(
            who, "GetShares", pb.GetSharesRequest(), pb.GetSharesResponse, "slurm_associations_get_shares()"
        )
        return model.shares(resp)

    def history(self, who: Identity) -> Json:
        """The history's text (blocking dbd call); the replay itself is started on the event loop."""
        if self.whatif is None:
            return {
                "state": "off",
                "message": "This cluster keeps no accounting (AccountingStorageType): there is no history to replay.",
            }
        resp = self.ctx.backend.dbd(
            who,
            "GetJobs",
            accounting_pb2.AcctJobsRequest(query=history_query(self.ctx.cluster, self.ctx.clock())),
            accounting_pb2.AcctJobsResponse,
            "web view",
        )
        text, ran = sacct_text(table_rows(resp.jobs))
        return {"state": "history", "text": text, "ran": ran}

    def whatif_status(self, data: Json) -> Json:
        if data.get("state") != "history" or self.whatif is None:
            return data
        return self.whatif.status(str(data["text"]), int(data["ran"]))


def _same_origin(request: web.Request) -> bool:
    """A form posted from this restd's own page (browsers send Origin with every POST; curl need not)."""
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host  # the scheme may be a proxy's


def _html(text: str) -> web.Response:
    return web.Response(
        text=text,
        content_type="text/html",
        headers={
            "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",  # no-referrer would make a form's Origin "null"
        },
    )


def _shell(title: str, cluster: str, body: str, nav: str = "", page: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · {escape(cluster)} · shoal</title>"
        '<link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{WEB}/static/view.css">'
        f'</head><body data-page="{escape(page)}">'
        f'<header><span class="brand">shoal · {escape(cluster)}</span>{nav}</header>'
        f"<main>{body}</main></body></html>\n"
    )


PAGE_BODIES = {
    "nodes": '<h1>Nodes</h1><p class="hint">Each cell is a GPU: the job and user holding it.</p>'
    '<div id="grid" class="grid" aria-live="polite"></div>',
    "queue": '<h1>Queue</h1><table id="queue"><thead><tr><th>JOBID</th><th>NAME</th><th>USER</th>'
    "<th>ACCOUNT</th><th>PARTITION</th><th>STATE</th><th>REASON</th><th>SUBMIT</th>"
    "<th>START (planned)</th><th>NODES (planned)</th><th>GPUS</th><th>TIME LIMIT</th><th></th>"
    '</tr></thead><tbody></tbody></table><section id="why" hidden></section>',
    "shares": '<h1>Fair-share</h1><p class="hint">sshare -a: shares, usage and fair-share factor by account.</p>'
    '<table id="shares"><thead><tr><th>Account</th><th>User</th><th>RawShares</th><th>NormShares</th>'
    "<th>RawUsage</th><th>EffectvUsage</th><th>FairShare</th></tr></thead><tbody></tbody></table>",
    "whatif": '<h1>What-if</h1><p class="hint">The last 30 days of this cluster\'s jobs replayed by '
    "<code>shoal sim</code> under this slurm.conf's scheduler (conf) and other policies.</p>"
    '<p id="whatif-status"></p><table id="whatif"><thead></thead><tbody></tbody></table>'
    '<div id="plots"></div>',
}


def render_page(name: str, who: Identity, optional: dict[str, bool], cluster: str) -> str:
    here = ' class="here"'
    links = "".join(
        f'<a href="{WEB}/{key}"{here if key == name else ""}>{escape(title)}</a>' for key, title in PAGES
    )
    nav = (
        f"<nav>{links}</nav>"
        f'<form class="who" method="post" action="{WEB}/logout"><span id="user">{escape(who.name)}</span>'
        '<button type="submit">Log out</button></form>'
    )
    features = " ".join(k for k, present in optional.items() if present)
    body = (
        f'<div id="view" data-features="{escape(features)}" data-user="{escape(who.name)}">'
        f'{PAGE_BODIES[name]}<p class="updated" id="updated"></p></div>'
        f'<script src="{WEB}/static/view.js"></script>'
    )
    return _shell(dict(PAGES)[name], cluster, body, nav, name)


def render_login(message: str, cluster: str) -> str:
    note = f'<p class="message" id="message">{escape(message)}</p>' if message else ""
    body = (
        "<h1>Log in</h1>"
        f"{note}"
        "<p>Paste the token that <code>scontrol token</code> prints (the part after SLURM_JWT=).</p>"
        f'<form method="post" action="{WEB}/login"><input name="token" id="token" size="60" '
        'autocomplete="off" required autofocus> <button type="submit">Log in</button></form>'
    )
    return _shell("Log in", cluster, body, page="login")


def _optional(app: web.Application) -> dict[str, bool]:
    """Which of the optional JSON endpoints this restd serves (other parts of restd add them)."""
    paths = [getattr(r, "canonical", "") for r in app.router.resources()]
    return {key: any(p == path or p.startswith(path) for p in paths) for key, path in OPTIONAL.items()}


def add_routes(app: web.Application, ctx: rest.RestContext, whatif: WhatIf | None) -> None:
    """The web view's routes (call after every other route is in: it looks for the optional ones)."""
    view = WebView(ctx, whatif, {})
    app.router.add_get(WEB, _to_web)
    app.router.add_get(f"{WEB}/", view.page)
    app.router.add_get("/", _to_web)
    app.router.add_get(f"{WEB}/login", view.login_page)
    app.router.add_post(f"{WEB}/login", view.login)
    app.router.add_post(f"{WEB}/logout", view.logout)
    app.router.add_get(f"{WEB}/static/{{name}}", view.static)
    app.router.add_get(f"{WEB}/api/nodes", view.api(view.nodes))
    app.router.add_get(f"{WEB}/api/queue", view.api(view.queue))
    app.router.add_get(f"{WEB}/api/shares", view.api(view.shares))
    app.router.add_get(f"{WEB}/api/whatif", view.api(view.history, view.whatif_status))
    app.router.add_get(f"{WEB}/{{page}}", view.page)

    async def found(started: web.Application) -> None:
        view.optional = _optional(started)  # every route is in by the time the app starts

    app.on_startup.append(found)


async def _to_web(request: web.Request) -> web.StreamResponse:
    query = f"?{request.query_string}" if request.query_string else ""
    return _see_other(f"{WEB}/{query}")
