//! Who may use the API: [`Guard`], a tower [`Layer`] in front of the routes.
//!
//! On a loopback address, requests must name the server itself in `Host` (no DNS rebinding) and
//! come from its own origin if they carry an `Origin` (no other site's page); on any other
//! address, a bearer token is required too. `/health` and `/openapi.json` are always open. A
//! request with two `Host` (or two `Content-Length`) headers is refused on every route.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{header, HeaderMap, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::future::Either;
use tower::{Layer, Service};

/// The variable that holds the API's bearer token (otherwise one is made at start when the
/// server listens beyond loopback, and printed).
pub const TOKEN_VAR: &str = "INFINITY_SERVE_TOKEN";

/// Who may use the API; as a [`Layer`], it refuses every other request before it reaches the
/// routes it wraps.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// A token every request must carry (`Authorization: Bearer T`, or `?access_token=T` for
    /// `EventSource`, which cannot set headers).
    pub token: Option<String>,
    /// The `Host` values the server answers to (empty: any, when it listens beyond loopback).
    pub hosts: Vec<String>,
    /// Requests from any origin are taken (a published page's content and files, loaded by
    /// the page itself from its sandboxed origin, `null`); otherwise only from the server's own
    /// pages.
    pub any_origin: bool,
}

impl Guard {
    /// The guard for a server listening on `host:port`: on loopback, only its own host names;
    /// beyond it, any host name but a token, from `INFINITY_SERVE_TOKEN` or made now. The token
    /// from the variable is required on loopback too.
    pub fn for_address(host: &str, port: u16, token_var: Option<String>) -> (Self, bool) {
        let loopback = matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]");
        let made = token_var.is_none() && !loopback;
        let token = token_var.or_else(|| made.then(|| uuid::Uuid::new_v4().simple().to_string()));
        let hosts = if loopback {
            ["127.0.0.1", "localhost", "[::1]"]
                .iter()
                .map(|h| format!("{h}:{port}"))
                .collect()
        } else {
            Vec::new()
        };
        (
            Self {
                token,
                hosts,
                any_origin: false,
            },
            made,
        )
    }

    /// The same checks of `Host` and `Origin`, without the token (what routes that check a
    /// token themselves, or serve public files, sit behind).
    pub fn without_token(&self) -> Self {
        Self {
            token: None,
            ..self.clone()
        }
    }

    /// Whether `token` is this guard's (compared in constant time); false when it has none.
    pub fn is_token(&self, token: &str) -> bool {
        self.token
            .as_deref()
            .is_some_and(|own| constant_time_eq(token.as_bytes(), own.as_bytes()))
    }

    /// Why a request for `uri` with `headers` is refused, as the answer to give; `None` lets
    /// it through.
    pub fn refusal(&self, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
        // Which host, or how long a body, a request names must not depend on who reads it
        // (RFC 9112, sections 3.2 and 6.3): one of each, on every route.
        for name in [header::HOST, header::CONTENT_LENGTH] {
            if headers.get_all(&name).iter().nth(1).is_some() {
                return Some(refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the request has more than one `{name}` header"),
                ));
            }
        }
        if uri.path() == "/health" || uri.path() == "/openapi.json" {
            return None;
        }
        let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let host = header(header::HOST).unwrap_or_default();
        if !self.hosts.is_empty() && !self.hosts.iter().any(|h| h == host) {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                format!("this server answers to {} only", self.hosts.join(", ")),
            ));
        }
        if let Some(origin) = header(header::ORIGIN).filter(|_| !self.any_origin) {
            let own = [format!("http://{host}"), format!("https://{host}")];
            if !own.iter().any(|o| o == origin) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    format!(
                        "requests from {origin} are not accepted (only from this server's own pages)"
                    ),
                ));
            }
        }
        if self.token.is_some() {
            let bearer = header(header::AUTHORIZATION)
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            let given = bearer.or_else(|| uri.query().and_then(query_token));
            if !given.is_some_and(|g| self.is_token(&g)) {
                return Some(refuse(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required (Authorization: Bearer TOKEN)",
                ));
            }
        }
        None
    }
}

fn refuse(status: StatusCode, message: impl std::fmt::Display) -> Response {
    crate::api::error(status, message).into_response()
}

