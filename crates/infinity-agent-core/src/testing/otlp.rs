//! A receiver of OTLP/HTTP traces for tests: what a collector takes (`POST /v1/traces`,
//! protobuf), decoded with OpenTelemetry's own definitions (`opentelemetry-proto`), and helpers
//! to read the spans' attributes.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed step should stop the test

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
pub use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
pub use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
pub use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// What the receiver took: each export's spans, with the resource's `service.name`.
#[derive(Debug, Default)]
pub struct Received {
    /// Every span, in the order they came.
    pub spans: Vec<Span>,
    /// Each export's resource's `service.name`.
    pub services: Vec<String>,
    /// Each export's `Content-Type`.
    pub content_types: Vec<String>,
}

/// An OTLP/HTTP trace receiver on a free port (`POST /v1/traces`, protobuf).
pub async fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let kept = Arc::clone(&received);
    let app = Router::new().route(
        "/v1/traces",
        post(move |headers: HeaderMap, body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                    return (StatusCode::BAD_REQUEST, Vec::new());
                };
                let mut kept = kept.lock().unwrap();
                kept.content_types.push(
                    headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned(),
                );
                for resource_spans in request.resource_spans {
                    let service = resource_spans
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| text(kv.value.as_ref()?.value.as_ref()?))
                        .unwrap_or_default();
                    kept.services.push(service);
                    for scope in resource_spans.scope_spans {
                        kept.spans.extend(scope.spans);
                    }
                }
                (
                    StatusCode::OK,
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// A string value's text.
pub fn text(value: &Any) -> Option<String> {
    match value {
        Any::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// A span's attributes, by key.
pub fn attributes(span: &Span) -> HashMap<String, Any> {
    span.attributes
        .iter()
        .filter_map(|kv| Some((kv.key.clone(), kv.value.as_ref()?.value.clone()?)))
        .collect()
}

/// The string attribute `key` (the test fails without one).
pub fn string(span: &Span, key: &str) -> String {
    match attributes(span).get(key) {
        Some(Any::StringValue(s)) => s.clone(),
        other => panic!("{} has no string {key}: {other:?}", span.name),
    }
}

/// The integer attribute `key` (the test fails without one).
pub fn int(span: &Span, key: &str) -> i64 {
    match attributes(span).get(key) {
        Some(Any::IntValue(n)) => *n,
        other => panic!("{} has no integer {key}: {other:?}", span.name),
    }
}

/// The string-array attribute `key` (the test fails without one).
pub fn strings(span: &Span, key: &str) -> Vec<String> {
    match attributes(span).get(key) {
        Some(Any::ArrayValue(list)) => list
            .values
            .iter()
            .filter_map(|v| text(v.value.as_ref()?))
            .collect(),
        other => panic!("{} has no string array {key}: {other:?}", span.name),
    }
}
