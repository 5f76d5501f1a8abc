//! The gateway's own services (health, reflection) on the appliance listener are under the same
//! per-peer rules as the CSI services: a peer whose `[[appliance.peers]]` rule lists services
//! gets them only where the list names `Health` or `ServerReflection`, and PERMISSION_DENIED
//! otherwise; a rule without a list allows everything. The clients are tonic's generated health
//! and reflection clients over mutual TLS to the appliance gateway's TCP port.

use csi_gateway_test_support::bridge as bridge_support;

use std::sync::Arc;

use bridge_support::*;
use csi_gateway::tls::gencerts::Leaf;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::{v1, v1alpha};

/// Identity and Node, nothing of the gateway's own.
const NODE: &str = "node.csi-gateway.test";
/// Identity and the gateway's services.
const OPS: &str = "ops.csi-gateway.test";
/// A rule without `services`: everything.
const ADMIN: &str = "admin.csi-gateway.test";

/// A tonic channel over mutual TLS to the appliance on `port`, as the peer `config` presents.
async fn tls_channel(port: u16, config: rustls::ClientConfig) -> Channel {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let connector = connector.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
                let tls = connector
                    .connect(ServerName::try_from("localhost").unwrap(), tcp)
                    .await?;
                Ok::<_, std::io::Error>(TokioIo::new(tls))
            }
        }))
        .await
        .expect("TLS connection to the appliance")
}

/// Health/Check, Health/Watch's first reply, and a v1 and a v1alpha reflection listing: the
/// code of each (OK when it answered).
async fn gateway_services(channel: &Channel) -> [(&'static str, Code); 4] {
    let mut health = HealthClient::new(channel.clone());
    let ask = || HealthCheckRequest {
        service: String::new(),
    };
    let check = match health.check(ask()).await {
        Ok(r) => {
            assert_eq!(r.into_inner().status, ServingStatus::Serving as i32);
            Code::Ok
        }
        Err(s) => s.code(),
    };
    let watch = match health.watch(ask()).await {
        Ok(r) => match r.into_inner().message().await {
            Ok(Some(m)) => {
                assert_eq!(m.status, ServingStatus::Serving as i32);
                Code::Ok
            }
            Ok(None) => Code::Unknown,
            Err(s) => s.code(),
        },
        Err(s) => s.code(),
    };
    let list = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let reflection_v1 =
        match v1::server_reflection_client::ServerReflectionClient::new(channel.clone())
            .server_reflection_info(futures_util::stream::iter([list]))
            .await
        {
            Ok(r) => match r.into_inner().message().await {
                Ok(Some(m)) => {
                    let Some(
                        v1::server_reflection_response::MessageResponse::ListServicesResponse(l),
                    ) = m.message_response
                    else {
                        panic!("{m:?}");
                    };
                    assert!(
                        l.service.iter().any(|s| s.name == "csi.v1.Identity"),
                        "{l:?}"
                    );
                    Code::Ok
                }
                Ok(None) => Code::Unknown,
                Err(s) => s.code(),
            },
            Err(s) => s.code(),
        };
    let list = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let reflection_v1alpha =
        match v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone())
            .server_reflection_info(futures_util::stream::iter([list]))
            .await
        {
            Ok(r) => match r.into_inner().message().await {
                Ok(Some(_)) => Code::Ok,
                Ok(None) => Code::Unknown,
                Err(s) => s.code(),
            },
            Err(s) => s.code(),
        };
    [
        ("Health/Check", check),
        ("Health/Watch", watch),
        ("reflection v1", reflection_v1),
        ("reflection v1alpha", reflection_v1alpha),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_services_on_the_appliance_follow_the_peer_rules() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rules = format!(
        "[[appliance.peers]]\ndns = [\"{NODE}\"]\nservices = [\"Identity\", \"Node\"]\n\
         [[appliance.peers]]\ndns = [\"{OPS}\"]\nservices = [\"Identity\", \"Health\", \"ServerReflection\"]\n\
         [[appliance.peers]]\ndns = [\"{ADMIN}\"]\n"
    );
    let appliance = appliance(d, "trusted", "a.sock", &rules);
    let (pki, port) = (&appliance.pki, appliance.port);
    let appliance = &appliance.gateway;
    let roots = &pki.ca.cert_pem;
    let peer = |name: &str| {
        let issued = pki.ca.issue(&Leaf::client(&[name], &[])).unwrap();
        client_config(roots, Some(&issued))
    };

    let node = tls_channel(port, peer(NODE)).await;
    for (what, code) in gateway_services(&node).await {
        assert_eq!(code, Code::PermissionDenied, "{NODE}: {what}");
    }
    // The node peer is in: its own services still answer.
    let probe = tls_probe(port, peer(NODE)).await;
    assert_eq!(probe, Ok(()), "{NODE}: Probe");
    let refused = HealthClient::new(node)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap_err();
    assert!(
        refused.message().contains("Health") && refused.message().contains(NODE),
        "{refused:?}"
    );
    appliance.wait_log("call refused: service not allowed for this peer");

    for name in [OPS, ADMIN] {
        let channel = tls_channel(port, peer(name)).await;
        for (what, code) in gateway_services(&channel).await {
            assert_eq!(code, Code::Ok, "{name}: {what}");
        }
    }
}
