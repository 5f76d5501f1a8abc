//! Every problem of a configuration, collected: validation goes on past the first so the
//! operator fixes them all in one round.

use std::fmt;

use super::choice::Choice;
use serde::de::DeserializeOwned;

/// One bad setting: the field (`listen.legacy_dialect`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The problems found so far.
#[derive(Debug, Default)]
pub struct Problems(Vec<Problem>);

impl Problems {
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Problem {
            field: field.into(),
            message: message.into(),
        });
    }

    /// `r`'s value, or `None` with its error recorded under `field`.
    pub fn take<T, E: fmt::Display>(&mut self, field: &str, r: Result<T, E>) -> Option<T> {
        r.map_err(|e| self.push(field, e.to_string())).ok()
    }

    /// The chosen value, or `None` with the unknown spelling recorded under `field`.
    pub fn choice<T: DeserializeOwned>(&mut self, field: &str, c: Choice<T>) -> Option<T> {
        self.take(field, c.get())
    }

    /// Records `message` under `field` unless `ok`; returns `ok`.
    pub fn check(&mut self, ok: bool, field: &str, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.push(field, message());
        }
        ok
    }

    /// A positive duration, or `None` with "must be above zero" recorded under `field`.
    pub fn positive(&mut self, field: &str, d: std::time::Duration) -> Option<std::time::Duration> {
        self.check(!d.is_zero(), field, || "must be above zero".into())
            .then_some(d)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_vec(self) -> Vec<Problem> {
        self.0
    }
}
