"""One unary gRPC call made by gRPC C-core (Python `grpcio`), for tests/interop.rs.

Usage: grpcio_call.py TARGET METHOD REQUEST_HEX [AUTHORITY]

TARGET is a gRPC target such as `unix:/path/csi.sock` or `unix:///path/csi.sock`. AUTHORITY,
when given, overrides the `:authority` C-core would send (`grpc.default_authority`); without it,
C-core sends its own default for the target. The request and reply are raw protobuf bytes
(hex), so no generated code is needed: the Rust test encodes and decodes them. Prints one JSON
line: {"ok": true, "reply": HEX} or {"ok": false, "code": NAME, "details": TEXT}.
"""

import json
import sys

import grpc


def main() -> None:
    target, method, request_hex = sys.argv[1:4]
    options = []
    if len(sys.argv) > 4:
        options.append(("grpc.default_authority", sys.argv[4]))
    with grpc.insecure_channel(target, options=options) as channel:
        call = channel.unary_unary(method)  # bytes in, bytes out
        try:
            reply = call(bytes.fromhex(request_hex), timeout=30)
        except grpc.RpcError as e:
            print(json.dumps({"ok": False, "code": e.code().name, "details": e.details()}))
            return
    print(json.dumps({"ok": True, "reply": reply.hex()}))


if __name__ == "__main__":
    main()
