//! `Choice<T>`: a setting with a fixed set of spellings (a serde unit enum) that keeps the raw
//! string when it is none of them. serde stops at the first value it cannot deserialize, so a
//! plain enum field would hide every later problem; through `Choice` an unknown spelling is
//! reported at validation time, together with all the others.

use std::fmt;

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::Deserialize;

/// One of `T`'s spellings, or what was written instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice<T> {
    Known(T),
    Unknown(String),
}

impl<T: DeserializeOwned> Choice<T> {
    /// Reads `raw` the way serde reads `T` from a TOML string, so a command-line flag accepts
    /// exactly the spellings the file does.
    pub fn parse(raw: impl Into<String>) -> Self {
        let raw = raw.into();
        match T::deserialize(StrDeserializer::<de::value::Error>::new(&raw)) {
            Ok(t) => Choice::Known(t),
            Err(_) => Choice::Unknown(raw),
        }
    }

    /// The value, or the message naming what was written and what `T` accepts.
    pub fn get(self) -> Result<T, String> {
        match self {
            Choice::Known(t) => Ok(t),
            Choice::Unknown(raw) => {
                let accepted: Vec<String> =
                    spellings::<T>().iter().map(|s| format!("{s:?}")).collect();
                Err(format!("{raw:?} is not one of {}", accepted.join(", ")))
            }
        }
    }
}

impl<T: Default> Default for Choice<T> {
    fn default() -> Self {
        Choice::Known(T::default())
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Choice<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A non-string (a number, a table) is still a type error here: first-error-only, as
        // any TOML type error is.
        String::deserialize(d).map(Choice::parse)
    }
}

/// The spellings serde accepts for the unit enum `T`: the `VARIANTS` its derived `Deserialize`
/// hands to `deserialize_enum`, renames applied. Asking serde keeps the list in one place (the
/// enum's `#[serde(rename…)]`), so error messages cannot drift from what is accepted.
fn spellings<T: DeserializeOwned>() -> &'static [&'static str] {
    match T::deserialize(VariantProbe) {
        Err(Variants(v)) => v,
        Ok(_) => &[],
    }
}

/// A deserializer that answers only `deserialize_enum`, by failing with its variant names.
struct VariantProbe;

#[derive(Debug)]
struct Variants(&'static [&'static str]);

impl fmt::Display for Variants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::error::Error for Variants {}

impl de::Error for Variants {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Variants(&[])
    }
}

impl<'de> Deserializer<'de> for VariantProbe {
    type Error = Variants;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Variants> {
        Err(Variants(&[]))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Variants> {
        Err(Variants(variants))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
    enum Version {
        #[serde(rename = "v0.1")]
        V01,
        #[serde(rename = "v0.1-oneof")]
        V01Oneof,
    }

    #[test]
    fn known_spellings_parse_and_unknown_ones_are_named_with_the_accepted() {
        assert_eq!(
            Choice::<Version>::parse("v0.1-oneof").get(),
            Ok(Version::V01Oneof)
        );
        assert_eq!(
            Choice::<Version>::parse("v0.9").get(),
            Err(r#""v0.9" is not one of "v0.1", "v0.1-oneof""#.to_string())
        );
        let from_toml: Choice<Version> = toml::Value::String("v0.1".into()).try_into().unwrap();
        assert_eq!(from_toml, Choice::Known(Version::V01));
    }
}
