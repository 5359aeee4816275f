//! SigV4 for Converse requests, and the credentials it signs with.
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
use reqwest::RequestBuilder;

/// The name Bedrock's requests are signed for.
const SIGNING_NAME: &str = "bedrock";

/// How long before they expire credentials are fetched anew: longer than an attempt and its
/// retries normally take, so a request does not outlive the credentials it was signed with.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// Credentials from a provider, kept until [`REFRESH_BEFORE_EXPIRY`] before they expire.
#[derive(Debug)]
pub(super) struct CachedCredentials {
    provider: SharedCredentialsProvider,
    current: tokio::sync::Mutex<Option<Credentials>>,
}

impl CachedCredentials {
    pub(super) fn new(provider: SharedCredentialsProvider) -> Self {
        Self {
            provider,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// Credentials valid for a while yet. Callers at the same time wait for one fetch.
    pub(super) async fn get(&self) -> Result<Credentials, CredentialsError> {
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

/// `request`, a POST of `body` to `url`, with the SigV4 headers for `region` at `time`:
/// `x-amz-date`, `authorization` and, for temporary credentials, `x-amz-security-token`. The
/// body's SHA-256 is part of the signature.
pub(super) fn sign_request(
    request: RequestBuilder,
    credentials: &Credentials,
    region: &str,
    url: &reqwest::Url,
    body: &[u8],
    time: SystemTime,
) -> Result<RequestBuilder, String> {
    let identity = credentials.clone().into();
    let params = SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url.as_str(),
        std::iter::empty(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .fold(request, |request, (name, value)| {
            request.header(name, value)
        }))
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
            let request = reqwest::Client::new().post(url.clone());
            sign_request(request, &credentials, "eu-west-1", &url, b"{}", time)
                .unwrap()
                .build()
                .unwrap()
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
