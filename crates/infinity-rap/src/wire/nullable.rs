//! Optional fields the spec types as "`T` or `null`".

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An optional field the spec types as "`T` or `null`" (`call_id`, `thread_ancestors`,
/// `user_id`).
///
/// The spec gives an absent field and an explicit `null` the same meaning, yet its examples send
/// `"call_id": null`. Keeping the two apart makes a parse-and-serialize round trip exact. Fields of
/// this type carry `#[serde(default, skip_serializing_if = "Nullable::is_absent")]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Nullable<T> {
    /// The field is not in the object.
    #[default]
    Absent,
    /// The field is `null`.
    Null,
    /// The field holds a value.
    Value(T),
}

impl<T> Nullable<T> {
    /// True when the field is not in the object (so it is not serialized either).
    pub fn is_absent(&self) -> bool {
        matches!(self, Nullable::Absent)
    }

    /// The value, if any: absent and `null` both give `None`.
    pub fn as_option(&self) -> Option<&T> {
        match self {
            Nullable::Value(value) => Some(value),
            Nullable::Absent | Nullable::Null => None,
        }
    }

    /// The value, if any, by value.
    pub fn into_option(self) -> Option<T> {
        match self {
            Nullable::Value(value) => Some(value),
            Nullable::Absent | Nullable::Null => None,
        }
    }
}

impl<T: std::ops::Deref> Nullable<T> {
    /// The value dereferenced, e.g. `Option<&str>` for a `Nullable<String>`.
    pub fn as_deref(&self) -> Option<&T::Target> {
        self.as_option().map(|value| &**value)
    }
}

/// `None` becomes [`Nullable::Absent`]: a field we leave out rather than send as `null`.
impl<T> From<Option<T>> for Nullable<T> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Nullable::Absent, Nullable::Value)
    }
}

impl<T: Serialize> Serialize for Nullable<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Nullable::Value(value) => serializer.serialize_some(value),
            Nullable::Absent | Nullable::Null => serializer.serialize_none(),
        }
    }
}

/// Only called for a field that is present (absence is the field's `#[serde(default)]`).
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(deserializer)?.map_or(Nullable::Null, Nullable::Value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Carrier {
        #[serde(default, skip_serializing_if = "Nullable::is_absent")]
        call_id: Nullable<String>,
    }

    #[test]
    fn absent_null_and_value_survive_a_round_trip() {
        for (json, expected) in [
            ("{}", Nullable::Absent),
            (r#"{"call_id":null}"#, Nullable::Null),
            (r#"{"call_id":"c1"}"#, Nullable::Value("c1".to_owned())),
        ] {
            let carrier: Carrier = serde_json::from_str(json).unwrap();
            assert_eq!(carrier.call_id, expected);
            assert_eq!(serde_json::to_string(&carrier).unwrap(), json);
        }
    }

    #[test]
    fn absent_and_null_both_read_as_no_value() {
        assert_eq!(Nullable::<String>::Absent.as_deref(), None);
        assert_eq!(Nullable::<String>::Null.as_deref(), None);
        assert_eq!(Nullable::Value("c1".to_owned()).as_deref(), Some("c1"));
        assert_eq!(Nullable::from(None::<String>), Nullable::Absent);
    }
}
