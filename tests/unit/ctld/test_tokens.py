"""`scontrol token` in the controller: who may have a token for whom, and for how long."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctld import tokens
from ctld.controller import Caller
from ctld.errors import FAILED_PRECONDITION, PERMISSION_DENIED, SlurmError
from shoal.auth.token import generate_jwt_key, verify_token
from shoal.v1 import controller_pb2 as pb
from tests.unit.ctld.harness import ROOT, Harness, cluster

NOBODY = Caller(uid=65534, gid=65534, host="login")


def _harness(tmp_path: Path, **keys: str) -> tuple[Harness, bytes]:
    key = generate_jwt_key(str(tmp_path / "jwt.key"))
    settings = {"AuthAltTypes": "auth/jwt", "AuthAltParameters": f"jwt_key={tmp_path / 'jwt.key'}", **keys}
    return Harness.of(cluster().nodes(1).set(**settings), tmp_path), key


def test_a_user_gets_a_token_for_themself_lasting_slurms_default(tmp_path: Path) -> None:
    h, key = _harness(tmp_path)
    token = tokens.create(
        h.ctl.cfg, h.ctl.is_operator(NOBODY), pb.CreateTokenRequest(), NOBODY, h.ctl.clock()
    ).token
    assert verify_token(key, token, h.ctl.clock()) == "nobody"
    assert verify_token(key, token, h.ctl.clock() + 1799) == "nobody"
    with pytest.raises(Exception, match="Token expired"):
        verify_token(key, token, h.ctl.clock() + 1801)


def test_only_an_operator_names_another_user(tmp_path: Path) -> None:
    h, key = _harness(tmp_path)
    token = tokens.create(
        h.ctl.cfg,
        h.ctl.is_operator(ROOT),
        pb.CreateTokenRequest(username="nobody", lifespan=60),
        ROOT,
        h.ctl.clock(),
    ).token
    assert verify_token(key, token, h.ctl.clock() + 59) == "nobody"
    with pytest.raises(SlurmError, match="Invalid user id") as refused:
        tokens.create(
            h.ctl.cfg,
            h.ctl.is_operator(NOBODY),
            pb.CreateTokenRequest(username="root"),
            NOBODY,
            h.ctl.clock(),
        )
    assert refused.value.code == PERMISSION_DENIED


@pytest.mark.parametrize(
    ("keys", "code"),
    [
        ({"AuthAltTypes": "", "AuthAltParameters": ""}, FAILED_PRECONDITION),
        ({"AuthAltParameters": "jwt_key=/nonexistent/jwt.key"}, FAILED_PRECONDITION),
        ({"AuthAltParameters": "jwt_key=KEY,disable_token_creation"}, PERMISSION_DENIED),
    ],
    ids=["jwt-not-configured", "key-missing", "creation-disabled"],
)
def test_no_token_without_jwt_configured(tmp_path: Path, keys: dict[str, str], code: int) -> None:
    keys = {k: v.replace("KEY", str(tmp_path / "jwt.key")) for k, v in keys.items()}
    h, _ = _harness(tmp_path, **keys)
    with pytest.raises(SlurmError) as refused:
        tokens.create(h.ctl.cfg, h.ctl.is_operator(NOBODY), pb.CreateTokenRequest(), NOBODY, h.ctl.clock())
    assert refused.value.code == code
