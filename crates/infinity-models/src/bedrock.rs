//! The Bedrock Converse adapter, not streamed.
//!
//! The request is written as bytes straight from the history (`request.rs`, as the Anthropic
//! body is), POSTed to `/model/{modelId}/converse`, signed with SigV4 for each attempt
//! (`signing.rs`) and sent through the shared retries ([`crate::transport`]). Credentials come
//! from the standard AWS chain, on Lambda the function's role; a Bedrock API key
//! (`AWS_BEARER_TOKEN_BEDROCK`) is sent instead of a signature when one is set.

mod request;
mod response;

use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_types::service_config::ServiceConfigKey;
use aws_types::SdkConfig;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{RequestBuilder, Url};

use crate::model_info;
use crate::names::restore_tool_names;
use crate::sigv4::{signature_headers, CachedCredentials, Signable};
use crate::transport::{next_piece, send_with_retries, Attempt, RequestPolicy};

/// The name Bedrock's requests are signed for.
const SIGNING_NAME: &str = "bedrock";

/// What to do when a request cannot be signed or sent anywhere.
const CHECK_THE_ENVIRONMENT: &str = "check the AWS credentials and region: AWS_PROFILE or \
    AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and AWS_REGION";

/// Where Bedrock is and how to authenticate to it.
#[derive(Clone)]
pub struct BedrockConfig {
    /// The region requests go to and are signed for (`AWS_REGION`, or the profile's). Without
    /// one, each request fails and says so.
    pub region: Option<String>,
    /// Where requests go instead of `https://bedrock-runtime.{region}.amazonaws.com`
    /// (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL`, or the profile's).
    pub endpoint_url: Option<String>,
    /// Where the credentials to sign with come from. Without a provider or a bearer token, each
    /// request fails and says so.
    pub credentials: Option<SharedCredentialsProvider>,
    /// A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`), sent instead of a signature; never
    /// logged.
    pub bearer_token: Option<String>,
    /// Retries and timeouts.
    pub request: RequestPolicy,
}

impl std::fmt::Debug for BedrockConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockConfig")
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .field("credentials", &self.credentials.is_some())
            .field("bearer_token", &self.bearer_token.is_some())
            .field("request", &self.request)
            .finish()
    }
}

impl BedrockConfig {
    /// From the standard AWS environment: variables, profile, and on AWS the instance's or the
    /// function's role.
    pub async fn from_env() -> Self {
        let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self::from_sdk_config(&shared)
    }

    /// From a loaded AWS configuration, read as the Bedrock Runtime SDK client reads it: its
    /// own endpoint setting before the global one.
    pub fn from_sdk_config(shared: &SdkConfig) -> Self {
        let service_setting = |service_id: &str, env: &str, profile: &str| {
            let key = ServiceConfigKey::builder()
                .service_id(service_id)
                .env(env)
                .profile(profile)
                .build()
                .ok()?;
            shared.service_config()?.load_config(key)
        };
        let endpoint_url = service_setting("Bedrock Runtime", "AWS_ENDPOINT_URL", "endpoint_url")
            .or_else(|| shared.endpoint_url().map(str::to_owned));
        Self {
            region: shared.region().map(|r| r.to_string()),
            endpoint_url,
            credentials: shared.credentials_provider(),
            bearer_token: service_setting("bedrock", "AWS_BEARER_TOKEN", "")
                .filter(|t| !t.trim().is_empty()),
            request: RequestPolicy::default(),
        }
    }
}

/// A model on Amazon Bedrock, through the Converse API.
pub struct BedrockModel {
    name: String,
    model: String,
    max_tokens: u32,
    context_window: u32,
    prices: Option<infinity_agent_core::cost::Prices>,
    /// The model's Converse URL and the region it is signed for, or why there is none.
    target: Result<(Url, String), String>,
    auth: Auth,
    request: RequestPolicy,
    http: reqwest::Client,
}

/// How requests are authenticated.
enum Auth {
    Signed(CachedCredentials),
    Bearer(String),
    Missing,
}

impl std::fmt::Debug for BedrockModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockModel")
            .field("model", &self.model)
            .field("url", &self.target.as_ref().map(|(url, _)| url.as_str()))
            .finish_non_exhaustive()
    }
}

