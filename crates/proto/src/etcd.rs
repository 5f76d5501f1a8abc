//! etcd's v3 KV API, the subset `proto-etcd/` holds: client stubs and messages for the
//! gateway's etcd state store (the gateway never serves etcd).
#![allow(clippy::all, missing_docs, rustdoc::all)]

pub mod mvccpb {
    include!(concat!(env!("OUT_DIR"), "/etcd/mvccpb.rs"));
}
pub mod etcdserverpb {
    include!(concat!(env!("OUT_DIR"), "/etcd/etcdserverpb.rs"));
}
