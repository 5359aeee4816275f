//! Configuration from the environment, and the AWS clients built once from it.

use std::time::Duration;

/// A missing or malformed environment variable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    /// A variable has a bad value.
    #[error("environment variable {name}: {reason}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Why.
        reason: String,
    },
}

/// Where the AWS host keeps things, from `INFINITY_*` variables (set by `template.yaml`, or by
/// `infra/local/env.sh` for the local stack).
#[derive(Debug, Clone)]
pub struct AwsConfig {
    /// `INFINITY_TABLE`: the DynamoDB table.
    pub table: String,
    /// `INFINITY_INPUT_QUEUE_URL`: the FIFO input queue.
    pub input_queue_url: String,
    /// `INFINITY_RELAY_QUEUE_URL`: the relay (timer) queue.
    pub relay_queue_url: String,
    /// `INFINITY_RELAY_QUEUE_ARN`: the relay queue's ARN (the target of Scheduler schedules).
    pub relay_queue_arn: String,
    /// `INFINITY_OUTPUT_QUEUE_URL`: where output events go (optional: without it, none are sent).
    pub output_queue_url: Option<String>,
    /// `INFINITY_SCHEDULE_GROUP`: the Scheduler schedule group.
    pub schedule_group: String,
    /// `INFINITY_SCHEDULER_ROLE_ARN`: the role Scheduler uses to send to the relay queue.
    pub scheduler_role_arn: String,
    /// `INFINITY_RELAY_THRESHOLD_SECONDS` (default 900): delays up to this go through the relay
    /// queue's DelaySeconds; longer ones through a Scheduler schedule.
    pub relay_threshold: Duration,
    /// `INFINITY_SCHEDULE_EARLY_SECONDS` (default 60): a schedule fires this much before the due
    /// time; the relay finishes the wait to the second.
    pub schedule_early: Duration,
    /// `INFINITY_DEDUP_TTL_DAYS` (default 30): how long processed-input markers are kept.
    pub dedup_ttl: Duration,
    /// `INFINITY_EVENT_RETENTION_DAYS` (default 7): how long the events threads show are kept
    /// for clients that resume a stream (`GET /threads/{id}/events` with `Last-Event-ID`).
    pub event_retention: Duration,
    /// `INFINITY_ARTIFACT_BUCKET`: the S3 bucket of published pages (optional: without it, the
    /// `artifact` category's tools say the host keeps no pages).
    pub artifact_bucket: Option<String>,
    /// `INFINITY_API_URL`: the stack's API function URL, where published pages are served.
    pub api_url: Option<String>,
    /// `INFINITY_VIEW_CACHE_MB` (default 32; 0 turns it off): how many bytes of threads' history
    /// a warm Lambda instance keeps between slices, so a thread's next slice reads only what is
    /// new (docs/aws.md).
    pub view_cache_bytes: usize,
    /// `INFINITY_COMPLETION_TIMEOUT_SECONDS` (default 120): the longest one model completion may
    /// take. A slice starts another completion only while this much (and a reserve for the
    /// commit) is left before the invocation's deadline; otherwise it hands itself on to a next
    /// invocation (docs/aws.md, "Slices and the function timeout").
    pub completion_timeout: Duration,
}

fn required(
    name: &'static str,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    match get(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

fn seconds(
    name: &'static str,
    default: u64,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Duration, ConfigError> {
    match get(name) {
        None => Ok(Duration::from_secs(default)),
        Some(v) if v.trim().is_empty() => Ok(Duration::from_secs(default)),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| ConfigError::Invalid {
                name,
                reason: format!("`{v}` is not a whole number of seconds"),
            }),
    }
}

fn megabytes(
    name: &'static str,
    default: usize,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<usize, ConfigError> {
    let mb = match get(name) {
        Some(v) if !v.trim().is_empty() => {
            v.trim()
                .parse::<usize>()
                .map_err(|_| ConfigError::Invalid {
                    name,
                    reason: format!("`{v}` is not a whole number of megabytes"),
                })?
        }
        _ => default,
    };
    Ok(mb.saturating_mul(1 << 20))
}

impl AwsConfig {
    /// The stack's published pages, when it keeps them (`INFINITY_ARTIFACT_BUCKET`), linked at
    /// `INFINITY_API_URL`.
    pub fn artifacts(&self, clients: &Clients) -> Option<infinity_library::artifact::Artifacts> {
        let bucket = self.artifact_bucket.clone()?;
        let blobs = crate::artifacts::S3Blobs::new(clients.s3.clone(), bucket);
        Some(infinity_library::artifact::Artifacts::new(
            std::sync::Arc::new(blobs),
            self.api_url.clone().unwrap_or_default(),
        ))
    }

    /// Reads the configuration from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let relay_threshold = seconds("INFINITY_RELAY_THRESHOLD_SECONDS", 900, &get)?;
        if relay_threshold > Duration::from_secs(900) {
            return Err(ConfigError::Invalid {
                name: "INFINITY_RELAY_THRESHOLD_SECONDS",
                reason: "SQS DelaySeconds allows at most 900".to_owned(),
            });
        }
        let completion_timeout = seconds("INFINITY_COMPLETION_TIMEOUT_SECONDS", 120, &get)?;
        if completion_timeout.is_zero() {
            return Err(ConfigError::Invalid {
                name: "INFINITY_COMPLETION_TIMEOUT_SECONDS",
                reason: "a completion needs more than 0 seconds".to_owned(),
            });
        }
        Ok(Self {
            table: required("INFINITY_TABLE", &get)?,
            input_queue_url: required("INFINITY_INPUT_QUEUE_URL", &get)?,
            relay_queue_url: required("INFINITY_RELAY_QUEUE_URL", &get)?,
            relay_queue_arn: required("INFINITY_RELAY_QUEUE_ARN", &get)?,
            output_queue_url: get("INFINITY_OUTPUT_QUEUE_URL").filter(|v| !v.trim().is_empty()),
            schedule_group: required("INFINITY_SCHEDULE_GROUP", &get)?,
            scheduler_role_arn: required("INFINITY_SCHEDULER_ROLE_ARN", &get)?,
            relay_threshold,
            schedule_early: seconds("INFINITY_SCHEDULE_EARLY_SECONDS", 60, &get)?,
            dedup_ttl: seconds("INFINITY_DEDUP_TTL_DAYS", 30, &get)? * 86_400,
            event_retention: seconds("INFINITY_EVENT_RETENTION_DAYS", 7, &get)? * 86_400,
            view_cache_bytes: megabytes("INFINITY_VIEW_CACHE_MB", 32, &get)?,
            artifact_bucket: get("INFINITY_ARTIFACT_BUCKET").filter(|v| !v.trim().is_empty()),
            api_url: get("INFINITY_API_URL").filter(|v| !v.trim().is_empty()),
            completion_timeout,
        })
    }
}

/// The SDK clients, built once per process (Lambda init) and shared.
#[derive(Debug, Clone)]
pub struct Clients {
    /// DynamoDB.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
    /// EventBridge Scheduler.
    pub scheduler: aws_sdk_scheduler::Client,
    /// S3 (published pages), path-style when an emulator serves it.
    pub s3: aws_sdk_s3::Client,
}

/// An S3 client; path-style addressing for an emulator's endpoint (moto and LocalStack serve
/// buckets as paths of one host).
fn s3_client(shared: &aws_config::SdkConfig, emulated: bool) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(shared)
            .force_path_style(emulated)
            .build(),
    )
}