impl<S> Layer<S> for Guard {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            guard: Arc::new(self.clone()),
            inner,
        }
    }
}

/// A service behind a [`Guard`].
#[derive(Debug, Clone)]
pub struct Guarded<S> {
    guard: Arc<Guard>,
    inner: S,
}

impl<S, B> Service<Request<B>> for Guarded<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.guard.refusal(request.uri(), request.headers()) {
            Some(refusal) => Either::Left(ready(Ok(refusal))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

/// The `access_token` a query string carries, decoded (the web app encodes it with
/// `encodeURIComponent`, so a token with `+`, `/` or `=` arrives as `%2B`, `%2F`, `%3D`).
pub fn query_token(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "access_token")
        .map(|(_, value)| value.into_owned())
}

/// Compares without stopping at the first difference, so timing tells nothing of the token.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn a_query_token_is_decoded_as_the_web_app_encoded_it() {
        assert_eq!(
            query_token("x=1&access_token=a%2Bb%2Fc%3D&y=2").as_deref(),
            Some("a+b/c=")
        );
        assert_eq!(query_token("access_token=plain").as_deref(), Some("plain"));
        assert_eq!(query_token("token=other"), None);
        assert_eq!(query_token(""), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3cres"));
        assert!(
            !constant_time_eq(b"s3cret", b"s3cre"),
            "a prefix is not the token"
        );
        assert!(!constant_time_eq(b"", b"s3cret"));
    }

    fn status(guard: &Guard, uri: &str, headers: &[(&'static str, &'static str)]) -> u16 {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        let uri: Uri = uri.parse().unwrap_or_default();
        guard
            .refusal(&uri, &map)
            .map_or(200, |r| r.status().as_u16())
    }

    #[test]
    fn the_guard_checks_host_origin_and_token_but_never_health() {
        let (loopback, made) = Guard::for_address("127.0.0.1", 8700, None);
        assert!(!made && loopback.token.is_none());
        let host = ("host", "127.0.0.1:8700");
        assert_eq!(status(&loopback, "/threads", &[host]), 200);
        assert_eq!(
            status(&loopback, "/threads", &[("host", "evil.example:8700")]),
            403,
            "DNS rebinding"
        );
        assert_eq!(
            status(
                &loopback,
                "/threads",
                &[host, ("origin", "http://evil.example")]
            ),
            403
        );
        assert_eq!(
            status(
                &loopback,
                "/threads",
                &[host, ("origin", "http://127.0.0.1:8700")]
            ),
            200
        );
        let (wide, made) = Guard::for_address("0.0.0.0", 8700, Some("t+k".into()));
        assert!(!made);
        let any = ("host", "box.example");
        assert_eq!(status(&wide, "/threads", &[any]), 401);
        assert_eq!(status(&wide, "/health", &[]), 200);
        assert_eq!(
            status(&wide, "/threads", &[any, ("authorization", "Bearer t+k")]),
            200
        );
        assert_eq!(
            status(&wide, "/threads?access_token=t%2Bk", &[any]),
            200,
            "the query's token is decoded"
        );
        assert_eq!(status(&wide, "/threads?access_token=t+k", &[any]), 401);
        assert_eq!(status(&wide.without_token(), "/threads", &[any]), 200);
    }

    #[test]
    fn two_host_headers_are_refused_on_every_route() {
        let (loopback, _) = Guard::for_address("127.0.0.1", 8700, None);
        let (wide, _) = Guard::for_address("0.0.0.0", 8700, Some("t".into()));
        for (guard, first) in [(&loopback, "127.0.0.1:8700"), (&wide, "box.example")] {
            let mut headers = HeaderMap::new();
            headers.append(header::HOST, HeaderValue::from_static(first));
            headers.append(header::HOST, HeaderValue::from_static("evil.example"));
            headers.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
            for path in ["/threads", "/health", "/openapi.json"] {
                let uri: Uri = path.parse().unwrap_or_default();
                let refusal = guard.refusal(&uri, &headers);
                assert_eq!(
                    refusal.map(|r| r.status().as_u16()),
                    Some(400),
                    "{path} with two Host headers (RFC 9112, section 3.2)"
                );
            }
        }
    }
}
