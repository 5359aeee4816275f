//! The pages agents publish (the `artifact` category), kept in the stack's S3 bucket: one object
//! per key of [`infinity_library::artifact`]'s layout.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use infinity_library::artifact::{ArtifactError, Blobs};

/// Objects in an S3 bucket.
#[derive(Debug, Clone)]
pub struct S3Blobs {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Blobs {
    /// Objects in `bucket`.
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }
}

fn unavailable<E: std::fmt::Debug>(what: &str, key: &str, e: E) -> ArtifactError {
    ArtifactError::Unavailable(format!("S3 {what} {key}: {e:?}"))
}

#[async_trait]
impl Blobs for S3Blobs {
    async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<(), ArtifactError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| unavailable("put", key, e.into_service_error()))?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        let got = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        match got {
            Ok(object) => {
                let bytes = object
                    .body
                    .collect()
                    .await
                    .map_err(|e| unavailable("read", key, e))?;
                Ok(Some(bytes.into_bytes().to_vec()))
            }
            Err(err) => match err.into_service_error() {
                e if e.is_no_such_key() => Ok(None),
                e => Err(unavailable("get", key, e)),
            },
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ArtifactError> {
        let mut keys = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| unavailable("list", prefix, e.into_service_error()))?;
            keys.extend(
                page.contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_owned)),
            );
        }
        Ok(keys)
    }
}
