//! The engine's settings as a front end gets them: built by `commands` from the flags and the
//! environment, finished once connected, because two of them only the connection can tell (the
//! Lease's default namespace; the notification URLs kept in Secrets).

use super::config::{EngineConfig, NotifyConfig, NotifySecretRef, NotifyTarget, SecretKeyRef};

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
        let cluster = self.cluster_for(&targets, context)?;
        Ok(NotifyConfig { targets, signing, cluster, ..NotifyConfig::default() })
    }

    /// The cluster's name in every message (`--cluster-name`, else `context`'s made plain), or why
    /// an incident receiver among `targets` needs one given.
    pub fn cluster_for(&self, targets: &[NotifyTarget], context: &str) -> Result<String, String> {
        let (cluster, made_plain) = match &self.notify.cluster_name {
            Some(name) => (name.clone(), false),
            None => {
                let plain = cluster_name_of_context(context);
                let changed = plain != context;
                (plain, changed)
            }
        };
        // Incident keys carry the cluster's name: two clusters both called `in-cluster` (a Pod's
        // default), or two contexts made plain alike (two accounts' `…:cluster/prod`), sharing a
        // routing key would close each other's incidents.
        let why = if cluster == crate::cluster::IN_CLUSTER_CONTEXT {
            Some("every cluster without one is called `in-cluster`".to_string())
        } else if made_plain {
            Some(format!("the context's name is not a plain one, and made plain (`{cluster}`) another may be the same"))
        } else {
            None
        };
        if let Some(why) = why
            && let Some(target) = targets.iter().find(|target| target.format.takes_incidents_only())
        {
            return Err(format!(
                "receiver {} ({}) needs --cluster-name (or $CAPDECK_CLUSTER_NAME, the chart's clusterName): its \
                 incident keys carry the cluster's name, and {why}",
                target.name,
                target.format.as_str()
            ));
        }
        Ok(cluster)
    }
}

/// The cluster's name when `--cluster-name` is not given: the kube context's, made what
/// `--cluster-name` takes (1 to 63 letters, digits, `-`, `_`, `.`), since it goes into every
/// message and incident key. After its last `/` (an EKS context is the cluster's ARN, whose
/// account number and region a chat channel need not see); any other character becomes `-`.
pub fn cluster_name_of_context(context: &str) -> String {
    let last = context.rsplit('/').find(|segment| !segment.is_empty()).unwrap_or(context);
    let plain: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(63)
        .collect();
    let plain = plain.trim_matches('-');
    if plain.is_empty() { "cluster".to_string() } else { plain.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_urls(urls: &[&str], cluster_name: Option<&str>) -> EngineSettings {
        EngineSettings {
            base: EngineConfig::default(),
            lease_namespace: None,
            delay_warning: None,
            notify: NotifySources {
                urls: urls.iter().map(ToString::to_string).collect(),
                cluster_name: cluster_name.map(str::to_string),
                ..NotifySources::default()
            },
        }
    }

    /// In a Pod (context `in-cluster`) an incident receiver needs a cluster name; a chat receiver
    /// or a named cluster does not. Nothing here reads a Secret: the client is never asked.
    #[tokio::test]
    async fn an_incident_receiver_in_a_pod_needs_a_cluster_name() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let pagerduty = "oncall@pagerduty=ABCDEFGHIJKLMNOPQRSTUVWXYZ012345";
        let in_pod = crate::cluster::IN_CLUSTER_CONTEXT;
        let error = with_urls(&[pagerduty], None).notify_config(&client, in_pod).await.expect_err("refused");
        assert!(error.contains("oncall (pagerduty) needs --cluster-name"), "{error}");
        let named = with_urls(&[pagerduty], Some("prod-eu10")).notify_config(&client, in_pod).await.expect("named");
        assert_eq!(named.cluster, "prod-eu10");
        let chat = with_urls(&["https://hooks.slack.com/services/T/B/x"], None).notify_config(&client, in_pod).await;
        assert_eq!(chat.expect("chat").cluster, in_pod);
        assert!(with_urls(&[pagerduty], None).notify_config(&client, "kind-dev").await.is_ok(), "a kube context");
        // Two accounts' `…:cluster/prod` would both be `prod`: a plain name is asked for.
        let arn = "arn:aws:eks:eu-west-1:111111111111:cluster/prod";
        let error = with_urls(&[pagerduty], None).notify_config(&client, arn).await.expect_err("made plain");
        assert!(error.contains("needs --cluster-name") && error.contains("`prod`"), "{error}");
        let chat = with_urls(&["https://hooks.slack.com/services/T/B/x"], None).notify_config(&client, arn).await;
        assert_eq!(chat.expect("a chat receiver takes the plain name").cluster, "prod");
    }

    /// A context's name goes into every message: made plain, never with markup or an ARN's account.
    #[test]
    fn a_context_name_becomes_a_plain_cluster_name() {
        assert_eq!(cluster_name_of_context("prod-eu10"), "prod-eu10");
        assert_eq!(
            cluster_name_of_context("arn:aws:eks:eu-west-1:123456789012:cluster/prod <!channel> *x*"),
            "prod---channel---x"
        );
        assert_eq!(cluster_name_of_context("gke_project_europe-west1_prod"), "gke_project_europe-west1_prod");
        assert_eq!(cluster_name_of_context("kind-ü"), "kind");
        assert_eq!(cluster_name_of_context("<>"), "cluster");
        assert_eq!(cluster_name_of_context("team/prod/"), "prod");
        assert_eq!(cluster_name_of_context(&"x".repeat(100)).len(), 63);
        assert_eq!(cluster_name_of_context(crate::cluster::IN_CLUSTER_CONTEXT), crate::cluster::IN_CLUSTER_CONTEXT);
    }
}
