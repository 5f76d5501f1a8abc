//! Staging emulation against a fake v1 plugin that records its calls: reference counting,
//! idempotent retries, and convergence from every state a crash can leave in the store.

use std::sync::{Arc, Mutex};

use super::*;
use crate::metrics::Origin;
use crate::store::embedded::Embedded;
use crate::store::Store;
use crate::translate::UnaryFuture;

/// A v1 plugin that answers every call OK (an empty message decodes as any v1 reply), or fails
/// the RPC named in `fail` (UNAVAILABLE, or `code`), and remembers the RPC names it was called
/// with.
#[derive(Default)]
struct Plugin {
    calls: Mutex<Vec<&'static str>>,
    fail: Mutex<Option<&'static str>>,
    code: Mutex<Option<tonic::Code>>,
}

impl RawUpstream for Plugin {
    fn unary<'a>(&'a self, path: &'static str, _body: Vec<u8>) -> UnaryFuture<'a> {
        let rpc = path.rsplit('/').next().unwrap();
        self.calls.lock().unwrap().push(rpc);
        let fail = *self.fail.lock().unwrap() == Some(rpc);
        let code = self
            .code
            .lock()
            .unwrap()
            .unwrap_or(tonic::Code::Unavailable);
        Box::pin(async move {
            if fail {
                Err(CallError::upstream(Status::new(code, "plugin says no")))
            } else {
                Ok(Vec::new())
            }
        })
    }
}

impl Plugin {
    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

struct Fixture {
    emulation: Emulation,
    plugin: Plugin,
    session: UpstreamSession,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let kv = Arc::new(Embedded::open(&dir.path().join("state.redb")).unwrap());
    let store = Arc::new(Store::new(kv, std::time::Duration::from_secs(5)));
    let emulation = Emulation::new(
        store,
        "node-1",
        dir.path().join("staging"),
        CrashPoint::default(),
    )
    .await
    .unwrap();
    let mut session = UpstreamSession::new(Dialect::V1, None);
    session.requires_staging = true;
    Fixture {
        emulation,
        plugin: Plugin::default(),
        session,
        _dir: dir,
    }
}

fn publish(target: &str) -> Req {
    Req::NodePublishVolume(v1::NodePublishVolumeRequest {
        volume_id: "vol".into(),
        target_path: target.into(),
        volume_capability: Some(Default::default()),
        ..Default::default()
    })
}

fn unpublish(target: &str) -> Req {
    Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
        volume_id: "vol".into(),
        target_path: target.into(),
    })
}

impl Fixture {
    async fn call(&self, front: Dialect, req: Req) -> Result<Resp, CallError> {
        let pipeline = crate::call::Pipeline {
            side: crate::call::paths::Side::Local,
            emulation: Some(&self.emulation),
            front,
            session: &self.session,
            upstream: &self.plugin,
            store: None,
        };
        pipeline.staged(req).await
    }

    async fn record(&self) -> Option<Record> {
        self.emulation.records.load("vol").await.unwrap()
    }
}

#[tokio::test]
async fn stages_once_counts_targets_and_unstages_after_the_last() {
    let f = fixture().await;
    f.call(Dialect::V0_1, publish("/t/1")).await.unwrap();
    assert_eq!(f.plugin.take(), ["NodeStageVolume", "NodePublishVolume"]);
    f.call(Dialect::V0_1, publish("/t/2")).await.unwrap();
    assert_eq!(f.plugin.take(), ["NodePublishVolume"], "staged once");
    // A retried publish of a target already counted is not counted twice.
    f.call(Dialect::V0_1, publish("/t/1")).await.unwrap();
    assert_eq!(f.plugin.take(), ["NodePublishVolume"]);
    assert_eq!(f.emulation.references(), 2);
    f.call(Dialect::V0_1, unpublish("/t/1")).await.unwrap();
    assert_eq!(f.plugin.take(), ["NodeUnpublishVolume"], "still one target");
    assert_eq!(f.emulation.references(), 1);
    f.call(Dialect::V0_1, unpublish("/t/2")).await.unwrap();
    assert_eq!(
        f.plugin.take(),
        ["NodeUnpublishVolume", "NodeUnstageVolume"]
    );
    assert_eq!(f.record().await, None);
    assert_eq!(f.emulation.references(), 0);
    // A retried last unpublish after the record is gone is an ordinary unpublish.
    f.call(Dialect::V0_1, unpublish("/t/2")).await.unwrap();
    assert_eq!(f.plugin.take(), ["NodeUnpublishVolume"]);
}

