//! Many translated calls at once: 400 concurrent v1 calls whose requests the gateway translates
//! for a v0.3 plugin (ValidateVolumeCapabilities and DeleteVolume with secrets, decoded; Probe,
//! wire-identical, relayed), on one client connection, spliced and unattached (no upstream
//! connection of its own: its calls go on the gateway's shared one). Calls the gateway makes
//! itself share one upstream connection driven by one task, so that 400 replies can arrive
//! before their calls read them: the gateway's h2 client once counted each reply's small DATA frame against its budget (`too_many_data_frames`, 32
//! KiB at HTTP/2's default window) and ended the connection itself, with every call on it. Every
//! call must succeed, and the upstream connection must not be lost.

use csi_gateway_test_support as support;

use std::collections::HashMap;

use csi_gateway::dialect::proto::v1;
use support::gateway::{FrontPath, Gateway};
use support::{scrape, value, Backend, Options};
use tonic::transport::Channel;

const CALLS: usize = 400;

/// One translated call, by `n % 3`: ValidateVolumeCapabilities of `volume`; DeleteVolume of a
/// volume that does not exist (OK: already gone), with secrets (both decoded and translated);
/// Probe (wire-identical: relayed, its path rewritten to `csi.v0`).
async fn translated_call(channel: Channel, volume: String, n: usize) -> Result<(), tonic::Status> {
    match n % 3 {
        0 => {
            let reply = v1::controller_client::ControllerClient::new(channel)
                .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
                    volume_id: volume,
                    volume_capabilities: vec![support::front::cap_v1()],
                    ..Default::default()
                })
                .await?;
            assert!(reply.into_inner().confirmed.is_some(), "call {n} confirmed");
        }
        1 => {
            let secrets: HashMap<String, String> =
                [("password".to_string(), format!("secret-{n}"))].into();
            v1::controller_client::ControllerClient::new(channel)
                .delete_volume(v1::DeleteVolumeRequest {
                    volume_id: format!("gone-{n}"),
                    secrets,
                })
                .await?;
        }
        _ => {
            v1::identity_client::IdentityClient::new(channel)
                .probe(v1::ProbeRequest {})
                .await?;
        }
    }
    Ok(())
}

/// With the plugin's HTTP/2 windows at tonic's defaults (1 MiB), and adaptive (from 64 KiB,
/// which gives h2 a budget of 32 KiB of small-DATA-frame overhead: some 190 unread request
/// frames of a few dozen bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_hundred_concurrent_translated_calls_all_succeed() {
    let windows = [
        ("default", vec![]),
        ("adaptive", vec!["--http2-adaptive-window"]),
    ];
    for (window, flags) in windows {
        let mut options = Options::new("v0.3").arg("--require-staging=false");
        for flag in flags {
            options = options.arg(flag);
        }
        let backend = Backend::start(options).await;
        many_translated_calls(&backend, window, Mix::Translated).await;
    }
}

/// Which calls: the three kinds in turn, or Probes only (relayed, each request a 5-byte DATA
/// frame that hyper's client does not end the stream with).
#[derive(Clone, Copy, Debug)]
enum Mix {
    Translated,
    Probes,
}

impl Mix {
    /// The `n` of [`translated_call`] for the `n`th call.
    fn call(self, n: usize) -> usize {
        match self {
            Mix::Translated => n,
            Mix::Probes => 2,
        }
    }
}

/// 400 relayed Probes at once on one connection, to a plugin whose h2 budget for small DATA
/// frames is 32 KiB (adaptive window): each request a 5-byte DATA frame, then an empty one
/// ending the stream, from hyper's client. A direct client trips the plugin's budget, and so
/// does the splice, which relays those frames as they are; an unattached connection must not (the
/// gateway's call sends the request's data with the end of the stream when both have come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_hundred_concurrent_relayed_probes_to_a_plugin_with_a_small_window() {
    let backend = Backend::start(
        Options::new("v0.3")
            .arg("--require-staging=false")
            .arg("--http2-adaptive-window"),
    )
    .await;
    many_translated_calls(&backend, "adaptive", Mix::Probes).await;
}

