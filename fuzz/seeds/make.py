# Writes the seed inputs of the fuzz targets: whole calls on a connection after the preface
# (fuzz/seeds/connection/*.bin), header blocks and frames (the wire crate's targets,
# crates/wire/fuzz/seeds/TARGET/*.bin). Needs the `hpack` package (PyPI); run from fuzz/seeds/
# (`python3 make.py`); its outputs are committed.
import struct, hpack, os
def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload
SETTINGS, HEADERS, DATA, RST, PING, GOAWAY, WU, CONT = 4, 1, 0, 3, 6, 7, 8, 9
def call(enc, stream, path, body=b""):
    block = enc.encode([(":method","POST"),(":scheme","http"),(":path",path),(":authority","localhost"),
                        ("content-type","application/grpc"),("te","trailers")])
    msg = b"\x00" + struct.pack(">I", len(body)) + body
    return frame(HEADERS, 4, stream, block) + frame(DATA, 1, stream, msg), block
seeds = {}
enc = hpack.Encoder()
settings = frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100) + struct.pack(">HI", 4, 1<<20))
c1, b1 = call(enc, 1, "/csi.v1.Identity/Probe")
c3, b3 = call(enc, 3, "/csi.v0.Identity/Probe")
c5, b5 = call(enc, 5, "/csi.v0.Node/NodeGetCapabilities")
c7, b7 = call(enc, 7, "/csi.Identity/GetSupportedVersions")
seeds["connection/probe_v1"] = settings + c1
seeds["connection/translated"] = settings + c1 + c3 + c5 + c7
seeds["connection/reset"] = settings + c1 + frame(RST, 0, 1, struct.pack(">I", 8))
seeds["connection/ping_goaway"] = settings + frame(PING, 0, 0, b"12345678") + c1 + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0))
# header block split over CONTINUATION
blk = hpack.Encoder().encode([(":method","POST"),(":scheme","http"),(":path","/csi.v1.Node/NodeGetInfo"),(":authority","/run/csi/csi.sock"),("content-type","application/grpc"),("te","trailers")])
seeds["connection/continuation"] = settings + frame(HEADERS, 0, 1, blk[:5]) + frame(CONT, 4, 1, blk[5:]) + frame(DATA, 1, 1, b"\x00\x00\x00\x00\x00")
seeds["connection/window"] = settings + frame(WU, 0, 0, struct.pack(">I", 1<<20)) + c1
e = hpack.Encoder(); e.header_table_size = 0
seeds["connection/table_size_0"] = settings + call(e, 1, "/csi.v1.Identity/Probe")[0]
# hpack target: first byte splits the data into two blocks
seeds["hpack/two_blocks"] = bytes([len(b1)]) + b1 + b3
seeds["hpack/one_block"] = bytes([0]) + b5
seeds["hpack/size_updates"] = bytes([0]) + b"\x20\x3f\xe1\x1f" + b7
seeds["frames/settings"] = settings
seeds["frames/headers_data"] = c1
seeds["frames/padded"] = frame(DATA, 0x8, 1, b"\x03abc\x00\x00\x00")
WIRE = "../../crates/wire/fuzz/seeds/"
for name, data in seeds.items():
    where = name if name.startswith("connection/") else WIRE + name
    with open(where + ".bin", "wb") as f:
        f.write(data)
print(len(seeds), "seeds")
