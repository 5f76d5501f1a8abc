//! Placeholder: this dialect is not served yet.

use std::sync::Arc;

use crate::backend::engine::Engine;

pub fn routes(_engine: Arc<Engine>, _driver_name: String) -> tonic::service::Routes {
    tonic::service::Routes::default()
}
