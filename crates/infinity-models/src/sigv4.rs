//! SigV4, the one way the runtime signs requests for AWS: Bedrock's Converse requests (here) and
//! calls to tool servers behind a Lambda Function URL with IAM auth (`infinity-aws`).
//!
//! A signature covers the time (and is valid for minutes), so each attempt is signed when it is
//! sent; the credentials are fetched once and kept until shortly before they expire, as the AWS
//! SDKs' identity cache does (a provider may be a call to IMDS, STS or SSO).

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4::SigningParams;
use reqwest::header::{HeaderName, HeaderValue};

/// How long before they expire credentials are fetched anew: longer than an attempt and its
/// retries normally take, so a request does not outlive the credentials it was signed with.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// Credentials from a provider, kept until five minutes before they expire.
#[derive(Debug)]
pub struct CachedCredentials {
    provider: SharedCredentialsProvider,
    current: tokio::sync::Mutex<Option<Credentials>>,
}

impl CachedCredentials {
    /// Credentials from `provider`, fetched when first needed.
    pub fn new(provider: SharedCredentialsProvider) -> Self {
        Self {
            provider,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// Credentials valid for a while yet. Callers at the same time wait for one fetch.
    pub async fn get(&self) -> Result<Credentials, CredentialsError> {
        let mut current = self.current.lock().await;
        let now = SystemTime::now();
        if let Some(credentials) = current.as_ref().filter(|c| !expires_soon(c, now)) {
            return Ok(credentials.clone());
        }
        let fresh = self.provider.provide_credentials().await?;
        *current = Some(fresh.clone());
        Ok(fresh)
    }
}

fn expires_soon(credentials: &Credentials, now: SystemTime) -> bool {
    credentials
        .expiry()
        .is_some_and(|expiry| expiry <= now + REFRESH_BEFORE_EXPIRY)
}

/// The headers that sign a request for `service` in `region` at `time`: `x-amz-date`,
/// `authorization` and, for temporary credentials, `x-amz-security-token`. The signature covers
/// the method, the url, the `headers` given and the body's SHA-256.
pub fn signature_headers(
    credentials: &Credentials,
    region: &str,
    service: &str,
    request: Signable<'_>,
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity = credentials.clone().into();
    let params = SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.iter().map(|(k, v)| (*k, *v)),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect())
}

/// What a signature covers.
#[derive(Debug, Clone, Copy)]
pub struct Signable<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The whole url, query included.
    pub url: &'a str,
    /// The headers to sign besides `host` (taken from the url).
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

/// `request` with its signature headers added: its method, url, headers and body signed for
/// `service` in `region` at `time` ([`signature_headers`]).
pub fn sign_request(
    request: &mut reqwest::Request,
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<(), String> {
    // Signed while the request is only read; the headers are added after.
    let signed = {
        let body = match request.body() {
            Some(body) => body.as_bytes().ok_or("a streamed body cannot be signed")?,
            None => &[],
        };
        let headers: Vec<(&str, &str)> = request
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let signable = Signable {
            method: request.method().as_str(),
            url: request.url().as_str(),
            headers: &headers,
            body,
        };
        signature_headers(credentials, region, service, signable, time)?
    };
    for (name, value) in signed {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("{name}: {e}"))?;
        let value = HeaderValue::from_str(&value).map_err(|e| format!("{name}: {e}"))?;
        request.headers_mut().insert(name, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Hands out credentials that expire `lifetime` from now, counting the fetches.
    #[derive(Debug)]
    struct Counting {
        fetches: Arc<AtomicUsize>,
        lifetime: Duration,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.fetches.fetch_add(1, Ordering::Relaxed);
            let expiry = SystemTime::now() + self.lifetime;
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
                "AKID",
                "SECRET",
                None,
                Some(expiry),
                "test",
            )))
        }
    }

    async fn fetches_for_two_requests(lifetime: Duration) -> usize {
        let fetches = Arc::new(AtomicUsize::new(0));
        let cache = CachedCredentials::new(SharedCredentialsProvider::new(Counting {
            fetches: Arc::clone(&fetches),
            lifetime,
        }));
        cache.get().await.unwrap();
        cache.get().await.unwrap();
        fetches.load(Ordering::Relaxed)
    }

    #[tokio::test]
    async fn credentials_are_kept_until_shortly_before_they_expire() {
        assert_eq!(fetches_for_two_requests(Duration::from_secs(3600)).await, 1);
        assert_eq!(fetches_for_two_requests(Duration::from_secs(60)).await, 2);
    }

    #[test]
    fn the_signature_names_the_key_region_and_service_and_covers_the_time() {
        let credentials = Credentials::new("AKID", "SECRET", Some("TOKEN".into()), None, "test");
        let url = reqwest::Url::parse(
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/a.b-v1%3A0/converse",
        )
        .unwrap();
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
        let signed = |time| {
            let mut request = reqwest::Client::new()
                .post(url.clone())
                .body("{}")
                .build()
                .unwrap();
            sign_request(&mut request, &credentials, "eu-west-1", "bedrock", time).unwrap();
            request
        };
        let request = signed(time);
        let header = |name| request.headers()[name].to_str().unwrap().to_owned();
        assert_eq!(header("x-amz-date"), "20260101T000000Z");
        assert_eq!(header("x-amz-security-token"), "TOKEN");
        let authorization = header("authorization");
        assert!(
            authorization.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/bedrock/aws4_request, \
                 SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="
            ),
            "{authorization}"
        );
        let later = signed(time + Duration::from_secs(1));
        assert_ne!(later.headers()["authorization"], authorization.as_str());
    }
}
