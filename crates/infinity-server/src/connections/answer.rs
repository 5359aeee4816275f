//! What a connection does with each request: the request's body under its time limit (408 when
//! it comes too slowly), and the request counted on its connection until its answer ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use super::held::{Counted, Held};

/// How long a request's body may take: `base` from the end of its headers, plus a second for
/// every `rate` bytes that have arrived.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit {
    pub base: Duration,
    pub rate: u64,
}

impl BodyLimit {
    fn deadline(self, started: Instant, received: u64) -> Instant {
        /// Far enough: a year.
        const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);
        let earned = Duration::from_millis(received.saturating_mul(1000) / self.rate.max(1));
        started + self.base.saturating_add(earned).min(LONGEST)
    }
}

/// The service hyper calls for each request of one connection.
#[derive(Debug, Clone)]
pub struct Answering {
    pub app: Router,
    pub held: Arc<Held>,
    pub body: BodyLimit,
}

impl hyper::service::Service<Request<Incoming>> for Answering {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let answering = self.held.answering();
        let (parts, body) = request.into_parts();
        let late = Arc::new(AtomicBool::new(false));
        let body = TimedBody::new(body, self.body, &self.held, Arc::clone(&late));
        let request = Request::from_parts(parts, Body::new(body));
        let app = self.app.clone();
        let limit = self.body;
        Box::pin(async move {
            let answer = match app.oneshot(request).await {
                Ok(answer) => answer,
                Err(never) => match never {},
            };
            let answer = if late.load(Ordering::Relaxed) {
                too_slow(limit)
            } else {
                answer
            };
            Ok(answer.map(|body| {
                Body::new(Counting {
                    body,
                    answering: Some(answering),
                })
            }))
        })
    }
}

/// 408 for a body that did not arrive in time; the connection closes after it.
fn too_slow(limit: BodyLimit) -> Response<Body> {
    let mut answer = crate::api::error(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "the request's body did not arrive in time (a body may take {} s after the \
             headers, plus a second for every {} bytes that arrive)",
            limit.base.as_secs_f32(),
            limit.rate
        ),
    )
    .into_response();
    answer
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

/// The body of a request that came too slowly.
#[derive(Debug, thiserror::Error)]
#[error("the request's body did not arrive in time")]
pub struct TooSlow;

/// A request's body that fails with [`TooSlow`] past its [`BodyLimit`].
struct TimedBody {
    body: Incoming,
    limit: BodyLimit,
    started: Instant,
    received: u64,
    deadline: Pin<Box<Sleep>>,
    late: Arc<AtomicBool>,
    /// Held while the body is still arriving.
    receiving: Option<Counted>,
}

impl TimedBody {
    fn new(body: Incoming, limit: BodyLimit, held: &Arc<Held>, late: Arc<AtomicBool>) -> Self {
        let started = Instant::now();
        let receiving = (!http_body::Body::is_end_stream(&body)).then(|| held.receiving());
        Self {
            body,
            limit,
            started,
            received: 0,
            deadline: Box::pin(tokio::time::sleep_until(limit.deadline(started, 0))),
            late,
            receiving,
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if this.receiving.is_none() && this.late.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(TooSlow.into())));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received = this.received.saturating_add(data.len() as u64);
                    let deadline = this.limit.deadline(this.started, this.received);
                    this.deadline.as_mut().reset(deadline);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(end) => {
                this.receiving = None;
                Poll::Ready(end.map(|r| r.map_err(Into::into)))
            }
            Poll::Pending => {
                if this.deadline.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.late.store(true, Ordering::Relaxed);
                this.receiving = None;
                Poll::Ready(Some(Err(TooSlow.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body, counting its request as being answered until it ends.
struct Counting {
    body: Body,
    answering: Option<Counted>,
}

impl http_body::Body for Counting {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.answering = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_earns_time_as_its_bytes_arrive() {
        let limit = BodyLimit {
            base: Duration::from_secs(30),
            rate: 16 * 1024,
        };
        let started = Instant::now();
        assert_eq!(
            limit.deadline(started, 0),
            started + Duration::from_secs(30)
        );
        assert_eq!(
            limit.deadline(started, 160 * 1024),
            started + Duration::from_secs(40)
        );
        let stalled = BodyLimit { rate: 0, ..limit };
        assert!(stalled.deadline(started, u64::MAX) > started);
    }
}
