"""Who a request is: slurmrestd's rest_auth/jwt headers, the token checked against the jwt key.

X-SLURM-USER-TOKEN carries the token; X-SLURM-USER-NAME, when given, must be the token's `sun`
(slurmrestd lets SlurmUser act for others only with its own token; restd keeps to the plain case).
Beyond slurmrestd, a GET may carry the token in the web view's cookie instead (HttpOnly, set by its
login): the browser's pages read the same endpoints as any client, and nothing that changes state
accepts a cookie, so a cross-site form can never act as the user.
The user's uid and gid come from the passwd database, as the commands' come from the kernel.
"""

from __future__ import annotations

import grp
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie

from restd.errors import AUTHENTICATION_ERROR, RestError
from shoal.auth.errors import AuthError
from shoal.auth.token import verify_token

TOKEN_HEADER = "X-SLURM-USER-TOKEN"
USER_HEADER = "X-SLURM-USER-NAME"
SOURCE = "rest_auth/jwt"
FAILURE = "Authentication failure"
COOKIE = "shoal_token"  # the web view's session: the token itself, HttpOnly, SameSite=Lax


@dataclass(frozen=True)
class Identity:
    name: str
    uid: int
    gid: int
    group: str


def cookie_token(headers: Mapping[str, str]) -> str:
    """The web view's token from the Cookie header ("" when there is none or it is malformed)."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("Cookie", ""))
    except CookieError:
        return ""
    morsel = jar.get(COOKIE)
    return morsel.value.strip() if morsel is not None else ""


def authenticate(headers: Mapping[str, str], key: bytes, now: float, cookie: bool = False) -> Identity:
    """The token's user; `cookie`: a request that changes nothing may bring the web view's cookie."""
    token = headers.get(TOKEN_HEADER, "").strip()
    if not token and cookie:
        token = cookie_token(headers)
    if not token:
        raise RestError(AUTHENTICATION_ERROR, FAILURE, SOURCE, f"missing {TOKEN_HEADER} header")
    try:
        user = verify_token(key, token, now)
    except AuthError as exc:
        raise RestError(AUTHENTICATION_ERROR, FAILURE, SOURCE, exc.message) from exc
    claimed = headers.get(USER_HEADER, "").strip()
    if claimed and claimed != user:
        raise RestError(AUTHENTICATION_ERROR, FAILURE, SOURCE, f"{USER_HEADER} does not match the token")
    try:
        entry = pwd.getpwnam(user)
    except KeyError as exc:
        raise RestError(AUTHENTICATION_ERROR, FAILURE, SOURCE, "unknown user") from exc
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = str(entry.pw_gid)
    return Identity(name=user, uid=entry.pw_uid, gid=entry.pw_gid, group=group)
