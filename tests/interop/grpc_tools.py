"""A generic gRPC client that knows no CSI proto: what grpcurl does, with Python's gRPC C-core,
`grpcio-reflection` and `grpcio-health-checking`. Driven by tests/gateway_reflection.rs.

Usage:
  grpc_tools.py TARGET list                          services, by v1alpha and by v1 reflection
  grpc_tools.py TARGET call SERVICE METHOD JSON      the request built from reflected descriptors
  grpc_tools.py TARGET stream [v1|v1alpha]           several requests on one open reflection
                                                     stream, each answered before the next is
                                                     sent (grpcurl's way of using reflection)
  grpc_tools.py TARGET check SERVICE                 grpc.health.v1.Health/Check
  grpc_tools.py TARGET watch SERVICE                 the first status of Health/Watch

Prints one JSON line. TARGET is e.g. `unix:///path/csi.sock`.
"""

import json
import queue
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

TIMEOUT = 30

V1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
V1ALPHA = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"


def reflection_stream(channel, path):
    # grpc.reflection.v1 and v1alpha have the same messages, field for field: v1alpha's
    # generated classes encode and decode both.
    return channel.stream_stream(
        path,
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )


def list_services(channel):
    db = ProtoReflectionDescriptorDatabase(channel)  # v1alpha
    v1alpha = sorted(db.get_services())
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    reply = next(reflection_stream(channel, V1)(iter([request]), timeout=TIMEOUT))
    v1 = sorted(s.name for s in reply.list_services_response.service)
    return {"ok": True, "v1alpha": v1alpha, "v1": v1}


def call(channel, service, method, request_json):
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    desc = pool.FindServiceByName(service).FindMethodByName(method)
    request_class = message_factory.GetMessageClass(desc.input_type)
    reply_class = message_factory.GetMessageClass(desc.output_type)
    request = json_format.Parse(request_json, request_class())
    rpc = channel.unary_unary(
        f"/{service}/{method}",
        request_serializer=request_class.SerializeToString,
        response_deserializer=reply_class.FromString,
    )
    try:
        reply = rpc(request, timeout=TIMEOUT)
    except grpc.RpcError as e:
        return {"ok": False, "code": e.code().name, "details": e.details()}
    return {
        "ok": True,
        "request_type": desc.input_type.full_name,
        "reply": json_format.MessageToDict(reply),
    }


def stream(channel, version="v1"):
    """One reflection stream (v1 or v1alpha): list the services, then ask for the file of each,
    one at a time; a request is sent only once the answer to the one before has come (the
    iterator gRPC reads requests from blocks until then)."""
    requests = queue.Queue()
    path = {"v1": V1, "v1alpha": V1ALPHA}[version]
    replies = reflection_stream(channel, path)(iter(requests.get, None), timeout=TIMEOUT)

    def ask(request):
        requests.put(request)
        reply = next(replies)
        if reply.original_request != request:
            sys.exit(f"the reply answers {reply.original_request}, not {request}")
        return reply

    names = [
        s.name
        for s in ask(reflection_pb2.ServerReflectionRequest(list_services="")).list_services_response.service
    ]
    files = {}
    for name in names:
        reply = ask(reflection_pb2.ServerReflectionRequest(file_containing_symbol=name))
        files[name] = len(reply.file_descriptor_response.file_descriptor_proto)
    requests.put(None)
    rest = list(replies)  # the server ends the stream once the client's half ended
    return {"ok": True, "requests": 1 + len(names), "files": files, "after_half_close": len(rest)}


def check(channel, service):
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
    except grpc.RpcError as e:
        return {"ok": False, "code": e.code().name, "details": e.details()}
    return {"ok": True, "status": health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}


def watch(channel, service):
    stub = health_pb2_grpc.HealthStub(channel)
    replies = stub.Watch(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
    first = next(replies)
    replies.cancel()
    return {"ok": True, "status": health_pb2.HealthCheckResponse.ServingStatus.Name(first.status)}


def main():
    target, command, *args = sys.argv[1:]
    with grpc.insecure_channel(target) as channel:
        if command == "list":
            out = list_services(channel)
        elif command == "call":
            out = call(channel, *args)
        elif command == "stream":
            out = stream(channel, *args)
        elif command == "check":
            out = check(channel, *args)
        elif command == "watch":
            out = watch(channel, *args)
        else:
            sys.exit(f"unknown command {command}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
