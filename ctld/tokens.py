"""`scontrol token`: ctld mints JSON Web Tokens (auth/jwt), since only ctld's host holds the jwt key.

A user gets a token for themself; an administrator (root, SlurmUser, AdminLevel=Administrator; not an
Operator) for any user, as Slurm's slurmctld decides. The key is read once per path and kept; a missing or unsafe key is refused per request with
the reason logged, so a misconfigured cluster still runs everything but tokens.
"""

from __future__ import annotations

import logging
import pwd
from typing import TYPE_CHECKING

from ctld.errors import FAILED_PRECONDITION, INVALID_ARGUMENT, PERMISSION_DENIED, SlurmError
from shoal.auth.errors import AuthError
from shoal.auth.token import DEFAULT_LIFESPAN, NOT_CONFIGURED, jwt_settings, load_jwt_key, mint_token
from shoal.v1 import controller_pb2 as pb

if TYPE_CHECKING:
    from ctld.state import Caller
    from shoal.conf.slurm import SlurmConfig

log = logging.getLogger("shoal.ctld")

INVALID_USER = "Invalid user id"  # Slurm 22.05's answer to a user asking for another's token
CREATION_DISABLED = "Token creation is disabled (AuthAltParameters=disable_token_creation)"
_keys: dict[str, bytes] = {}


def create(
    cfg: SlurmConfig, operator: bool, request: pb.CreateTokenRequest, caller: Caller, now: float
) -> pb.CreateTokenResponse:
    """A token for the caller, or (operators only) for `request.username`."""
    settings = jwt_settings(cfg.auth_alt_types, cfg.auth_alt_parameters)
    if not settings.enabled:
        raise SlurmError(NOT_CONFIGURED, FAILED_PRECONDITION)
    if settings.creation_disabled and not operator:
        raise SlurmError(CREATION_DISABLED, PERMISSION_DENIED)
    own = _user_name(caller.uid)
    username = request.username or own
    if username != own and not operator:
        raise SlurmError(INVALID_USER, PERMISSION_DENIED)
    if request.username:
        try:
            pwd.getpwnam(request.username)
        except KeyError as exc:
            raise SlurmError(INVALID_USER, INVALID_ARGUMENT) from exc
    if request.lifespan < 0:
        raise SlurmError("Invalid lifespan", INVALID_ARGUMENT)
    key = _keys.get(settings.key_file)
    if key is None:
        try:
            key = load_jwt_key(settings.key_file)
        except AuthError as exc:
            log.error("scontrol token: %s", exc.message)
            raise SlurmError(NOT_CONFIGURED, FAILED_PRECONDITION) from exc
        _keys[settings.key_file] = key
    lifespan = request.lifespan or DEFAULT_LIFESPAN
    try:
        token = mint_token(key, username, lifespan, now)
    except AuthError as exc:  # PyJWT missing
        log.error("scontrol token: %s", exc.message)
        raise SlurmError(NOT_CONFIGURED, FAILED_PRECONDITION) from exc
    return pb.CreateTokenResponse(token=token)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError as exc:
        raise SlurmError(INVALID_USER, PERMISSION_DENIED) from exc
