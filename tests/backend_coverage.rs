//! Every RPC of each dialect's method table (generated from its proto) is served by the
//! reference backend in that dialect: an empty request on every unary path gets an answer
//! other than UNIMPLEMENTED. The only exceptions are listed, so a missing handler cannot hide.

use csi_gateway_test_support as support;

use bytes::{Buf, BufMut};
use csi_gateway::dialect::Dialect;
use support::{Backend, Options};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::{Code, Status};

/// Passes encoded messages through untouched (an empty body is the all-defaults message).
#[derive(Clone, Copy, Default)]
struct Raw;

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

/// Paths each dialect deliberately does not serve.
fn not_served(d: Dialect) -> &'static [&'static str] {
    match d {
        // Group snapshots and the snapshot-metadata service are outside this plugin's scope.
        Dialect::V1 => &[
            "/csi.v1.GroupController/GroupControllerGetCapabilities",
            "/csi.v1.GroupController/CreateVolumeGroupSnapshot",
            "/csi.v1.GroupController/DeleteVolumeGroupSnapshot",
            "/csi.v1.GroupController/GetVolumeGroupSnapshot",
            "/csi.v1.SnapshotMetadata/GetMetadataAllocated",
            "/csi.v1.SnapshotMetadata/GetMetadataDelta",
        ],
        _ => &[],
    }
}

#[tokio::test]
async fn every_rpc_of_every_dialect_is_served() {
    for dialect in Dialect::ALL {
        // Alpha RPCs are served behind their flags; with them, every RPC is.
        let b = Backend::start(Options::new(dialect.name()).arg("--alpha-get-snapshot")).await;
        let mut grpc = tonic::client::Grpc::new(b.channel().await);
        let mut unserved = Vec::new();
        for m in dialect.methods() {
            if m.server_streaming {
                unserved.push(m.path);
                continue;
            }
            grpc.ready().await.unwrap();
            let res = grpc
                .unary(
                    tonic::Request::new(Vec::new()),
                    PathAndQuery::from_static(m.path),
                    Raw,
                )
                .await;
            match res {
                Err(s) if s.code() == Code::Unimplemented => unserved.push(m.path),
                Err(s) => assert_ne!(s.code(), Code::Unknown, "{}: {s:?}", m.path),
                Ok(_) => {}
            }
        }
        let mut want = not_served(dialect).to_vec();
        want.sort_unstable();
        unserved.sort_unstable();
        assert_eq!(unserved, want, "{dialect}: RPCs answered UNIMPLEMENTED");
        assert!(
            dialect.methods().len() > want.len() + 8,
            "{dialect}: the table is complete"
        );
    }
}
