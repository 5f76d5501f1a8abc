"""Many unary gRPC calls on one channel, made by gRPC C-core (Python `grpcio`), for
tests/interop.rs.

Usage: grpcio_calls.py TARGET AUTHORITY COUNT METHOD=REQUEST_HEX [METHOD=REQUEST_HEX ...]

AUTHORITY overrides the `:authority` C-core sends (`grpc.default_authority`); `-` leaves its
default for the target. Makes COUNT calls in turn, cycling through the methods, each with a deadline (C-core sends it as
`grpc-timeout`, a value that differs on nearly every call and that its HPACK encoder adds to the
dynamic table: the table turns over as a long-lived connection's does). Requests and replies
are raw protobuf bytes (hex). Prints one JSON line: {"ok": true, "replies": [HEX, ...]} or, at
the first failed call, {"ok": false, "call": N, "code": NAME, "details": TEXT}.
"""

import json
import sys

import grpc


def main() -> None:
    target, authority, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    calls = [arg.split("=", 1) for arg in sys.argv[4:]]
    options = [] if authority == "-" else [("grpc.default_authority", authority)]
    replies = []
    with grpc.insecure_channel(target, options=options) as channel:
        stubs = [(channel.unary_unary(m), bytes.fromhex(r)) for m, r in calls]
        for n in range(count):
            stub, request = stubs[n % len(stubs)]
            try:
                replies.append(stub(request, timeout=30 + n % 97).hex())
            except grpc.RpcError as e:
                failed = {"ok": False, "call": n, "code": e.code().name, "details": e.details()}
                print(json.dumps(failed))
                return
    print(json.dumps({"ok": True, "replies": replies}))


if __name__ == "__main__":
    main()
