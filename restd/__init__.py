"""shoal-restd: slurmrestd's REST API (OpenAPI v0.0.44) over shoal's gRPC daemons, with JWT logins.

Each request acts as the token's user: restd mints that user's own credential for ctld and dbd, so
the daemons decide what the user may see and change, exactly as for the user's commands.
"""