impl BedrockModel {
    /// A model by Bedrock model id (or inference profile id or ARN).
    pub fn new(model: &str, config: BedrockConfig) -> Self {
        // Bedrock ids embed the vendor's model name: `anthropic.claude-sonnet-4-5-...`.
        let vendor_model = model.rsplit('.').next().unwrap_or(model);
        let info = model_info::lookup("anthropic", vendor_model);
        let auth = match (config.bearer_token, config.credentials) {
            (Some(token), _) => Auth::Bearer(token),
            (None, Some(provider)) => Auth::Signed(CachedCredentials::new(provider)),
            (None, None) => Auth::Missing,
        };
        Self {
            name: format!("bedrock:{model}"),
            model: model.to_owned(),
            max_tokens: info.max_output_tokens,
            context_window: info.context_window,
            prices: info.prices,
            target: converse_url(config.region, config.endpoint_url.as_deref(), model),
            auth,
            request: config.request,
            http: reqwest::Client::new(),
        }
    }

    /// A model configured from the standard AWS environment ([`BedrockConfig::from_env`]).
    pub async fn from_env(model: &str) -> Self {
        Self::new(model, BedrockConfig::from_env().await)
    }

    /// The Converse body for a completion, as the adapter sends it (public for tests and the
    /// request benchmark).
    pub fn request_body(&self, request: &CompletionRequest<'_>) -> Vec<u8> {
        request::body(self.max_tokens, request)
    }

    /// The first attempt's request for a completion, signed and ready to send (public for the
    /// request benchmark; [`ModelProvider::complete`] signs each attempt anew).
    pub async fn signed_request(
        &self,
        request: &CompletionRequest<'_>,
    ) -> Result<reqwest::Request, ModelError> {
        let (url, region) = self.target()?;
        let body = bytes::Bytes::from(self.request_body(request));
        let authentication = self.authentication().await?;
        self.attempt(url, region, &body, &authentication)?
            .build()
            .map_err(|e| ModelError::terminal(ModelErrorKind::Other, format!("bedrock: {e}")))
    }

    fn target(&self) -> Result<(&Url, &str), ModelError> {
        match &self.target {
            Ok((url, region)) => Ok((url, region.as_str())),
            Err(why) => Err(ModelError::terminal(
                ModelErrorKind::Refused,
                format!("bedrock: {why} ({CHECK_THE_ENVIRONMENT})"),
            )),
        }
    }

    /// What authenticates this completion's attempts.
    async fn authentication(&self) -> Result<Authentication<'_>, ModelError> {
        match &self.auth {
            Auth::Bearer(token) => Ok(Authentication::Bearer(token)),
            Auth::Signed(cache) => cache.get().await.map(Authentication::Signed).map_err(|e| {
                let why = format!("bedrock: no AWS credentials: {}", causes(&e));
                // A provider that timed out may answer next time; one with nothing to give will
                // not, however often it is asked.
                match e {
                    CredentialsError::ProviderTimedOut(_) => {
                        ModelError::retryable(ModelErrorKind::Credentials, why)
                    }
                    _ => ModelError::terminal(
                        ModelErrorKind::Credentials,
                        format!("{why} ({CHECK_THE_ENVIRONMENT})"),
                    ),
                }
            }),
            Auth::Missing => Err(ModelError::terminal(
                ModelErrorKind::Credentials,
                format!("bedrock: no AWS credentials were found ({CHECK_THE_ENVIRONMENT})"),
            )),
        }
    }

    /// One attempt's request, signed now.
    fn attempt(
        &self,
        url: &Url,
        region: &str,
        body: &bytes::Bytes,
        authentication: &Authentication<'_>,
    ) -> Result<RequestBuilder, ModelError> {
        let request = self
            .http
            .post(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(body.clone());
        match authentication {
            Authentication::Bearer(token) => Ok(request.bearer_auth(token)),
            Authentication::Signed(credentials) => {
                // Signed: the method, the url (its host) and the body, as the SDKs sign them.
                let signable = Signable {
                    method: "POST",
                    url: url.as_str(),
                    headers: &[],
                    body,
                };
                let signed = signature_headers(
                    credentials,
                    region,
                    SIGNING_NAME,
                    signable,
                    SystemTime::now(),
                )
                .map_err(|why| {
                    ModelError::terminal(
                        ModelErrorKind::Credentials,
                        format!("bedrock: cannot sign the request: {why}"),
                    )
                })?;
                Ok(signed.into_iter().fold(request, |request, (name, value)| {
                    request.header(name, value)
                }))
            }
        }
    }
}

/// What authenticates one completion's attempts.
enum Authentication<'a> {
    Signed(aws_credential_types::Credentials),
    Bearer(&'a str),
}

