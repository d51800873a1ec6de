"""shoal/auth: the cluster key, signed caller credentials and job credentials."""

from __future__ import annotations

from shoal.auth.credential import ReplayCache, encode, mint, verify
from shoal.auth.errors import AuthError
from shoal.auth.job_credential import sign_job_credential, verify_job_credential
from shoal.auth.key import generate_key, load_key

__all__ = [
    "AuthError",
    "ReplayCache",
    "encode",
    "generate_key",
    "load_key",
    "mint",
    "sign_job_credential",
    "verify",
    "verify_job_credential",
]
