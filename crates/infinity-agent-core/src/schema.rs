//! JSON Schemas for the API's OpenAPI document (`infinity-server`'s `openapi`). The API's types
//! derive [`schemars::JsonSchema`] (ids and dollars write theirs by hand, beside their JSON
//! form); a field of a type from another crate names its schema here: a time,
//! `#[schemars(with = "crate::schema::Rfc3339")]`.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

/// A time as RFC 3339 text in UTC (`2026-05-01T21:07:09Z`): a [`jiff::Timestamp`]'s JSON.
#[derive(Debug)]
pub struct Rfc3339;

impl JsonSchema for Rfc3339 {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Rfc3339".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "date-time"})
    }
}

/// A local date and time without a zone (`2026-05-01T09:00:00`): a [`jiff::civil::DateTime`]'s
/// JSON.
#[derive(Debug)]
pub struct LocalDateTime;

impl JsonSchema for LocalDateTime {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "LocalDateTime".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?$",
        })
    }
}