/// The Converse URL of `model`: at the endpoint when one is set, else at Bedrock's in `region`.
fn converse_url(
    region: Option<String>,
    endpoint: Option<&str>,
    model: &str,
) -> Result<(Url, String), String> {
    let region = region
        .filter(|r| !r.trim().is_empty())
        .ok_or("no AWS region is set")?;
    let endpoint = match endpoint.map(str::trim).filter(|e| !e.is_empty()) {
        Some(endpoint) => endpoint.trim_end_matches('/').to_owned(),
        None => {
            let domain = if region.starts_with("cn-") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            format!("https://bedrock-runtime.{region}.{domain}")
        }
    };
    let url = format!("{endpoint}/model/{}/converse", path_segment(model));
    match Url::parse(&url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
            Ok((url, region))
        }
        Ok(_) => Err(format!(
            "the Bedrock endpoint `{endpoint}` is not an http(s) URL with a host"
        )),
        Err(e) => Err(format!(
            "the Bedrock endpoint `{endpoint}` is not a URL: {e}"
        )),
    }
}

/// `text` as one segment of a URL's path: everything but letters, digits and `-._~`
/// percent-encoded (a model id's `:`, an ARN's `/`).
fn path_segment(text: &str) -> String {
    use std::fmt::Write;
    let mut segment = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            segment.push(char::from(byte));
        } else {
            // Writing to a `String` cannot fail.
            _ = write!(segment, "%{byte:02X}");
        }
    }
    segment
}

/// An error and its causes on one line.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut causes = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        source = cause.source();
    }
    causes.join(": ")
}

#[async_trait]
impl ModelProvider for BedrockModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.context_window
    }

    fn prices(&self) -> Option<infinity_agent_core::cost::Prices> {
        self.prices
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        let (url, region) = self.target()?;
        let body = bytes::Bytes::from(self.request_body(&request));
        let authentication = self.authentication().await?;
        send_with_retries(
            "bedrock",
            &self.request,
            || self.attempt(url, region, &body, &authentication),
            response::failure,
            |reply| async move {
                let mut pieces = reply.bytes_stream();
                let mut body = Vec::new();
                while let Some(piece) = next_piece("bedrock", &self.request, &mut pieces).await? {
                    body.extend_from_slice(&piece);
                }
                // A reply cut short or garbled on the way may come whole next time.
                response::completion(&body)
                    .map_err(|why| Attempt::Retry(ModelErrorKind::BadAnswer, why, None))
            },
        )
        .await
        .map(|mut completion| {
            restore_tool_names(&request, &mut completion.tool_calls);
            completion
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aws_configuration_gives_the_region_endpoint_and_credentials() {
        let credentials = aws_credential_types::Credentials::new("AKID", "SECRET", None, None, "t");
        let shared = SdkConfig::builder()
            .region(aws_config::Region::new("eu-central-1"))
            .endpoint_url("http://localhost:4566")
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build();
        let config = BedrockConfig::from_sdk_config(&shared);
        assert_eq!(config.region.as_deref(), Some("eu-central-1"));
        assert_eq!(
            config.endpoint_url.as_deref(),
            Some("http://localhost:4566")
        );
        assert!(config.credentials.is_some());
        assert!(config.bearer_token.is_none());
    }

    #[test]
    fn model_ids_are_one_path_segment() {
        assert_eq!(
            path_segment("anthropic.claude-sonnet-4-5-v1:0"),
            "anthropic.claude-sonnet-4-5-v1%3A0"
        );
        assert_eq!(
            path_segment("arn:aws:bedrock:us-east-1:123:inference-profile/us.x"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x"
        );
        assert_eq!(path_segment("ü ~"), "%C3%BC%20~");
    }

    #[test]
    fn the_url_is_bedrocks_in_the_region_or_at_the_endpoint() {
        let url = |region: Option<&str>, endpoint: Option<&str>| {
            converse_url(region.map(str::to_owned), endpoint, "m:0").map(|(url, _)| url.to_string())
        };
        assert_eq!(
            url(Some("eu-west-1"), None).unwrap(),
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/m%3A0/converse"
        );
        assert_eq!(
            url(Some("cn-north-1"), None).unwrap(),
            "https://bedrock-runtime.cn-north-1.amazonaws.com.cn/model/m%3A0/converse"
        );
        assert_eq!(
            url(Some("us-east-1"), Some("http://127.0.0.1:4566/")).unwrap(),
            "http://127.0.0.1:4566/model/m%3A0/converse"
        );
        assert!(url(None, Some("http://127.0.0.1:4566"))
            .unwrap_err()
            .contains("region"));
        assert!(url(Some("us-east-1"), Some("localhost"))
            .unwrap_err()
            .contains("`localhost`"));
    }
}
