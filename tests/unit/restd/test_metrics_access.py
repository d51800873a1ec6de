"""Who may read /metrics (Slurm 25.11's rules): open without PrivateData, a listed user's token with
MetricsAuthUsers, off with PrivateData unless MetricsParameters=ignore_private_data."""

from __future__ import annotations

from dataclasses import replace

from restd.metrics_http import MetricsAccess
from shoal.auth.token import generate_jwt_key, mint_token
from shoal.conf.slurm import SlurmConfig


def _access(**fields: object) -> MetricsAccess:
    return MetricsAccess.from_config(
        replace(SlurmConfig(path="slurm.conf"), metrics_type="metrics/openmetrics", **fields)
    )  # type: ignore[arg-type]


def test_open_without_private_data() -> None:
    assert _access().refusal({}, b"k", 0) is None
    assert not MetricsAccess.from_config(
        SlurmConfig(path="slurm.conf")
    ).enabled  # no MetricsType: no endpoints


def test_private_data_turns_them_off_unless_ignored() -> None:
    refused = _access(private_data=("jobs",)).refusal({}, b"k", 0)
    assert refused is not None and refused.status == 403
    assert (
        _access(private_data=("jobs",), metrics_parameters=("ignore_private_data",)).refusal({}, b"k", 0)
        is None
    )


def test_auth_users_need_a_listed_users_token(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "jwt.key"
    generate_jwt_key(str(path))
    key = path.read_bytes()
    access = _access(metrics_auth_users=("nobody",), private_data=("jobs",))
    assert access.refusal({}, key, 100).status == 401  # type: ignore[union-attr]
    assert access.refusal({"X-SLURM-USER-TOKEN": mint_token(key, "nobody", 60, 100)}, key, 100) is None
    assert access.refusal({"X-SLURM-USER-TOKEN": mint_token(key, "root", 60, 100)}, key, 100) is None
    denied = access.refusal({"X-SLURM-USER-TOKEN": mint_token(key, "daemon", 60, 100)}, key, 100)
    assert denied is not None and denied.status == 403