#[tokio::test]
async fn clients_that_know_staging_are_not_emulated() {
    let f = fixture().await;
    let e = f.call(Dialect::V1, publish("/t/1")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(f.plugin.take().is_empty());
    assert_eq!(f.record().await, None);
}

#[tokio::test]
async fn a_failed_stage_keeps_the_target_so_a_retry_or_unpublish_converges() {
    let f = fixture().await;
    *f.plugin.fail.lock().unwrap() = Some("NodeStageVolume");
    let e = f.call(Dialect::V0_1, publish("/t/1")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable);
    let rec = f.record().await.expect("written before the stage");
    assert!(!rec.staged && rec.targets.contains("/t/1"), "{rec:?}");
    *f.plugin.fail.lock().unwrap() = None;
    f.plugin.take();
    // The client gives up: its unpublish unstages whatever the failed stage left.
    f.call(Dialect::V0_1, unpublish("/t/1")).await.unwrap();
    assert_eq!(
        f.plugin.take(),
        ["NodeUnpublishVolume", "NodeUnstageVolume"]
    );
    assert_eq!(f.record().await, None);
}

/// A publish missing what CSI requires is the client's to fix, found before the plugin is
/// called; the plugin's refusal of the stage stays its own.
#[tokio::test]
async fn failures_say_whose_they_are() {
    let f = fixture().await;
    let e = f.call(Dialect::V0_1, publish("")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.origin),
        (tonic::Code::InvalidArgument, Origin::Client)
    );
    assert!(f.plugin.take().is_empty());
    *f.plugin.fail.lock().unwrap() = Some("NodeStageVolume");
    *f.plugin.code.lock().unwrap() = Some(tonic::Code::NotFound);
    let e = f.call(Dialect::V0_1, publish("/t/1")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.origin),
        (tonic::Code::NotFound, Origin::Upstream)
    );
}

/// The records a crash can leave, and what the client's retry then does.
#[tokio::test]
async fn every_crash_state_converges_on_retry() {
    let cases: &[(&[&str], bool, Req, &[&str])] = &[
        // Crashed after recording the target, before (or during) the stage: stage again.
        (
            &["/t/1"],
            false,
            publish("/t/1"),
            &["NodeStageVolume", "NodePublishVolume"],
        ),
        // Crashed after the stage was recorded: publish only.
        (&["/t/1"], true, publish("/t/1"), &["NodePublishVolume"]),
        // Crashed after the plugin unpublished, before the target left the record.
        (
            &["/t/1"],
            true,
            unpublish("/t/1"),
            &["NodeUnpublishVolume", "NodeUnstageVolume"],
        ),
        // Crashed with no target left (before or after the unstage): unstage (again).
        (
            &[],
            false,
            unpublish("/t/1"),
            &["NodeUnpublishVolume", "NodeUnstageVolume"],
        ),
        // ...and a new publish in that state stages again rather than trusting the old stage.
        (
            &[],
            false,
            publish("/t/9"),
            &["NodeStageVolume", "NodePublishVolume"],
        ),
    ];
    for (targets, staged, retry, expected) in cases {
        let f = fixture().await;
        let rec = Record {
            staging_path: staging_path(&f.emulation.dir, "vol")
                .unwrap()
                .display()
                .to_string(),
            staged: *staged,
            targets: targets.iter().map(|t| t.to_string()).collect(),
        };
        f.emulation
            .records
            .save("vol", &rec, targets.len() as i64)
            .await
            .unwrap();
        f.call(Dialect::V0_1Oneof, retry.clone()).await.unwrap();
        assert_eq!(
            f.plugin.take(),
            *expected,
            "from {rec:?} retrying {retry:?}"
        );
    }
}

#[tokio::test]
async fn a_publish_missing_what_csi_requires_records_nothing() {
    let f = fixture().await;
    let Req::NodePublishVolume(mut r) = publish("/t/1") else {
        unreachable!()
    };
    r.volume_capability = None;
    let e = f
        .call(Dialect::V0_1, Req::NodePublishVolume(r))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    let e = f.call(Dialect::V0_1, publish("")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(f.plugin.take().is_empty());
    assert_eq!(f.record().await, None);
    assert!(!f.emulation.dir.exists(), "no staging directory either");
}

#[tokio::test]
async fn a_stage_or_publish_the_plugin_refuses_is_taken_back() {
    // NOT_FOUND at the stage: record and directory go.
    let f = fixture().await;
    *f.plugin.fail.lock().unwrap() = Some("NodeStageVolume");
    *f.plugin.code.lock().unwrap() = Some(tonic::Code::NotFound);
    let e = f.call(Dialect::V0_1, publish("/t/1")).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound);
    assert_eq!(f.record().await, None);
    assert_eq!(f.emulation.references(), 0);
    assert!(!staging_path(&f.emulation.dir, "vol").unwrap().exists());

    // INVALID_ARGUMENT at the publish of the only target: unstaged, record gone.
    let f = fixture().await;
    *f.plugin.fail.lock().unwrap() = Some("NodePublishVolume");
    *f.plugin.code.lock().unwrap() = Some(tonic::Code::InvalidArgument);
    f.call(Dialect::V0_1, publish("/t/1")).await.unwrap_err();
    assert_eq!(
        f.plugin.take(),
        ["NodeStageVolume", "NodePublishVolume", "NodeUnstageVolume"]
    );
    assert_eq!(f.record().await, None);
    assert_eq!(f.emulation.references(), 0);

    // Refused beside a published target: only the refused target leaves.
    *f.plugin.fail.lock().unwrap() = None;
    f.call(Dialect::V0_1, publish("/t/1")).await.unwrap();
    *f.plugin.fail.lock().unwrap() = Some("NodePublishVolume");
    f.call(Dialect::V0_1, publish("/t/2")).await.unwrap_err();
    let rec = f.record().await.unwrap();
    assert!(
        rec.staged && rec.targets.len() == 1 && rec.targets.contains("/t/1"),
        "{rec:?}"
    );
    assert_eq!(f.emulation.references(), 1);
}
