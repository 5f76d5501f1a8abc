//! Pure decision rules (sizes, parameters, topology, compatibility), kept apart from I/O so
//! they are unit-tested in a table.

use std::collections::BTreeMap;

use super::error::{EngineError, Result};
use super::model::{Capability, Kind, Segment};

/// Size of a volume whose request names no capacity.
pub const DEFAULT_CAPACITY: u64 = 1 << 30;

/// Parameter keys the CO's sidecars add (e.g. external-provisioner's
/// `--extra-create-metadata`); accepted and ignored.
const CO_PREFIX: &str = "csi.storage.k8s.io/";

/// Parameters that may be set at creation and changed later with ControllerModifyVolume.
pub const MUTABLE: &[&str] = &["iops", "tier"];

/// Validates one parameter map; `field` names it in the error (`parameters`,
/// `mutable_parameters`). `allowed` lists the accepted keys besides the CO's own prefix.
pub fn check_parameters(
    field: &str,
    params: &BTreeMap<String, String>,
    allowed: &[&str],
) -> Result<()> {
    for (key, value) in params {
        if key.starts_with(CO_PREFIX) {
            continue;
        }
        if !allowed.contains(&key.as_str()) {
            return Err(EngineError::invalid(
                format!("{field}[{key:?}]"),
                format!("unknown parameter (this plugin accepts {allowed:?})"),
            ));
        }
        let ok = match key.as_str() {
            "iops" => value.parse::<u32>().is_ok_and(|n| n > 0),
            "tier" => matches!(value.as_str(), "standard" | "fast"),
            _ => true,
        };
        if !ok {
            return Err(EngineError::invalid(
                format!("{field}[{key:?}]"),
                format!(
                    "invalid value {value:?} (iops: a positive integer; tier: standard or fast)"
                ),
            ));
        }
    }
    Ok(())
}

/// Chooses the size of a new volume from a capacity range (0 = unset), the minimum its content
/// source needs, and the pool size. OUT_OF_RANGE for what no pool state could satisfy.
pub fn choose_capacity(required: u64, limit: u64, minimum: u64, pool: u64) -> Result<u64> {
    if limit != 0 && required > limit {
        return Err(EngineError::invalid(
            "capacity_range",
            format!("required_bytes {required} exceeds limit_bytes {limit}"),
        ));
    }
    let wanted = match (required, limit) {
        (0, 0) => DEFAULT_CAPACITY,
        (0, l) => l.min(DEFAULT_CAPACITY),
        (r, _) => r,
    };
    let size = wanted.max(minimum);
    if limit != 0 && size > limit {
        return Err(EngineError::OutOfRange(format!(
            "capacity_range: the content source needs {minimum} bytes, more than limit_bytes {limit}"
        )));
    }
    if size > pool {
        return Err(EngineError::OutOfRange(format!(
            "capacity_range: {size} bytes exceeds the whole pool ({pool} bytes)"
        )));
    }
    Ok(size)
}

/// Whether `capacity` lies in the range (0 = unset bound).
pub fn in_range(capacity: u64, required: u64, limit: u64) -> bool {
    capacity >= required && (limit == 0 || capacity <= limit)
}

pub fn segment_matches(node: &Segment, wanted: &Segment) -> bool {
    wanted.iter().all(|(k, v)| node.get(k) == Some(v))
}

/// All capabilities of one request must agree on the access type; returns it.
pub fn single_kind(field: &str, caps: &[Capability]) -> Result<Kind> {
    let first = caps
        .first()
        .ok_or_else(|| EngineError::invalid(field, "at least one capability is required"))?;
    if caps.iter().any(|c| c.kind != first.kind) {
        return Err(EngineError::invalid(
            field,
            "mixes block and mount access types",
        ));
    }
    Ok(first.kind)
}

/// Whether a volume of `kind` can serve `cap`. Mount volumes are directories, so any filesystem
/// type is accepted except ones that imply formatting a device we do not have.
pub fn supports(kind: Kind, cap: &Capability) -> bool {
    cap.kind == kind
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_table() {
        let gi = 1u64 << 30;
        let pool = 10 * gi;
        // (required, limit, minimum) -> Some(size) or None (error)
        type Case = ((u64, u64, u64), Option<u64>);
        let cases: &[Case] = &[
            ((0, 0, 0), Some(DEFAULT_CAPACITY)),
            ((0, gi / 2, 0), Some(gi / 2)),
            ((2 * gi, 0, 0), Some(2 * gi)),
            ((2 * gi, 3 * gi, 0), Some(2 * gi)),
            ((3 * gi, 2 * gi, 0), None),
            ((gi, 0, 2 * gi), Some(2 * gi)),
            ((gi, gi, 2 * gi), None),
            ((11 * gi, 0, 0), None),
        ];
        for ((r, l, m), want) in cases {
            assert_eq!(choose_capacity(*r, *l, *m, pool).ok(), *want, "{r} {l} {m}");
        }
        assert!(matches!(
            choose_capacity(11 * gi, 0, 0, pool),
            Err(EngineError::OutOfRange(_))
        ));
        assert!(matches!(
            choose_capacity(3, 2, 0, pool),
            Err(EngineError::InvalidArgument { .. })
        ));
    }

    #[test]
    fn parameters_table() {
        let p = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(check_parameters("parameters", &p("iops", "100"), MUTABLE).is_ok());
        assert!(check_parameters("parameters", &p("tier", "fast"), MUTABLE).is_ok());
        assert!(
            check_parameters("parameters", &p("csi.storage.k8s.io/pvc/name", "x"), &[]).is_ok()
        );
        for bad in [
            p("iops", "0"),
            p("iops", "-1"),
            p("tier", "gold"),
            p("colour", "red"),
        ] {
            let err = check_parameters("parameters", &bad, MUTABLE).unwrap_err();
            let key = bad.keys().next().unwrap();
            assert!(err.to_string().contains(key), "{err} names {key}");
        }
    }

    #[test]
    fn topology_subset_match() {
        let node = Segment::from([("zone".into(), "a".into()), ("rack".into(), "1".into())]);
        assert!(segment_matches(&node, &Segment::new()));
        assert!(segment_matches(
            &node,
            &Segment::from([("zone".into(), "a".into())])
        ));
        assert!(!segment_matches(
            &node,
            &Segment::from([("zone".into(), "b".into())])
        ));
        assert!(!segment_matches(
            &node,
            &Segment::from([("region".into(), "x".into())])
        ));
    }

    #[test]
    fn range() {
        assert!(in_range(5, 0, 0));
        assert!(in_range(5, 5, 5));
        assert!(!in_range(5, 6, 0));
        assert!(!in_range(5, 0, 4));
    }
}
