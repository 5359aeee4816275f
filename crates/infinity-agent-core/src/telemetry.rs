//! Traces: what a slice did, as OpenTelemetry spans (docs/traces.md).
//!
//! The core makes its spans with `tracing`, named and described after OpenTelemetry's semantic
//! conventions (the GenAI ones for completions and tool calls): a span per slice, per
//! completion, per tool call, per effect the slice performs. A host that exports them installs
//! [`Otlp`] (the `otlp` feature) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; without it nothing is exported, and the spans
//! cost what an unused `tracing` span costs.
//!
//! A slice is a trace of its own: a thread's slices may lie months apart. What ties them is
//! kept in the record: a dispatched call or a sleep keeps its span's `traceparent`, and the
//! slice its result arrives in makes a `tool_result` span linked to it.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// True when a host exports spans: the attributes only exported spans carry are worth making.
pub fn exporting() -> bool {
    EXPORTER.get().is_some()
}

/// The W3C `traceparent` of `span` (`00-TRACE-SPAN-FLAGS`), when it is exported.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_ref = context.span();
    let found = span_ref.span_context();
    found.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            found.trace_id(),
            found.span_id(),
            found.trace_flags().to_u8()
        )
    })
}

/// The span context a `traceparent` names (`None` for one that is not W3C's version 00).
fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.split('-');
    let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let found = SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    found.is_valid().then_some(found)
}

/// Links `span` to the span `traceparent` names (nothing for one that cannot be read).
pub fn link(span: &tracing::Span, traceparent: &str) {
    if let Some(found) = parse(traceparent) {
        span.add_link(found);
    }
}

/// Sets the attribute `key` on `span` (only the exported span has it: logs do not show it).
pub fn set(span: &tracing::Span, key: &'static str, value: impl Into<opentelemetry::Value>) {
    span.set_attribute(key, value);
}

/// Sets a list of strings on `span` (OpenTelemetry's `string[]`, which `tracing` fields cannot
/// carry), e.g. `gen_ai.response.finish_reasons`.
pub fn set_strings(span: &tracing::Span, key: &'static str, values: &[&str]) {
    let values: Vec<opentelemetry::StringValue> =
        values.iter().map(|v| (*v).to_owned().into()).collect();
    span.set_attribute(key, opentelemetry::Value::Array(values.into()));
}

/// Marks `span` as failed, saying why (`otel.status_code` `ERROR`).
pub fn set_error(span: &tracing::Span, why: &str) {
    span.set_status(opentelemetry::trace::Status::error(why.to_owned()));
}

/// What a host installed to export spans, for [`flush`] and [`shutdown`].
trait Exporter: Send + Sync {
    fn flush(&self);
    fn shutdown(&self);
}

static EXPORTER: std::sync::OnceLock<Box<dyn Exporter>> = std::sync::OnceLock::new();

/// Sends the spans not sent yet and waits until they are, when a host installed an exporter
/// (nothing otherwise). A Lambda handler calls it before it returns: the environment may freeze
/// until the next invocation, or for good.
pub async fn flush() {
    if let Some(exporter) = EXPORTER.get() {
        let _ = tokio::task::spawn_blocking(|| exporter.flush()).await;
    }
}

/// Sends what is left and stops the exporter, when a host installed one (at the end of a
/// process; blocking).
pub fn shutdown() {
    if let Some(exporter) = EXPORTER.get() {
        exporter.shutdown();
    }
}

#[cfg(feature = "otlp")]
mod otlp {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::Resource;
    use tracing_subscriber::registry::LookupSpan;

    /// Traces exported over OTLP/HTTP (protobuf) to the collector the standard environment
    /// names: `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is added) or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`. Spans go
    /// out in batches from a thread of their own; [`super::flush`] sends what is left.
    #[derive(Debug, Clone)]
    pub struct Otlp {
        provider: SdkTracerProvider,
    }

    /// True when the environment asks for traces: an endpoint is set, and neither
    /// `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` turns them off.
    fn configured() -> bool {
        let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
        let is = |name: &str, value: &str| {
            std::env::var(name).is_ok_and(|v| v.trim().eq_ignore_ascii_case(value))
        };
        (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            && !is("OTEL_SDK_DISABLED", "true")
            && !is("OTEL_TRACES_EXPORTER", "none")
    }

    impl Otlp {
        /// The exporter and the `tracing` layer that feeds it, when the environment asks for
        /// traces (`None` otherwise, or when the exporter cannot be made: it says why on
        /// stderr). `service` names the process unless `OTEL_SERVICE_NAME` does.
        pub fn from_env<S>(
            service: &str,
        ) -> Option<(
            tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
            Otlp,
        )>
        where
            S: tracing::Subscriber + for<'span> LookupSpan<'span>,
        {
            if !configured() {
                return None;
            }
            let exporter = match opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .build()
            {
                Ok(exporter) => exporter,
                Err(why) => {
                    eprintln!("traces: the OTLP exporter cannot be made ({why}); none are sent");
                    return None;
                }
            };
            let mut resource = Resource::builder();
            if std::env::var("OTEL_SERVICE_NAME").is_err() {
                resource = resource.with_service_name(service.to_owned());
            }
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource.build())
                .build();
            let tracer = provider.tracer("infinity");
            let layer = tracing_opentelemetry::layer().with_tracer(tracer);
            Some((layer, Otlp { provider }))
        }
    }

    impl super::Exporter for Otlp {
        fn flush(&self) {
            if let Err(why) = self.provider.force_flush() {
                tracing::warn!(%why, "traces could not be sent");
            }
        }

        fn shutdown(&self) {
            if let Err(why) = self.provider.shutdown() {
                tracing::warn!(%why, "traces could not be sent");
            }
        }
    }

    /// Installs `tracing` for a host's process: `logs` (the host's log layer, with its own
    /// filter), and beside it, when the environment asks for traces, the OTLP exporter of the
    /// spans of Infinity's crates (`infinity*` targets, `info` and up). Returns true when
    /// traces are exported; [`super::flush`] and [`super::shutdown`] send them.
    pub fn install<L>(logs: L, service: &str) -> bool
    where
        L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync,
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        use tracing_subscriber::Layer;
        let otlp = Otlp::from_env(service);
        let (layer, exporter) = match otlp {
            Some((layer, exporter)) => (Some(layer), Some(exporter)),
            None => (None, None),
        };
        let ours = tracing_subscriber::filter::Targets::new()
            .with_target("infinity", tracing::Level::INFO);
        let _ = tracing_subscriber::registry()
            .with(logs)
            .with(layer.map(|l| l.with_filter(ours)))
            .try_init();
        match exporter {
            Some(exporter) => super::EXPORTER.set(Box::new(exporter)).is_ok(),
            None => false,
        }
    }
}

#[cfg(feature = "otlp")]
pub use otlp::{install, Otlp};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_back_and_a_bad_one_refused() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let found = parse(good).unwrap();
        assert_eq!(
            found.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(found.span_id().to_string(), "00f067aa0ba902b7");
        assert!(found.is_sampled());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-zz-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn without_an_exporter_a_span_has_no_traceparent() {
        let span = tracing::info_span!("alone");
        assert_eq!(traceparent(&span), None);
        // Linking and setting do nothing, and do not fail.
        link(
            &span,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        set_strings(&span, "gen_ai.response.finish_reasons", &["stop"]);
        set_error(&span, "no");
    }
}