/// The control: the same calls in the plugin's own dialect, straight to it (the frames a v0.3
/// client sends it itself); how many failed.
async fn direct_calls(backend: &Backend, window: &str, mix: Mix) -> usize {
    use csi_gateway::dialect::proto::v0_3;
    let channel = support::connect(&backend.socket).await;
    let volume = v0_3::controller_client::ControllerClient::new(channel.clone())
        .create_volume(v0_3::CreateVolumeRequest {
            name: "pvc-many-direct".into(),
            volume_capabilities: vec![support::front::cap_v03()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .id;
    let calls: Vec<_> = (0..CALLS)
        .map(|n| {
            let (channel, volume) = (channel.clone(), volume.clone());
            tokio::spawn(async move {
                let mut client = v0_3::controller_client::ControllerClient::new(channel.clone());
                match mix.call(n) % 3 {
                    0 => client
                        .validate_volume_capabilities(v0_3::ValidateVolumeCapabilitiesRequest {
                            volume_id: volume,
                            volume_capabilities: vec![support::front::cap_v03()],
                            ..Default::default()
                        })
                        .await
                        .map(drop),
                    1 => client
                        .delete_volume(v0_3::DeleteVolumeRequest {
                            volume_id: format!("gone-{n}"),
                            controller_delete_secrets: [("password".into(), format!("s-{n}"))]
                                .into(),
                        })
                        .await
                        .map(drop),
                    _ => v0_3::identity_client::IdentityClient::new(channel)
                        .probe(v0_3::ProbeRequest {})
                        .await
                        .map(drop),
                }
            })
        })
        .collect();
    let mut failed = 0;
    for call in calls {
        failed += call.await.unwrap().is_err() as usize;
    }
    println!(
        "{mix:?}, plugin window {window}, direct (v0.3 client, no gateway): {CALLS} concurrent calls on 1 connection: {failed} failed"
    );
    failed
}

/// The calls through a spliced and an unattached connection to a gateway in front of
/// `backend`. All must succeed where the control (the same calls straight to the plugin) did;
/// where the plugin refused even those, the spliced path, which relays the client's frames as
/// they come, gets what a direct client gets (printed, not asserted), and the unattached one,
/// whose calls the gateway frames itself, must still succeed.
async fn many_translated_calls(backend: &Backend, window: &str, mix: Mix) {
    let direct = direct_calls(backend, window, mix).await;
    for path in FrontPath::BOTH {
        let asserted = direct == 0 || path == FrontPath::Unattached;
        let (gw, port) = Gateway::start_with_metrics(&backend.socket, "v0.1", path).await;
        // One client connection: unattached, its calls share the gateway's upstream connection.
        let channel = gw.channel().await;
        let volume = v1::controller_client::ControllerClient::new(channel.clone())
            .create_volume(v1::CreateVolumeRequest {
                name: format!("pvc-many-{path:?}"),
                volume_capabilities: vec![support::front::cap_v1()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap()
            .volume_id;
        let reconnects =
            || value(&scrape(port), "csi_gateway_upstream_reconnects_total").unwrap_or_default();
        let before = reconnects();

        let calls: Vec<_> = (0..CALLS)
            .map(|n| {
                tokio::spawn(translated_call(
                    channel.clone(),
                    volume.clone(),
                    mix.call(n),
                ))
            })
            .collect();
        let mut failed = Vec::new();
        for call in calls {
            if let Err(s) = call.await.unwrap() {
                failed.push(format!("{:?}: {}", s.code(), s.message()));
            }
        }
        let log = gw.log_text();
        let lost = log.matches("upstream connection lost").count();
        let too_many: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("too_many_data_frames"))
            .collect();
        let reconnected = reconnects() - before;
        println!(
            "{mix:?}, plugin window {window}, {path:?}: {CALLS} concurrent calls on 1 connection: {} failed, upstream reconnects {reconnected}, 'upstream connection lost' {lost}, log lines naming too_many_data_frames {}",
            failed.len(),
            too_many.len()
        );
        if !asserted {
            continue;
        }
        assert!(
            failed.is_empty(),
            "plugin window {window}, {path:?}: {} of {CALLS} failed, e.g. {:?}\n{}",
            failed.len(),
            &failed[..failed.len().min(3)],
            too_many.first().unwrap_or(&"")
        );
        assert_eq!(reconnected, 0.0, "{path:?}: upstream reconnected");
        assert_eq!(lost, 0, "{path:?}: upstream connection lost");
        assert!(too_many.is_empty(), "{path:?}: {too_many:?}");
    }
}
