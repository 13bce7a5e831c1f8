//! Images to other engines without a registry: the image is saved on this engine
//! (`docker save`, streamed, never written to disk) straight into a load on the other engine
//! (`docker load`), typically a Swarm node's. Save and load keep the image's id (the digest of
//! its config), so a service that names the image by id finds it on that node; the tag comes
//! along too. An engine that holds the id already gets nothing but the tag.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bollard::query_parameters::{ImportImageOptions, TagImageOptions};
use futures::StreamExt;

use crate::SandboxError;
use crate::docker::{DockerBackend, api_error};

/// The longest one image's save and load may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What [`distribute`] did on the target engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distributed {
    /// The target held the image (by id) already; its tag was added where missing.
    Present { image_id: String },
    /// The image was sent and loaded.
    Sent {
        image_id: String,
        bytes: u64,
        elapsed: Duration,
    },
}

impl Distributed {
    pub fn image_id(&self) -> &str {
        match self {
            Self::Present { image_id } | Self::Sent { image_id, .. } => image_id,
        }
    }
}

/// Makes `reference` (a tag or id on `from`) exist on `to` with the same id and tag.
pub async fn distribute(
    from: &DockerBackend,
    to: &DockerBackend,
    reference: &str,
) -> Result<Distributed, SandboxError> {
    let local = match from.docker.inspect_image(reference).await {
        Ok(i) => i,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Err(SandboxError::ImageMissing(reference.to_owned())),
        Err(e) => return Err(api_error(&from.endpoint, "inspect_image", e)),
    };
    let image_id = local.id.unwrap_or_default();
    let fail = |detail: String| SandboxError::ImageTransfer {
        image: reference.to_owned(),
        to: to.endpoint.clone(),
        detail,
    };
    if image_id.is_empty() {
        return Err(fail("the local engine reports no id for the image".into()));
    }
    if to.docker.inspect_image(&image_id).await.is_ok() {
        tag_like(to, &image_id, reference).await?;
        return Ok(Distributed::Present { image_id });
    }
    let started = Instant::now();
    // A large image to a slow node takes longer than the client's default request timeout.
    let (source, target) = (
        from.docker.clone().with_timeout(TRANSFER_TIMEOUT),
        to.docker.clone().with_timeout(TRANSFER_TIMEOUT),
    );
    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    let saved = source.export_image(reference).map(move |chunk| {
        if let Ok(b) = &chunk {
            counter.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        chunk
    });
    let mut loading = target.import_image_stream(
        ImportImageOptions {
            quiet: true,
            ..Default::default()
        },
        saved,
        None,
    );
    while let Some(item) = loading.next().await {
        if let Err(e) = item {
            return Err(fail(format!(
                "loading failed after {} bytes: {e}",
                sent.load(Ordering::Relaxed)
            )));
        }
    }
    match to.docker.inspect_image(&image_id).await {
        Ok(_) => {}
        Err(e) => {
            return Err(fail(format!(
                "the load finished but the engine has no image {image_id} ({e}); a save and load keep an image's id, so the engine changed it"
            )));
        }
    }
    tag_like(to, &image_id, reference).await?;
    Ok(Distributed::Sent {
        image_id,
        bytes: sent.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    })
}

/// Tags `image_id` as `reference` on `engine` when `reference` is a `repo:tag` it lacks.
async fn tag_like(
    engine: &DockerBackend,
    image_id: &str,
    reference: &str,
) -> Result<(), SandboxError> {
    let Some((repo, tag)) = split_tag(reference) else {
        return Ok(());
    };
    if engine
        .docker
        .inspect_image(reference)
        .await
        .is_ok_and(|i| i.id.as_deref() == Some(image_id))
    {
        return Ok(());
    }
    engine
        .docker
        .tag_image(
            image_id,
            Some(TagImageOptions {
                repo: Some(repo.to_owned()),
                tag: Some(tag.to_owned()),
            }),
        )
        .await
        .map_err(|e| api_error(&engine.endpoint, "tag_image", e))
}

/// `repo:tag` → (`repo`, `tag`); `None` for an id (`sha256:…`) or a reference without a tag.
fn split_tag(reference: &str) -> Option<(&str, &str)> {
    if reference.starts_with("sha256:") {
        return None;
    }
    let (repo, tag) = reference.rsplit_once(':')?;
    // `host:5000/repo` has a colon in its host part, not a tag.
    (!tag.contains('/') && !repo.is_empty() && !tag.is_empty()).then_some((repo, tag))
}

#[cfg(test)]
mod tests {
    use super::split_tag;

    #[test]
    fn tags_split_and_ids_do_not() {
        assert_eq!(
            split_tag("research-bench/python:0cc1bbe34064"),
            Some(("research-bench/python", "0cc1bbe34064"))
        );
        assert_eq!(split_tag("sha256:abcdef"), None);
        assert_eq!(split_tag("registry:5000/repo"), None);
        assert_eq!(split_tag("plain"), None);
    }
}
