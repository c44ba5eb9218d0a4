//! The engine's settings as a front end gets them: built by `commands` from the flags and the
//! environment, finished once connected, because two of them only the connection can tell (the
//! Lease's default namespace; the notification URLs kept in Secrets).

use super::config::{EngineConfig, NotifyConfig, NotifySecretRef, SecretKeyRef};

/// Everything the engine is told before it connects.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// The configuration but for its Lease's namespace (when not given) and its notifications.
    pub base: EngineConfig,
    /// The Lease's namespace; `None`: the connection's default namespace, as kubectl's -n.
    pub lease_namespace: Option<String>,
    /// What to say about a bad `$ROLLOUT_DELAY` (the window fell back to 1h).
    pub delay_warning: Option<String>,
    pub notify: NotifySources,
}

/// Where the notification receivers come from: `--notify` URLs and `--notify-secret` keys.
#[derive(Clone, Debug, Default)]
pub struct NotifySources {
    pub urls: Vec<String>,
    pub secrets: Vec<NotifySecretRef>,
    /// `--notify-signing-secret`: the key the generic JSON webhooks are signed with.
    pub signing: Option<SecretKeyRef>,
    /// `--cluster-name`; `None`: the kube context's name.
    pub cluster_name: Option<String>,
}

impl NotifySources {
    /// Whether any receiver was given.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.secrets.is_empty()
    }
}

impl EngineSettings {
    /// The configuration for a connection whose default namespace is `default_namespace`, and
    /// the `$ROLLOUT_DELAY` warning to say, if any.
    pub fn config(&self, default_namespace: &str) -> (EngineConfig, Option<String>) {
        let mut config = self.base.clone();
        config.lease.namespace = self.lease_namespace.clone().unwrap_or_else(|| default_namespace.to_string());
        (config, self.delay_warning.clone())
    }

    /// The notification settings: `--notify` URLs checked, `--notify-secret` keys read (with
    /// `client`), the cluster named after `context` unless `--cluster-name` says otherwise.
    pub async fn notify_config(&self, client: &kube::Client, context: &str) -> Result<NotifyConfig, String> {
        let targets = super::notify::targets(client, &self.notify.urls, &self.notify.secrets).await?;
        let signing = match &self.notify.signing {
            Some(reference) => Some(super::notify::signing_key(client, reference).await?),
            None => None,
        };
        Ok(NotifyConfig {
            targets,
            signing,
            cluster: self.notify.cluster_name.clone().unwrap_or_else(|| context.to_string()),
            ..NotifyConfig::default()
        })
    }
}
