//! Authenticated callback URLs.
//!
//! Every invocation carries a `callback_url` made for the one thread and call it was issued for:
//! `{base}/rap/callback/{thread}/{call}?exp={unix seconds}&sig={hex}`, where `sig` is an
//! HMAC-SHA256, under the deployment's secret, over the thread, the call and the expiry. A
//! callback whose URL was forged or altered (another thread, another call, a later expiry) fails
//! the signature check; one past its expiry is refused too. The expiry is long by default
//! ([`DEFAULT_TTL`]) because subscriptions deliver events for weeks.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How long a callback URL stays valid unless configured otherwise: 90 days.
pub const DEFAULT_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// Why a callback URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRejection {
    /// The URL lacks `exp` or `sig`, or they are not well formed.
    #[error("the callback URL is not signed (missing or malformed exp/sig)")]
    Unsigned,
    /// The signature does not match the thread, call and expiry.
    #[error("the callback URL's signature does not match")]
    BadSignature,
    /// The URL's expiry has passed.
    #[error("the callback URL expired at {0} (unix seconds)")]
    Expired(i64),
}

impl UrlRejection {
    /// The HTTP status to answer with: 401 for unsigned or expired, 403 for a bad signature.
    pub fn status(&self) -> u16 {
        match self {
            UrlRejection::Unsigned | UrlRejection::Expired(_) => 401,
            UrlRejection::BadSignature => 403,
        }
    }
}

/// Why a signer could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the callback secret must be at least {MIN_SECRET_BYTES} bytes (it is {0})")]
pub struct WeakSecret(pub usize);

/// Makes and checks callback URLs.
#[derive(Clone)]
pub struct CallbackSigner {
    /// Keyed with the secret; cloned for each URL.
    keyed: HmacSha256,
    base_url: String,
    ttl: Duration,
}

impl std::fmt::Debug for CallbackSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("CallbackSigner")
            .field("base_url", &self.base_url)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl CallbackSigner {
    /// A signer for callbacks received at `base_url` (where the receiver's router is served),
    /// with [`DEFAULT_TTL`].
    pub fn new(secret: impl Into<Vec<u8>>, base_url: &str) -> Result<Self, WeakSecret> {
        let secret = secret.into();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(WeakSecret(secret.len()));
        }
        let keyed = HmacSha256::new_from_slice(&secret).map_err(|_| WeakSecret(secret.len()))?;
        Ok(Self {
            keyed,
            base_url: base_url.trim_end_matches('/').to_owned(),
            ttl: DEFAULT_TTL,
        })
    }

    /// The same signer with another validity period.
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The base URL callbacks are received at.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    fn mac(&self, thread: &str, call: &str, expires: i64) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(format!("rap-callback-v1\n{thread}\n{call}\n{expires}").as_bytes());
        mac
    }

    /// The callback URL for one call of one thread, valid from `now_unix` for the TTL. Thread
    /// and call ids are URL-safe (letters, digits, `_`, `-`).
    pub fn url_for(&self, thread: &str, call: &str, now_unix: i64) -> String {
        let expires = now_unix.saturating_add(self.ttl.as_secs() as i64);
        let sig = hex::encode(self.mac(thread, call, expires).finalize().into_bytes());
        format!(
            "{}/rap/callback/{thread}/{call}?exp={expires}&sig={sig}",
            self.base_url
        )
    }

    /// Checks the signed parts of a received callback URL.
    pub fn verify(
        &self,
        thread: &str,
        call: &str,
        expires: Option<&str>,
        sig: Option<&str>,
        now_unix: i64,
    ) -> Result<(), UrlRejection> {
        let expires: i64 = expires
            .and_then(|e| e.parse().ok())
            .ok_or(UrlRejection::Unsigned)?;
        let sig = sig
            .and_then(|s| hex::decode(s).ok())
            .ok_or(UrlRejection::Unsigned)?;
        // Constant-time comparison.
        self.mac(thread, call, expires)
            .verify_slice(&sig)
            .map_err(|_| UrlRejection::BadSignature)?;
        if now_unix > expires {
            return Err(UrlRejection::Expired(expires));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn parts(url: &str) -> (String, String, String, String) {
        let (path, query) = url.split_once('?').unwrap();
        let mut segs = path.rsplitn(3, '/');
        let call = segs.next().unwrap().to_owned();
        let thread = segs.next().unwrap().to_owned();
        let mut exp = String::new();
        let mut sig = String::new();
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=').unwrap();
            match k {
                "exp" => exp = v.to_owned(),
                "sig" => sig = v.to_owned(),
                _ => {}
            }
        }
        (thread, call, exp, sig)
    }

    #[test]
    fn a_url_verifies_only_for_its_thread_call_and_expiry() {
        let signer = CallbackSigner::new(SECRET, "http://127.0.0.1:9/").unwrap();
        let url = signer.url_for("t-1", "call-1", 1_000);
        assert!(url.starts_with("http://127.0.0.1:9/rap/callback/t-1/call-1?exp="));
        let (thread, call, exp, sig) = parts(&url);
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some(&sig), 1_000),
            Ok(())
        );
        // Altered thread, call or expiry.
        assert_eq!(
            signer.verify("t-2", &call, Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        assert_eq!(
            signer.verify(&thread, "call-2", Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        let later = (exp.parse::<i64>().unwrap() + 1).to_string();
        assert_eq!(
            signer.verify(&thread, &call, Some(&later), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        // Another deployment's secret.
        let other =
            CallbackSigner::new(b"another secret, 32 bytes or more".to_vec(), "http://x").unwrap();
        assert_eq!(
            other.verify(&thread, &call, Some(&exp), Some(&sig), 1_000),
            Err(UrlRejection::BadSignature)
        );
        // Unsigned, and expired.
        assert_eq!(
            signer.verify(&thread, &call, None, Some(&sig), 1_000),
            Err(UrlRejection::Unsigned)
        );
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some("zz"), 1_000),
            Err(UrlRejection::Unsigned)
        );
        let after = exp.parse::<i64>().unwrap() + 1;
        assert_eq!(
            signer.verify(&thread, &call, Some(&exp), Some(&sig), after),
            Err(UrlRejection::Expired(after - 1))
        );
        assert_eq!(UrlRejection::BadSignature.status(), 403);
        assert_eq!(UrlRejection::Expired(0).status(), 401);
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(
            CallbackSigner::new(b"short".to_vec(), "http://x").unwrap_err(),
            WeakSecret(5)
        );
    }
}