impl Clients {
    /// Builds the clients from the standard AWS environment (region, credentials, and
    /// `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_<SERVICE>` for emulators).
    pub async fn from_env() -> Self {
        Self::from_env_with_endpoint(None).await
    }

    /// Like [`Clients::from_env`], with one endpoint for every service when given (LocalStack,
    /// or the `--endpoint` flag of the CLI).
    pub async fn from_env_with_endpoint(endpoint: Option<&str>) -> Self {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(url) = endpoint {
            loader = loader.endpoint_url(url);
        }
        let shared = loader.load().await;
        let emulated = endpoint.is_some()
            || ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"]
                .iter()
                .any(|v| std::env::var_os(v).is_some());
        Self {
            dynamodb: aws_sdk_dynamodb::Client::new(&shared),
            sqs: aws_sdk_sqs::Client::new(&shared),
            scheduler: aws_sdk_scheduler::Client::new(&shared),
            s3: s3_client(&shared, emulated),
        }
    }
}

impl Clients {
    /// Clients with explicit endpoints per service, region and static credentials: for the
    /// local emulators in tests and tools, without touching the process environment. S3 is
    /// reached where SQS is (both emulators serve them on one port).
    pub async fn for_endpoints(region: &str, dynamodb: &str, sqs: &str, scheduler: &str) -> Self {
        let credentials = aws_sdk_dynamodb::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "infinity-local",
        );
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_owned()))
            .credentials_provider(credentials)
            .load()
            .await;
        Self {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(
                aws_sdk_dynamodb::config::Builder::from(&shared)
                    .endpoint_url(dynamodb)
                    .build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&shared)
                    .endpoint_url(sqs)
                    .build(),
            ),
            scheduler: aws_sdk_scheduler::Client::from_conf(
                aws_sdk_scheduler::config::Builder::from(&shared)
                    .endpoint_url(scheduler)
                    .build(),
            ),
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(&shared)
                    .endpoint_url(sqs)
                    .force_path_style(true)
                    .build(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    const FULL: &[(&str, &str)] = &[
        ("INFINITY_TABLE", "t"),
        ("INFINITY_INPUT_QUEUE_URL", "http://q/in.fifo"),
        ("INFINITY_RELAY_QUEUE_URL", "http://q/relay"),
        ("INFINITY_RELAY_QUEUE_ARN", "arn:aws:sqs:us-east-1:1:relay"),
        ("INFINITY_SCHEDULE_GROUP", "g"),
        ("INFINITY_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/r"),
    ];

    #[test]
    fn names_the_missing_variable() {
        let err = AwsConfig::from_lookup(env(&FULL[1..])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable INFINITY_TABLE is not set"
        );
    }

    #[test]
    fn defaults_and_bad_numbers() {
        let c = AwsConfig::from_lookup(env(FULL)).unwrap();
        assert_eq!(c.relay_threshold, Duration::from_secs(900));
        assert!(c.output_queue_url.is_none());
        let mut bad = FULL.to_vec();
        bad.push(("INFINITY_SCHEDULE_EARLY_SECONDS", "soon"));
        let err = AwsConfig::from_lookup(env(&bad)).unwrap_err().to_string();
        assert!(
            err.contains("INFINITY_SCHEDULE_EARLY_SECONDS") && err.contains("soon"),
            "{err}"
        );
        let mut big = FULL.to_vec();
        big.push(("INFINITY_RELAY_THRESHOLD_SECONDS", "3600"));
        assert!(AwsConfig::from_lookup(env(&big)).is_err());
    }
}
