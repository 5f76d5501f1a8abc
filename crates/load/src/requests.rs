//! The v1 requests the lifecycle drivers (the crash loop, the cluster test) send alike.

use csi_gateway::hub::v1;

/// A single-node-writer mount capability.
pub fn mount_capability() -> v1::VolumeCapability {
    use v1::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

/// CreateVolume of a 1 MiB mount volume named `name`.
pub fn create_volume(name: &str) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: 1 << 20,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability()],
        ..Default::default()
    }
}
