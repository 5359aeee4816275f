//! How every route reads a request: its path ([`Path`]), its query ([`Query`]) and its JSON body
//! ([`Json`]), each through axum's own extractor, with what that refuses answered as every error
//! of the API is, `{"error": "..."}` naming what was wrong, with a status the document lists:
//!
//! - a path or query that cannot be read: 400;
//! - a body: 415 when it is not sent as `Content-Type: application/json` (or `...+json`), 413
//!   over the route's limit, 400 when it is not JSON, 422 when it is JSON of another shape.
//!
//! One rule for bodies, on every route: a route that takes one reads it only as JSON, so `curl
//! -d` without a Content-Type is refused everywhere alike. A route whose body may be left out
//! (`Option<Json<T>>`: `close`, `interrupt`) takes an empty body, with or without a
//! Content-Type; a body that is there follows the rule.
//!
//! A number with a zero fraction (`2.0`) is an integer to JSON Schema, so a client may send one
//! where the document says `integer`; serde refuses it for an integer field, so a body refused
//! for its shape is read once more with such numbers as integers before it is answered 422
//! (a body up to a megabyte).

use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::{error, ApiError};

/// A JSON body read as `T` (or, as an answer, `T` written as JSON).
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub(crate) struct Json<T>(pub T);

/// The request's path parameters read as `T` (400 when one cannot be: not UTF-8, not of its
/// type).
#[derive(Debug, Clone)]
pub(crate) struct Path<T>(pub T);

/// The request's query read as `T` (400 naming what cannot be read: an unknown parameter, one
/// given twice, a value not of its type).
#[derive(Debug, Clone)]
pub(crate) struct Query<T>(pub T);

/// Whether the request says its body is JSON: `application/json` or `application/...+json`,
/// with any parameters (`; charset=utf-8`).
fn says_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || subtype.to_ascii_lowercase().ends_with("+json"))
}

fn not_json_content() -> ApiError {
    error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "the body must be JSON, sent with `Content-Type: application/json`",
    )
}

/// The body's bytes, or the answer for one that could not be read (413 over the limit).
async fn bytes_of<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|e| error(e.status(), e.body_text()))
}

/// The largest body read a second time with its integral numbers as integers (a
/// conversation's bundle may be a gigabyte; what people and clients send is far smaller).
const LENIENT_UP_TO: usize = 1 << 20;

/// `bytes` read as `T`: 400 for what is not JSON, 422 for JSON of another shape.
fn read<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    match axum::Json::<T>::from_bytes(bytes) {
        Ok(axum::Json(value)) => Ok(value),
        Err(JsonRejection::JsonDataError(refused)) => (bytes.len() <= LENIENT_UP_TO)
            .then(|| with_integers(bytes))
            .flatten()
            .and_then(|value| serde_json::from_value(value).ok())
            .ok_or_else(|| error(StatusCode::UNPROCESSABLE_ENTITY, refused.body_text())),
        Err(other) => Err(error(other.status(), other.body_text())),
    }
}

/// The JSON in `bytes` with each number that has a zero fraction and fits an integer made one;
/// `None` when it has none (or is not JSON).
fn with_integers(bytes: &[u8]) -> Option<Value> {
    fn walk(value: &mut Value) -> bool {
        match value {
            Value::Number(n) if n.is_f64() => {
                let Some(float) = n.as_f64().filter(|f| f.fract() == 0.0) else {
                    return false;
                };
                // From -2^63 to below 2^64 the cast of an integral float is exact.
                let integer = if (0.0..18_446_744_073_709_551_616.0).contains(&float) {
                    Value::from(float as u64)
                } else if (-9_223_372_036_854_775_808.0..0.0).contains(&float) {
                    Value::from(float as i64)
                } else {
                    return false;
                };
                *value = integer;
                true
            }
            Value::Array(items) => items.iter_mut().fold(false, |changed, v| walk(v) | changed),
            Value::Object(fields) => fields
                .values_mut()
                .fold(false, |changed, v| walk(v) | changed),
            _ => false,
        }
    }
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    walk(&mut value).then_some(value)
}

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !says_json(request.headers()) {
            return Err(not_json_content());
        }
        let bytes = bytes_of(request, state).await?;
        read(&bytes).map(Self)
    }
}

impl<T, S> OptionalFromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Option<Self>, ApiError> {
        let json = says_json(request.headers());
        let bytes = bytes_of(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        if !json {
            return Err(not_json_content());
        }
        read(&bytes).map(|value| Some(Self(value)))
    }
}

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Self(value))
            .map_err(|e| error(e.status(), e.body_text()))
    }
}

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Self(value))
            .map_err(|e| error(StatusCode::BAD_REQUEST, e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_json_by_its_content_type_alone() {
        let says = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            says_json(&headers)
        };
        assert!(says("application/json"));
        assert!(says("Application/JSON; charset=utf-8"));
        assert!(says("application/merge-patch+json"));
        assert!(!says("application/x-www-form-urlencoded"));
        assert!(!says("text/json"));
        assert!(!says("application/jsonp"));
        assert!(!says_json(&HeaderMap::new()));
    }

    #[test]
    fn integers_written_with_a_zero_fraction_are_read_as_integers() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Shape {
            selected: usize,
            code: i32,
        }
        let read = |body: &str| read::<Shape>(body.as_bytes()).map_err(|e| (e.0, e.1));
        assert_eq!(
            read(r#"{"selected": 2.0, "code": -7.0}"#),
            Ok(Shape {
                selected: 2,
                code: -7
            })
        );
        let (status, why) = read(r#"{"selected": 2.5, "code": 1}"#).unwrap_err();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(why.contains("selected"), "{why}");
        let (status, _) = read(r#"{"selected": 1e300, "code": 1}"#).unwrap_err();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        let (status, _) = read(r#"{"selected": "#).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
