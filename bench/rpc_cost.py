"""Server CPU of one small authenticated unary call: shoal's gRPC server path without a servicer's work.

A child process runs `shoal.rpc.server.make_server` with one method that returns its request; the parent
makes N calls through `shoal.rpc.client.Stub` (a fresh credential each) and the child reports the CPU it
spent (process time, all threads) while they ran. `--plain` runs the same server without the auth
interceptor: the difference is what authentication and the handler wrapper cost per call.

    python bench/rpc_cost.py [--calls 2000] [--reps 3] [--plain]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import secrets
import time
from concurrent import futures
from multiprocessing.connection import Connection

import grpc

METHOD = "/shoal.bench.Echo/Echo"


def _identity(data: bytes) -> bytes:
    return data


def _serve(conn: Connection, key: bytes, plain: bool) -> None:
    from shoal.rpc.server import SERVER_OPTIONS, bind, make_server

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler(
        "shoal.bench.Echo",
        {
            "Echo": grpc.unary_unary_rpc_method_handler(
                echo, request_deserializer=_identity, response_serializer=_identity
            )
        },
    )
    if plain:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=SERVER_OPTIONS)
    else:
        server = make_server([], key)
    port = bind(server, "127.0.0.1:0")
    server.add_generic_rpc_handlers((handler,))
    server.start()
    conn.send(port)
    while True:
        msg = conn.recv()
        if msg == "stop":
            break
        conn.send(time.process_time())
    server.stop(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="no auth interceptor (the gRPC floor)")
    args = parser.parse_args()

    from shoal.rpc.client import Stub

    key = secrets.token_bytes(32)
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=_serve, args=(child, key, args.plain), daemon=True)
    proc.start()
    port = parent.recv()
    stub = Stub(f"127.0.0.1:{port}", key)
    from google.protobuf import wrappers_pb2

    request = wrappers_pb2.BytesValue(value=b"x" * 64)
    for _ in range(200):  # warm up: connection, method cache
        stub.call(METHOD, request, wrappers_pb2.BytesValue)
    figures = []
    for _ in range(args.reps):
        parent.send("cpu")
        before = parent.recv()
        client_before = time.process_time()
        wall_before = time.perf_counter()
        for _ in range(args.calls):
            stub.call(METHOD, request, wrappers_pb2.BytesValue)
        wall = time.perf_counter() - wall_before
        client_cpu = time.process_time() - client_before
        parent.send("cpu")
        after = parent.recv()
        figures.append(
            ((after - before) / args.calls * 1e3, client_cpu / args.calls * 1e3, wall / args.calls * 1e3)
        )
    parent.send("stop")
    proc.join(5)
    stub.close()
    mode = "plain gRPC (no auth)" if args.plain else "authenticated (shoal.rpc.server)"
    for server_ms, client_ms, wall_ms in figures:
        print(
            f"{mode}: server {server_ms:.3f} ms CPU/call, client {client_ms:.3f} ms CPU/call, "
            f"{wall_ms:.3f} ms wall/call"
        )
    best = min(f[0] for f in figures)
    print(f"best server CPU per call: {best:.3f} ms ({args.calls} calls x {args.reps})")


if __name__ == "__main__":
    main()
