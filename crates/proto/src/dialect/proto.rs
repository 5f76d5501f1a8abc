//! Generated prost/tonic code, one module per dialect. The draft and v0.1.0 share the package
//! `csi`, so each dialect is compiled on its own and lives in its own module.
#![allow(clippy::all, missing_docs, rustdoc::all)]

macro_rules! dialect_module {
    ($module:ident, $file:literal) => {
        pub mod $module {
            include!(concat!(
                env!("OUT_DIR"),
                "/",
                stringify!($module),
                "/",
                $file
            ));
            include!(concat!(
                env!("OUT_DIR"),
                "/",
                stringify!($module),
                "/table.rs"
            ));
            /// The dialect's encoded `FileDescriptorSet`.
            pub const FILE_DESCRIPTOR_SET: &[u8] =
                include_bytes!(concat!(env!("OUT_DIR"), "/", stringify!($module), ".fds"));
        }
    };
}

dialect_module!(v0_1_oneof, "csi.rs");
dialect_module!(v0_1, "csi.rs");
dialect_module!(v0_3, "csi.v0.rs");
dialect_module!(v1, "csi.v1.rs");
