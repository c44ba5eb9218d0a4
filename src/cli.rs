//! The command line: clap's types only. The derive structs and enums, their value parsers, and
//! `parse_checked` with the flag table it walks (`FlagGroup`, `FrontEnd`), which checks a command
//! line against these same definitions so that a flag nothing would use is a usage error (exit 2)
//! before anything runs. Reading the environment, files and Secrets, and building each front
//! end's config from these types, is `commands`' work.

use std::path::PathBuf;

/// Completion of a batch action's BATCH: the batches that action accepts.
pub mod complete;

use clap::{Args, Parser, Subcommand};

use crate::cluster::ClusterTarget;
use crate::engine::config::{ApprovalPolicy, EngineMode};
use crate::output::OutputArgs;

mod parse;
use parse::{
    go_duration_text, non_blank, not_used_here, parse_change_windows, parse_instant, parse_listen_addr,
    parse_object_name, parse_rotation, parse_synthetic, parse_write_qps, top_level_flag_after_subcommand,
};

/// `--deny`'s rule, checked by the sandbox's parser; a build without the sandbox keeps the text
/// (and refuses `capdeck sandbox` itself).
#[cfg(feature = "sandbox")]
pub type DenyRule = crate::sandbox::DenyRule;
#[cfg(not(feature = "sandbox"))]
pub type DenyRule = String;

/// `capdeck -V` and `capdeck version`: the release and the commit it was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("CAPDECK_GIT_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "capdeck",
    version = VERSION,
    about = "Operations console and credential-rollout engine for SAP CAP Operator workloads",
    long_about = "capdeck shows CAPApplications, versions, tenants, tenant operations, pending credential \
rotation batches and rollout progress, and restarts Deployments when their BTP service credential \
Secrets rotate (batched, approvable, paced).\n\n\
Without a subcommand capdeck opens the console over the current kubeconfig context, with the engine \
attached as an observer (`--engine lead` lets it lead; the header names the engine that leads). `capdeck --demo` opens it on an \
embedded sandbox cluster instead: no cluster needed.",
    after_help = "Console keys: ? help, : command (:apps :versions :tenants :ops :batches :rollouts :events \
:fleet :ns :ctx :theme :q), / filter, Enter drill down, a approve, F force, h hold/release, x cancel, q quit.\n\
Config: $XDG_CONFIG_HOME/capdeck/config.toml (theme, readonly, [keys]); logs: $XDG_STATE_HOME/capdeck/.\n\
Exit codes: 0 ok, 1 failure, 2 usage error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
    /// The same as `capdeck daemon` (kept for the Helm chart and scripts written before it): run
    /// headless in the cluster as the rollout operator, with the engine flags given beside it
    #[arg(long)]
    pub daemon: bool,
    /// With --daemon: where it serves /healthz, /readyz and /metrics
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080", env = "CAPDECK_HEALTH_ADDR", value_parser = parse_listen_addr)]
    pub health_addr: std::net::SocketAddr,
    /// Where `--readonly` came from, when it is on (set by `parse_checked`).
    #[arg(skip)]
    pub readonly_from: Option<ReadonlyFrom>,
}

/// What runs: each front end uses some groups of the top-level flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    Console,
    Daemon,
    Subcommand,
}

/// The top-level flags by the struct that defines them (derived from the clap definitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagGroup {
    /// `EngineArgs`: the engine of the console and the daemon.
    Engine,
    /// `ConsoleArgs`, but for read-only and the config file (which say "never write").
    Console,
    /// `--readonly` and `--config`: every front end honours read-only.
    Everywhere,
    /// `--daemon` and `--health-addr`.
    Daemon,
    /// `--help`, `--version` and the cluster flags (checked apart).
    Other,
}

impl FlagGroup {
    pub fn of(id: &str) -> Self {
        fn ids<A: clap::Args>() -> Vec<String> {
            A::augment_args(clap::Command::new("ids")).get_arguments().map(|arg| arg.get_id().to_string()).collect()
        }
        if id == "readonly" || id == "config" {
            Self::Everywhere
        } else if ids::<EngineArgs>().iter().any(|known| known == id) {
            Self::Engine
        } else if ids::<ConsoleArgs>().iter().any(|known| known == id) {
            Self::Console
        } else if id == "daemon" || id == "health_addr" {
            Self::Daemon
        } else {
            Self::Other
        }
    }
}

impl FrontEnd {
    /// Which flag groups this front end uses (the refusals follow this table).
    pub fn uses(self, group: FlagGroup) -> bool {
        matches!(
            (self, group),
            (_, FlagGroup::Everywhere | FlagGroup::Other)
                | (Self::Console, FlagGroup::Engine | FlagGroup::Console)
                | (Self::Daemon, FlagGroup::Engine | FlagGroup::Daemon)
        )
    }
}

/// Which of clap's sources turned `--readonly` on: the command line or `$CAPDECK_READONLY`
/// (`commands` adds the config file). Every write says which, and how to lift it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadonlyFrom {
    Flag,
    Env,
}

impl ReadonlyFrom {
    /// `--readonly was given`, and how to lift it.
    pub fn describe(self) -> (String, String) {
        match self {
            Self::Flag => ("--readonly was given".into(), "run it without --readonly".into()),
            Self::Env => (
                format!(
                    "CAPDECK_READONLY={} is set in the environment",
                    std::env::var("CAPDECK_READONLY").unwrap_or_else(|_| "true".into())
                ),
                "unset CAPDECK_READONLY (or set it to false)".into(),
            ),
        }
    }
}

/// The name kubectl runs capdeck's plugin binary by (`kubectl capdeck`), without its `.exe`.
pub const KUBECTL_PLUGIN: &str = "kubectl-capdeck";

/// How the program was invoked, from `argv[0]`: `kubectl capdeck` when it runs as kubectl's
/// plugin binary `kubectl-capdeck` (kubectl passes the plugin's arguments through unchanged, so
/// only the name in help, usage and errors differs); else `None` (clap takes argv[0]'s file name).
pub fn invoked_as(argv0: Option<&std::ffi::OsStr>) -> Option<&'static str> {
    let file = std::path::Path::new(argv0?).file_name()?.to_str()?;
    (file.strip_suffix(std::env::consts::EXE_SUFFIX) == Some(KUBECTL_PLUGIN)).then_some("kubectl capdeck")
}

/// The name the user typed, for the commands a message suggests: `capdeck` or `kubectl capdeck`.
fn invoked_name(command: &clap::Command) -> &str {
    command.get_bin_name().unwrap_or("capdeck")
}

impl Cli {
    /// The command tree, named as invoked (`kubectl capdeck` as kubectl's plugin).
    pub fn command_as(argv0: Option<&std::ffi::OsStr>) -> clap::Command {
        use clap::CommandFactory as _;
        let command = Self::command();
        match invoked_as(argv0) {
            Some(name) => command.bin_name(name),
            None => command,
        }
    }

    /// Parse, including the checks clap derive cannot express (usage errors exit 2).
    pub fn parse_checked<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches as _;
        use clap::parser::ValueSource;
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let command = Self::command_as(args.first().map(std::ffi::OsString::as_os_str));
        let me = invoked_name(&command).to_string();
        let matches = match command.clone().try_get_matches_from(&args) {
            Ok(matches) => matches,
            Err(error) => return Err(top_level_flag_after_subcommand(&command, &args, &error).unwrap_or(error)),
        };
        let mut cli = Self::from_arg_matches(&matches)?;
        let usage = |message: String| command.clone().error(clap::error::ErrorKind::ArgumentConflict, message);
        cli.readonly_from = match matches.value_source("readonly") {
            Some(ValueSource::CommandLine) => Some(ReadonlyFrom::Flag),
            Some(ValueSource::EnvVariable) if cli.console.readonly => Some(ReadonlyFrom::Env),
            _ => None,
        };
        // `capdeck daemon` is a subcommand like any other: the top-level engine flags (the
        // console's) are refused before it; `--daemon` takes them beside it.
        let runs = match (&cli.command, cli.daemon) {
            (Some(_), _) => FrontEnd::Subcommand,
            (None, true) => FrontEnd::Daemon,
            (None, false) => FrontEnd::Console,
        };
        // Every flag given on the command line is used by what runs, or refused with where it
        // belongs (flags from the environment are settings, never refused).
        if let Some(message) = misplaced_flag(&command, &matches, runs, cli.daemon) {
            return Err(usage(message));
        }
        // Cluster flags are global: a subcommand that never reaches a cluster refuses them.
        if let Some(message) = cli.command.as_ref().and_then(|given| unused_cluster_flag(&command, &matches, given)) {
            return Err(usage(message));
        }
        // The console only: a read-only daemon is refused as a write (exit 1, `refuse_if_readonly`).
        if let Some(from) = cli.readonly_from
            && cli.engine.mode == EngineMode::Lead
            && runs == FrontEnd::Console
        {
            let (source, _) = from.describe();
            return Err(usage(format!(
                "read-only ({source}) never writes, and --engine lead would write: choose one (the console \
                 observes when read-only)"
            )));
        }
        if cli.daemon && cli.command.is_some() {
            return Err(usage("--daemon cannot be combined with a subcommand".into()));
        }
        // The cluster flags are global: `-n x daemon -A` reaches clap as two places, not a conflict.
        if cli.cluster.namespace.is_some() && cli.cluster.all_namespaces {
            return Err(usage(format!(
                "-n/--namespace and -A/--all-namespaces exclude each other: give one (`{me} -n NS ...` or `{me} -A ...`)"
            )));
        }
        // `--daemon` is `capdeck daemon` with the flags given beside it: one form from here on.
        if std::mem::take(&mut cli.daemon) {
            cli.command =
                Some(Command::Daemon(DaemonArgs { engine: cli.engine.clone(), health_addr: cli.health_addr }));
        }
        if cli.console.demo && cli.command.is_some() {
            return Err(usage(format!(
                "--demo opens the console; it cannot be combined with a subcommand (try `{me} sandbox --seed demo`)"
            )));
        }
        Ok(cli)
    }
}

/// The first flag given on the command line that what runs (`runs`) does not use, said with
/// where it belongs (flags from the environment are settings, never refused).
fn misplaced_flag(command: &clap::Command, matches: &clap::ArgMatches, runs: FrontEnd, daemon: bool) -> Option<String> {
    use clap::parser::ValueSource;
    let me = invoked_name(command);
    for arg in command.get_arguments().filter(|arg| !arg.is_global_set()) {
        let id = arg.get_id().as_str();
        // `--daemon` with a subcommand has its own message below.
        if id == "daemon" || matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let group = FlagGroup::of(id);
        if runs.uses(group) {
            continue;
        }
        let long = format!("--{}", arg.get_long().unwrap_or(id));
        let subcommand = matches.subcommand_name();
        let after = subcommand.and_then(|name| command.find_subcommand(name)).is_some_and(|sub| {
            sub.get_arguments().any(|other| other.get_long().is_some() && other.get_long() == arg.get_long())
        });
        let where_ = match subcommand {
            Some(name) => format!("`{name}`"),
            None if daemon => "--daemon".to_string(),
            None => "the console".to_string(),
        };
        return Some(match (group, subcommand) {
            (_, Some(name)) if after => {
                format!("{long} goes after the subcommand: `{me} {name} {long} ...` (before it, it would be ignored)")
            }
            _ => not_used_here(&long, group, &where_),
        });
    }
    None
}

/// A global cluster flag given to a subcommand that never reads a cluster, said with why.
fn unused_cluster_flag(command: &clap::Command, matches: &clap::ArgMatches, given: &Command) -> Option<String> {
    use clap::parser::ValueSource;
    let (name, sub) = matches.subcommand()?;
    let uses = given.cluster_use();
    let ignored = ["kubeconfig", "context", "namespace", "all_namespaces", "request_timeout"]
        .into_iter()
        .find(|id| sub.value_source(id) == Some(ValueSource::CommandLine) && !uses.uses(id))?;
    let long = command
        .get_arguments()
        .find(|arg| arg.get_id() == ignored)
        .and_then(|arg| arg.get_long())
        .unwrap_or(ignored)
        .to_string();
    Some(match uses {
        ClusterUse::Fleet if ignored == "request_timeout" => {
            "--request-timeout is not used by `fleet`: each context is read within --timeout (5s by default)".into()
        }
        ClusterUse::Fleet => {
            format!("--{long} is not used by `fleet`: it reads the contexts --contexts names (all by default)")
        }
        _ => format!("--{long} is not used by `{name}`, which does not read a cluster"),
    })
}

/// Which of the global cluster flags a subcommand uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterUse {
    /// It reads the cluster: every cluster flag.
    All,
    /// It never reaches a cluster.
    Nothing,
    /// `manifests`: -n, the namespace it installs into.
    NamespaceOnly,
    /// `fleet` reads many contexts: --contexts, not --context; each within --timeout.
    Fleet,
}

impl ClusterUse {
    /// Whether the cluster flag with clap's id `id` is used.
    pub fn uses(self, id: &str) -> bool {
        match self {
            Self::All => true,
            Self::Nothing => false,
            Self::NamespaceOnly => id == "namespace",
            Self::Fleet => id != "context" && id != "request_timeout",
        }
    }
}

impl Command {
    /// Which cluster flags this subcommand uses: a match over every subcommand, so a new one does
    /// not compile until it says.
    pub fn cluster_use(&self) -> ClusterUse {
        match self {
            Self::Plan(_)
            | Self::Crds(_)
            | Self::Sandbox(_)
            | Self::Bench(_)
            | Self::Windows(_)
            | Self::Completion(_)
            | Self::KubectlPlugin(_)
            | Self::Version(_) => ClusterUse::Nothing,
            Self::Manifests(_) => ClusterUse::NamespaceOnly,
            Self::Fleet(_) => ClusterUse::Fleet,
            Self::Batches(_)
            | Self::Approve(_)
            | Self::Force(_)
            | Self::Hold(_)
            | Self::Release(_)
            | Self::Cancel(_)
            | Self::Retry(_)
            | Self::Undo(_)
            | Self::Freeze(_)
            | Self::Unfreeze(_)
            | Self::Freezes(_)
            | Self::Deps(_)
            | Self::Tenants(_)
            | Self::Credentials(_)
            | Self::Doctor(_)
            | Self::Daemon(_) => ClusterUse::All,
        }
    }
}

/// How to reach the cluster: the usual kubectl flags, global to every subcommand; `commands`
/// hands the front ends their plain form (`target`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; in a Pod: the service account)
    #[arg(long, global = true, value_name = "PATH", env = "KUBECONFIG", hide_env_values = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context)
    #[arg(long, global = true, value_name = "NAME",
          add = clap_complete::engine::ArgValueCompleter::new(crate::cluster::complete::contexts))]
    pub context: Option<String>,
    /// Namespace to look at (default: the context's namespace)
    #[arg(short = 'n', long, global = true, value_name = "NS", conflicts_with = "all_namespaces",
          value_parser = parse::parse_namespace,
          add = clap_complete::engine::ArgValueCompleter::new(crate::cluster::complete::namespaces))]
    pub namespace: Option<String>,
    /// Look at every namespace
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// How long to wait for the API server to begin answering a request, and for an exec
    /// credential plugin, before giving up (kubectl's flag; 0 waits forever). The console's and
    /// the daemon's watches are bounded until they begin; `fleet` has --timeout instead
    #[arg(long, global = true, value_name = "DURATION", default_value = "30s",
          value_parser = crate::cluster::deadline::parse_request_timeout)]
    pub request_timeout: crate::cluster::deadline::RequestTimeout,
}

impl ClusterArgs {
    /// The flags' plain form, which the front ends and the commands take.
    pub fn target(&self) -> ClusterTarget {
        let Self { kubeconfig, context, namespace, all_namespaces, request_timeout } = self.clone();
        ClusterTarget { kubeconfig, context, namespace, all_namespaces, request_timeout }
    }
}

/// The console's own flags.
#[derive(Debug, Args, Clone)]
pub struct ConsoleArgs {
    /// Open the console on an embedded sandbox cluster (seeded demo applications, simulated
    /// workloads, a credential rotator, the engine leading with a 30s window); needs no cluster.
    /// The sandbox's kubeconfig path is shown in the help screen (`?`), for kubectl
    #[arg(long, conflicts_with_all = ["daemon", "context"])]
    #[cfg_attr(not(feature = "sandbox"), arg(hide = true))]
    pub demo: bool,
    /// How often the demo's credential rotator rotates a random binding Secret: a range of Go
    /// durations (`20s-40s`), or `off` (the three rotations at start still happen)
    #[arg(long, value_name = "MIN-MAX|off", default_value = "20s-40s", requires = "demo", value_parser = parse_rotation)]
    #[cfg_attr(not(feature = "sandbox"), arg(hide = true))]
    pub demo_rotation: DemoRotation,
    /// Never write from this machine: the console's batch keys, the batch commands and --daemon
    /// refuse (CAPDECK_READONLY takes true/false, 1/0, yes/no, on/off)
    #[arg(long, env = "CAPDECK_READONLY", value_parser = parse::parse_readonly)]
    pub readonly: bool,
    /// Colour theme: dark, light, high-contrast, or a file name in $XDG_CONFIG_HOME/capdeck/themes/
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
    /// Console config file [default: $XDG_CONFIG_HOME/capdeck/config.toml]
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The view the console opens on (the names of its `:` commands) [default: apps, or fleet
    /// with --contexts]
    #[arg(long, value_enum, value_name = "VIEW")]
    pub view: Option<StartView>,
    /// The contexts of the fleet view (`:fleet`, opened at start): `all` or names separated by
    /// commas. They are read every 30s while the view is shown. Without it `:fleet` reads every
    /// context of the kubeconfig
    #[arg(long, value_name = "all|NAME,...", conflicts_with_all = ["demo", "daemon"])]
    pub contexts: Option<crate::fleet::ContextList>,
}

/// `--view`: the console's views by their `:` command names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StartView {
    Apps,
    Versions,
    Tenants,
    Ops,
    Batches,
    Rollouts,
    Events,
    Credentials,
    Fleet,
}

/// The demo rotator's interval range; `None` is off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoRotation(pub Option<(std::time::Duration, std::time::Duration)>);

/// How the engine rolls out (daemon, and the console's attached engine).
#[derive(Debug, Args, Clone)]
pub struct EngineArgs {
    /// Batch window after the first rotation: a Go duration with its unit (30s, 15m, 1h; below 30s
    /// means 30s). Without the flag, $ROLLOUT_DELAY as the CAP Operator reads it (unparsable there
    /// means 1h, with a warning) [default: 1h]
    #[arg(long, value_name = "DURATION", value_parser = go_duration_text)]
    pub rollout_delay: Option<String>,
    /// Approval policy for applications without the capdeck.dev/approval annotation
    #[arg(long, value_enum, default_value_t = ApprovalPolicy::Auto, env = "CAPDECK_APPROVAL")]
    pub approval: ApprovalPolicy,
    /// Deployments rolling at once, across all batches
    #[arg(long, value_name = "N", default_value_t = 5, env = "CAPDECK_MAX_PARALLEL_ROLLOUTS",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel_rollouts: u32,
    /// The engine's writes per second (batches, their status, VCAP Secrets, Deployments, the old
    /// Secrets' deletes, Events; reads and the Lease are not counted): a token bucket as client-go's, at the Go CAP
    /// Operator's own client rate by default; 0 for no limit
    #[arg(long, value_name = "PER_SECOND", default_value_t = crate::engine::write_rate::DEFAULT_QPS,
          env = "CAPDECK_WRITE_QPS", value_parser = parse_write_qps)]
    pub write_qps: f64,
    /// Writes the engine may send at once after a quiet spell (the bucket of --write-qps); any one
    /// second holds fewer than this plus --write-qps writes (50 with the defaults)
    #[arg(long, value_name = "N", default_value_t = crate::engine::write_rate::DEFAULT_BURST,
          env = "CAPDECK_WRITE_BURST", value_parser = clap::value_parser!(u32).range(1..))]
    pub write_burst: u32,
    /// A Deployment rolled less than this ago needs an approval to roll again (storm guard; Go duration)
    #[arg(long, value_name = "DURATION", default_value = "10m", env = "CAPDECK_MIN_ROLLOUT_INTERVAL",
          value_parser = crate::engine::config::parse_go_duration)]
    pub min_rollout_interval: std::time::Duration,
    /// How long rolling a batch's Deployments is expected to take: a batch whose rotated Secret's
    /// old credentials may be revoked within this margin stops waiting for its window (auto) or
    /// escalates (needs approval); see docs/CREDENTIALS.md (Go duration)
    #[arg(long, value_name = "DURATION", default_value = "15m", env = "CAPDECK_EXPECTED_ROLLOUT",
          value_parser = crate::engine::config::parse_go_duration)]
    pub expected_rollout: std::time::Duration,
    /// Halt a batch at its first stalled Deployment (phase Held, reason RolloutFailureGuard):
    /// nothing new starts until `capdeck release` (go on) or `capdeck cancel`; false rolls on
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set,
          env = "CAPDECK_HALT_ON_FAILURE")]
    pub halt_on_failure: bool,
    /// A rolling Deployment whose new Pods stay not ready this long is Failing (as are Pods in
    /// CrashLoopBackOff, ImagePullBackOff or restarted 3 times), long before its progress deadline
    #[arg(long, value_name = "DURATION", default_value = "5m", env = "CAPDECK_READINESS_TIMEOUT",
          value_parser = crate::engine::config::parse_go_duration)]
    pub readiness_timeout: std::time::Duration,
    /// Whether this process may lead: `auto` takes the lease when free, `observe` never writes, `lead` competes
    #[arg(long = "engine", value_enum, default_value_t = EngineMode::Auto, env = "CAPDECK_ENGINE")]
    pub mode: EngineMode,
    /// Namespace of the leader-election Lease, shared by daemons and consoles so only one engine
    /// writes [default: $POD_NAMESPACE in a cluster, else the kubeconfig context's namespace, as
    /// kubectl's -n]
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE", value_parser = parse::parse_namespace)]
    pub lease_namespace: Option<String>,
    /// Name of the leader-election Lease
    #[arg(long, value_name = "NAME", default_value = "capdeck-engine", value_parser = parse_object_name)]
    pub lease_name: String,
    /// Send a notification to this receiver when a batch awaits approval, is held by the failure
    /// guard, failed or cannot wait for its window, when credentials become at risk or unsafe and
    /// safe again, and when a freeze starts and ends (the leading engine only; at most once each).
    /// `[NAME@][FORMAT=]URL`: what the logs, records and doctor call it (default: its host's
    /// domain and a short hash), then `json`
    /// (the generic body), `slack` (the default for hooks.slack.com) or `teams` (a Workflows
    /// webhook's Adaptive Card). `pagerduty=ROUTING_KEY` and `opsgenie=API_KEY` open an incident
    /// and resolve it. Repeatable. See docs/NOTIFICATIONS.md
    #[arg(long, value_name = "[NAME@][FORMAT=]URL")]
    pub notify: Vec<String>,
    /// Like --notify, with the URL or key read from a Secret's key, so it is never in an argument
    /// list or a log (`oncall@pagerduty=capdeck-system/pagerduty:routing-key`). Repeatable
    #[arg(long, value_name = "[NAME@][FORMAT=]NS/NAME:KEY", value_parser = parse::Redacted::<crate::engine::config::NotifySecretRef>::new())]
    pub notify_secret: Vec<crate::engine::config::NotifySecretRef>,
    /// Sign the generic JSON webhooks with the key in this Secret's key (Standard Webhooks:
    /// webhook-id, webhook-timestamp and webhook-signature headers, HMAC-SHA256; `whsec_BASE64`,
    /// at least 24 bytes). docs/NOTIFICATIONS.md shows how a receiver verifies them
    #[arg(long, value_name = "NS/NAME:KEY", value_parser = parse::Redacted::<crate::engine::config::SecretKeyRef>::new())]
    pub notify_signing_secret: Option<crate::engine::config::SecretKeyRef>,
    /// The cluster's name in notifications [default: the kube context's name]
    #[arg(long, value_name = "NAME", env = "CAPDECK_CLUSTER_NAME", value_parser = parse::parse_cluster_name)]
    pub cluster_name: Option<String>,
    /// The cluster's change windows: batches roll only inside them, unless waiting would outlive
    /// the old credentials. An application's or its namespace's capdeck.dev/change-windows
    /// annotation wins. E.g. 'Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin'
    /// (docs/WINDOWS.md; try one with `capdeck windows`) [default: none, any hour]
    #[arg(long, value_name = "WINDOWS", env = "CAPDECK_CHANGE_WINDOWS", value_parser = parse_change_windows)]
    pub change_windows: Option<ClusterWindows>,
    /// When the next change window, or the end of a freeze, comes too late for the old
    /// credentials: `ask` a person at once (a notification), or `roll` at once
    #[arg(long, value_enum, value_name = "ask|roll", default_value_t = crate::engine::config::OnDeadline::Ask,
          env = "CAPDECK_ON_DEADLINE")]
    pub on_deadline: crate::engine::config::OnDeadline,
}

/// `--change-windows` / `$CAPDECK_CHANGE_WINDOWS`; blank is none (as a blank annotation is), so a
/// Deployment template with an empty value does not stop the daemon.
#[derive(Clone, Debug)]
pub struct ClusterWindows(pub Option<crate::api::change_window::ChangeWindows>);

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compute the credential rollout plan from manifest files, offline
    #[command(long_about = "Compute the credential rollout plan from manifest files, offline.\n\n\
Every binding Secret referenced by an opted-in CAPApplication counts as rotated (the engine's \
start-up re-check). For each affected Deployment the plan says restart, unchanged or missing, \
comparing the VCAP_SERVICES payload with the Secret the Deployment references now.\n\n\
Exit codes: 0 when a plan was computed (problems included), 1 when input cannot be read or \
parsed, 2 for usage errors.")]
    Plan(PlanArgs),
    /// Print the CustomResourceDefinitions capdeck knows (CAP Operator kinds, RotationBatch, Freeze)
    #[command(long_about = "Print the CustomResourceDefinitions of every kind capdeck knows: the CAP \
Operator's sme.sap.com/v1alpha1 kinds and capdeck.dev/v1alpha1 RotationBatch and Freeze. On a \
cluster with the CAP Operator, apply only capdeck's (--only capdeck): the CAP Operator owns its own, \
and applying this binary's copies over them would replace its schemas. Or let the Helm chart install \
capdeck's.\n\n\
Examples:\n  capdeck crds --only capdeck | kubectl apply --server-side -f -   (beside the CAP Operator)\n  \
capdeck crds | kubectl apply --server-side -f -                 (to try capdeck without it)")]
    Crds(CrdsArgs),
    /// Run the sandbox cluster: an in-memory Kubernetes API server for kubectl and capdeck
    #[command(long_about = "Run the sandbox cluster: an in-memory Kubernetes API server that kubectl, kube-rs \
and capdeck can use. It writes a kubeconfig once it listens, prints the URL and a KUBECONFIG hint, and \
runs until SIGINT or SIGTERM (exit 0).\n\nExample:\n  capdeck sandbox --seed demo --simulate-workloads \
--kubeconfig-out /tmp/sandbox.kubeconfig\n  KUBECONFIG=/tmp/sandbox.kubeconfig kubectl get cat -A")]
    // A build without the sandbox (the container image's) refuses these; its help leaves them out.
    #[cfg_attr(not(feature = "sandbox"), command(hide = true))]
    Sandbox(SandboxArgs),
    /// Measure capdeck: the sandbox API server, the engine, the console
    #[command(subcommand)]
    #[cfg_attr(not(feature = "sandbox"), command(hide = true))]
    Bench(BenchCommand),
    /// List RotationBatches: phase, window, approvals, rollout progress
    Batches(BatchesArgs),
    /// Approve a batch that waits for approval (or pre-approve one still collecting)
    Approve(BatchActionArgs),
    /// End a batch's window now (add --approve to also approve a batch that needs it)
    Force(ForceArgs),
    /// Hold a batch: nothing new starts until `release` (to stop a namespace or the cluster: `freeze`)
    Hold(BatchActionArgs),
    /// Release a held batch
    Release(BatchActionArgs),
    /// Abandon a batch: nothing more is rolled (Deployments already rolling finish)
    Cancel(BatchActionArgs),
    /// Roll a Failed or halted batch's failed Deployments once more, or roll an Undone or Cancelled one forward
    #[command(long_about = "Retry a batch that failed: phase Failed, or Held by the failure guard \
(RolloutFailureGuard). Its stalled, failing and failed Deployments are queued again; those the batch had \
pointed at their new VCAP Secret restart once more (a new ReplicaSet, like kubectl rollout restart), those it \
never reached start as usual, and the queued ones follow, paced by --max-parallel-rollouts. Recorded in the \
batch (spec.retry) and its Event with who you are and your reason.\n\nOn an Undone or Cancelled batch, retry \
rolls the application forward: the engine opens a new batch at once (spec.rollsForward names this one) for \
every Deployment still on the old credentials; the application's approval policy, change windows and freezes \
apply to it. Once per batch.\n\nExamples: capdeck retry cap-shop/bookshop-x7k2p --reason \"quota raised, pods \
fit now\"; capdeck retry cap-shop/bookshop-x7k2p --dry-run --reason \"crash fixed\" (names each Deployment)")]
    Retry(BatchActionArgs),
    /// Point the Deployments of a Failed or halted batch back at their previous VCAP Secrets
    #[command(long_about = "Undo a batch that failed: phase Failed, or Held by the failure guard. Every \
Deployment the batch pointed at a new VCAP Secret and whose rollout did not complete goes back to the VCAP \
Secret it used before (capdeck keeps it until a rollout completes); the batch's new Secret is deleted and the \
batch ends Undone. Completed Deployments stay (their previous Secret is gone). The old credentials work only \
until sap-btp-service-operator revokes them: capdeck credentials says when.\n\nExample: capdeck undo \
cap-shop/bookshop-x7k2p --reason \"new credentials break the orders service\"")]
    Undo(BatchActionArgs),
    /// Freeze a namespace, one CAPApplication or the cluster: batches collect but do not roll until --until
    #[command(long_about = "Freeze a namespace (-n NS), one CAPApplication (--app NS/NAME) or every namespace \
the engine serves (-A): until --until, batches there collect rotations but no rollout starts. A batch whose \
old credentials would be revoked before the freeze ends does not wait: it asks for an approval at once \
(DeadlineDuringFreeze). The freeze is a Freeze object (capdeck.dev/v1alpha1) in the cluster, recorded with who \
you are (the API server's SelfSubjectReview) and your reason; it ends by itself, survives engine restarts and \
leader changes, and a freeze of the same target replaces it. -A writes the Freeze `cluster` into the namespace \
of the leading engine's Lease (without a leader: --lease-namespace, else capdeck-system), so RBAC there decides \
who may freeze everything. See docs/WINDOWS.md, Freezes.\n\n\
Examples:\n  capdeck freeze -n shop --until 4h --reason \"Black Friday\"\n  capdeck freeze --app shop/bookshop \
--until 2026-11-28T18:00:00Z --reason \"CHG-1234 migration\"\n  capdeck freeze -A --until 2h30m --reason \"incident \
INC-77\" --dry-run")]
    Freeze(FreezeArgs),
    /// Lift a freeze before its end (the record stays, with who lifted it and why)
    #[command(long_about = "Lift the freeze of a namespace (-n NS), one CAPApplication (--app NS/NAME) or the \
cluster (-A) before it ends: batches roll again, inside their change windows. The Freeze stays as a record, with \
who froze it and who lifted it (spec.lifted: you, now, your reason). A freeze that is absent, already lifted or \
already ended is refused. See docs/WINDOWS.md, Freezes.\n\n\
Examples:\n  capdeck unfreeze -n shop --reason \"sale over\"\n  capdeck unfreeze -A --reason \"incident closed\" \
--dry-run")]
    Unfreeze(UnfreezeArgs),
    /// List freezes: target, state (active, ended, lifted), from, until, who froze, why, who lifted
    #[command(long_about = "List the Freeze objects: what each covers, its state (active, ended by itself, \
lifted), when it started and ends, who froze it and why, and who lifted it. The cluster's freeze lives in the \
namespace of the engine's Lease: -A shows it.\n\nExamples:\n  capdeck freezes -A\n  capdeck freezes -n shop -o json")]
    Freezes(FreezesArgs),
    /// Print the manifests to run `capdeck --daemon` in a cluster (RBAC, Deployment, Service)
    Manifests(ManifestsArgs),
    /// The subscription dependencies of an application, as the CAP Operator's subscription server answers
    #[command(long_about = "The subscription dependencies of a CAPApplication: what the CAP Operator's \
subscription server answers to getDependencies, in the application's service order. A service is in when its \
subscriptionDependency is Always, or Auto (the default) and it is a special dependency (destination, connectivity, \
auditlog with plan oauth2 — answered as {appId, appName}) or its credentials say saasregistryenabled: true; its \
xsappname comes from credentials.xsappname, else credentials.uaa.xsappname. Services whose Secret is missing or \
unreadable are skipped.\n\nFrom manifest files with -f, else from the cluster. -o json prints exactly the JSON \
array; the table says why each service is in or out.\n\nExample: capdeck deps --app cap-shop/bookshop -o json")]
    Deps(DepsArgs),
    /// List CAPTenants: application, state, current and target version, upgrade strategy, operation
    Tenants(TenantsArgs),
    /// When each consumed binding Secret's credentials rotate and when the old ones die, with a verdict
    #[command(long_about = "For every binding Secret a CAPApplication consumes: who writes it \
(sap-btp-service-operator, cf-service-operator), its format (metadata, credentials, flat, unreadable), the \
ServiceBinding's rotation policy (webhook defaults 72h/48h filled in), the last and next rotation (due, and latest \
after the operator's 10h resync), the old credentials and the earliest moment each may be revoked, and the margin: \
earliest revocation minus when a batch would be rolled out (window end, approval wait so far, the wait for the next \
change window and the end of any freeze, expected rollout).\n\n\
Verdicts: ok; at-risk (less than one expected rollout to spare); unsafe (the batch would outlive the old \
credentials, also by waiting for a change window or a freeze, cf-service-operator with a batching window, or a Secret no VCAP_SERVICES entry can be built from); \
unknown (no ServiceBinding information). Without the ServiceBinding CRD capdeck says so and reports the rest.\n\n\
From manifest files with -f, else from the cluster. -o json prints one object {\"credentials\": [...]}; times are \
RFC 3339, durations Go syntax, null where unknown. See docs/CREDENTIALS.md.\n\n\
Example: capdeck credentials -A -o json")]
    Credentials(CredentialsArgs),
    /// Check this context for what capdeck needs: CRDs, permissions, the Lease and its holder, a Go
    /// CAP Operator rolling the same Deployments, unreadable binding Secrets, the rollout delay
    #[command(long_about = "Check the current kubeconfig context for everything capdeck needs, one line per \
finding: the CRDs installed and matching this binary; your permissions for what the engine and the console do \
(one line per missing one); the lease namespace, the Lease holder and when it last renewed; whether the Go CAP \
Operator runs while applications set spec.rolloutOnCredentialUpdate (both would restart the same Deployments); \
binding Secrets whose format capdeck cannot read; capdeck.dev/change-windows annotations that cannot be parsed \
(with the fix), the freezes in force, batches waiting for a window or escalated; the rollout delay (the one given, \
else the leading engine's).\n\n\
Exit codes: 0 when nothing blocks (warnings included), 1 when something does (FAIL), 2 for usage errors.")]
    Doctor(DoctorArgs),
    /// What is open in every kube context: batches awaiting approval, held or failed, credentials
    /// at risk, stalled rollouts, who leads
    #[command(long_about = "What is open in every kube context at once, one row per context and namespace \
with something open: batches awaiting approval, held (the failure guard included) or failed, with the time \
left before their old credentials may be revoked (else their window end); binding Secrets whose credentials \
are at risk or unsafe; Deployments that stalled in a rolling batch; and who leads capdeck's engine there. A \
context with nothing open is one `clear` row. Contexts are read concurrently, each within --timeout; a \
context that cannot be read is a row that says why (unreachable, forbidden), never a missing one.\n\n\
-o json prints {\"fleet\": [rows]}; see README \"Many clusters\".\n\n\
Exit codes: 0 when every context was read, 1 when one or more could not be, 2 for usage errors.\n\n\
Examples:\n  capdeck fleet\n  capdeck fleet --contexts prod-eu,prod-us -o json\n  capdeck --contexts all   (the console, \
on its fleet view)")]
    Fleet(FleetArgs),
    /// Check change windows and print their next openings, offline (docs/WINDOWS.md)
    #[command(long_about = "Check change windows as they will be written in the capdeck.dev/change-windows \
annotation of a CAPApplication or a Namespace, and print whether they are open now and their next openings. \
The engine honours them: outside them a batch waits for the next opening, unless waiting would outlive \
the old credentials. Weekly ranges in an IANA time zone, separated by ';': DAYS HH:MM-HH:MM ZONE. A range whose end is not \
after its start ends the next day; 24:00 is the end of a day. See docs/WINDOWS.md.\n\n\
Exit codes: 0 when the windows parse, 1 when they do not (the error names the range and what is wrong), 2 for \
usage errors.\n\n\
Examples:\n  capdeck windows 'Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin'\n  \
capdeck windows 'Sun 01:00-04:00 Europe/Berlin' --at 2026-03-28T12:00:00Z --next 2 -o json")]
    Windows(WindowsArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell
    #[command(long_about = "Print a shell completion script for capdeck. The script asks capdeck itself for \
the candidates, so subcommands and flags always match the binary, and contexts (--context), namespaces \
(-n) and the batches an action accepts now (approve, force, hold, ...) come from the kubeconfig, context and \
namespace on the line (nothing is offered when the cluster does not answer within 2 s). capdeck must be on PATH.\n\nExamples:\n  \
source <(capdeck completion bash)\n  capdeck completion zsh > \"${fpath[1]}/_capdeck\"\n  \
capdeck completion fish > ~/.config/fish/completions/capdeck.fish")]
    Completion(CompletionArgs),
    /// Install capdeck as a kubectl plugin (`kubectl capdeck ...`, completed by kubectl's own completion)
    #[command(subcommand, name = "kubectl-plugin")]
    KubectlPlugin(KubectlPluginCommand),
    /// Print the version, the git commit it was built from, and the platform
    Version(VersionArgs),
    /// Run headless in the cluster as the rollout operator: leader election, /healthz /readyz
    /// /metrics, JSON logs on stdout; SIGTERM finishes in-flight writes, releases the lease, exits 0
    #[command(long_about = "Run headless in the cluster as the rollout operator: leader election on a Lease, \
/healthz /readyz /metrics on --health-addr, JSON logs on stdout. SIGTERM finishes in-flight writes, releases \
the lease and exits 0. `capdeck --daemon` is the same (the Helm chart runs that form).\n\n\
Examples:\n  capdeck daemon --rollout-delay 30s --approval manual\n  capdeck -n cap-shop daemon --health-addr :8080")]
    Daemon(DaemonArgs),
}

/// `capdeck daemon`: the engine's flags and where the health endpoints listen.
#[derive(Debug, Args, Clone)]
pub struct DaemonArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Where the daemon serves /healthz, /readyz and /metrics
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080", env = "CAPDECK_HEALTH_ADDR", value_parser = parse_listen_addr)]
    pub health_addr: std::net::SocketAddr,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `capdeck kubectl-plugin ...`
#[derive(Debug, Subcommand)]
pub enum KubectlPluginCommand {
    /// Link kubectl-capdeck and kubectl_complete-capdeck to this binary in a directory on PATH
    #[command(long_about = "Make capdeck a kubectl plugin: create two symbolic links to this capdeck binary in \
--dir, `kubectl-capdeck` (kubectl runs it for `kubectl capdeck ...`, with the arguments unchanged) and \
`kubectl_complete-capdeck` (kubectl 1.26 and later run it to complete `kubectl capdeck <TAB>` in shells set up \
with `kubectl completion`). The directory must be on PATH. Links already pointing at this binary are kept; \
another file of those names is replaced only with --force.\n\n\
Examples:\n  capdeck kubectl-plugin install --dir ~/.local/bin\n  kubectl capdeck batches -A")]
    Install(KubectlPluginInstallArgs),
}

#[derive(Debug, Args)]
pub struct KubectlPluginInstallArgs {
    /// Where to create the links: a directory on PATH [default: the directory of this binary]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Replace files of those names that are not links to this binary
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// The engine settings to check (as the daemon would get them)
    #[command(flatten)]
    pub engine: EngineArgs,
}

#[derive(Debug, Args)]
pub struct BatchesArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// After the list, print every change to a batch as it happens (like kubectl get -w) until
    /// interrupted
    #[arg(short = 'w', long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct BatchActionArgs {
    /// The batch: NAMESPACE/NAME, or NAME with -n
    #[arg(value_name = "BATCH", add = clap_complete::engine::ArgValueCompleter::new(complete::batches))]
    pub batch: String,
    /// Why (required; recorded in the batch and its Event, with who you are)
    #[arg(long, value_name = "TEXT", value_parser = non_blank)]
    pub reason: String,
    /// Print what the action would do — the Deployments that restart and the tenants they serve —
    /// and change nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// `capdeck freeze`: the target is `-n NS`, `-A` (the cluster flags) or `--app NS/NAME`.
#[derive(Debug, Args)]
pub struct FreezeArgs {
    #[command(flatten)]
    pub target: FreezeTargetArgs,
    /// When the freeze ends: an RFC 3339 time (2026-11-28T18:00:00Z, or with an offset such as
    /// +01:00) or a Go duration from now (4h, 90m, 2h30m)
    #[arg(long, value_name = "TIME|DURATION", value_parser = crate::freezes::parse_until, allow_hyphen_values = true)]
    pub until: crate::freezes::Until,
    /// Why (required; recorded in the Freeze with who you are)
    #[arg(long, value_name = "TEXT", value_parser = non_blank)]
    pub reason: String,
    /// Print the Freeze that would be written, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// `capdeck unfreeze`: the same targets as `freeze`.
#[derive(Debug, Args)]
pub struct UnfreezeArgs {
    #[command(flatten)]
    pub target: FreezeTargetArgs,
    /// Why (required; recorded in the Freeze as who lifted it)
    #[arg(long, value_name = "TEXT", value_parser = non_blank)]
    pub reason: String,
    /// Say which freeze would be lifted, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// The target of `freeze` and `unfreeze` besides the cluster flags `-n` and `-A`.
#[derive(Debug, Args)]
pub struct FreezeTargetArgs {
    /// One CAPApplication, as NAMESPACE/NAME (instead of -n NS or -A)
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub app: Option<String>,
    /// With -A: where the cluster's freeze goes when no leading engine can be found (its Lease's
    /// namespace otherwise) [default: capdeck-system]
    #[arg(long, value_name = "NS", value_parser = parse::parse_namespace)]
    pub lease_namespace: Option<String>,
}

#[derive(Debug, Args)]
pub struct FreezesArgs {
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ForceArgs {
    #[command(flatten)]
    pub target: BatchActionArgs,
    /// Approve in the same write (for batches that need an approval)
    #[arg(long)]
    pub approve: bool,
}

#[derive(Debug, Args)]
#[command(long_about = "Print the manifests to run `capdeck --daemon` in a cluster: ServiceAccount, a \
least-privilege ClusterRole and binding, a Role for the leader-election Lease, the Deployment and the \
metrics Service. The namespace comes from --namespace/-n (default capdeck-system).\n\n\
Example: capdeck crds --only capdeck | kubectl apply --server-side -f - && capdeck manifests -n capdeck-system | kubectl apply -f -")]
pub struct ManifestsArgs {
    /// Container image to run
    #[arg(long, value_name = "IMAGE", default_value = "ghcr.io/capdeck/capdeck:0.1.0")]
    pub image: String,
    /// Have the daemon send notifications to the receiver in this Secret's key (its
    /// --notify-secret, `[NAME@][FORMAT=]NS/NAME:KEY`; repeatable). Create the Secret yourself:
    /// the URL or key never goes in a manifest
    #[arg(long, value_name = "[NAME@][FORMAT=]NS/NAME:KEY", value_parser = parse::Redacted::<crate::engine::config::NotifySecretRef>::new())]
    pub notify_secret: Vec<crate::engine::config::NotifySecretRef>,
    /// Have the daemon sign its generic JSON webhooks with the key in this Secret's key (its
    /// --notify-signing-secret)
    #[arg(long, value_name = "NS/NAME:KEY", value_parser = parse::Redacted::<crate::engine::config::SecretKeyRef>::new())]
    pub notify_signing_secret: Option<crate::engine::config::SecretKeyRef>,
    /// The cluster's name in the daemon's notifications (its --cluster-name)
    #[arg(long, value_name = "NAME", value_parser = parse::parse_cluster_name)]
    pub cluster_name: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Request latency and memory of the sandbox API server holding N objects (kube client over HTTP)
    Sandbox(BenchSandboxArgs),
    /// The engine at scale: store sync, the start-up re-check, writes, rotation rollout timing, memory
    #[command(long_about = "The engine at scale. A sandbox in a child process is seeded with APPS CAPApplications \
(each with SERVICES binding Secrets, a Ready version with DEPLOYMENTS Deployments consuming every service, a tenant, \
current VCAP Secrets) plus UNREFERENCED Secrets nobody uses. The engine runs in this process over loopback HTTP. \
Reported: sync_ms (stores ready), sync_reads (requests and response bytes until then, by request, counted on the \
client: the binding Secrets are read by name, so `list secrets` holds those reads and the VCAP Secrets' list), plan_ms (the full start-up re-check), startup_writes (must be 0), then ROTATE \
binding Secrets are rotated with the window forced (--natural-windows: a 5 s window ends on its own): \
rotated_deployments, rotation_writes, writes_per_deployment (the workload's: VCAP Secret, Deployment, old Secret), \
engine_writes_per_deployment (every engine write: the workload's plus the batch, its status and Events; \
engine_writes_per_deployment_by_request breaks it down), window_to_last_update_ms, rollout_complete_ms, and rss_mb / rss_peak_mb of this process (the engine; rss_file_mb_synced / rss_anon_mb_synced split it into the program's mapped pages and the heap; \
write_rate: the engine's write rate (qps, burst) and how long its writes waited for it (throttled_seconds); the \
sandbox's memory is reported apart).")]
    Engine(BenchEngineArgs),
    /// The console: snapshot build, first frame, frame and key-handling time, idle CPU
    #[command(long_about = "The console. In process, on a 200x60 test terminal with the demo data plus TENANTS \
tenants (and an application with a version per 100 tenants, a tenant operation per 10): snapshot_ms_p50 (rows built from the objects, on every cluster change), first_frame_ms (snapshot + first \
draw), frame_ms_p50/p99 (drawing the tenants view while scrolling), update_ms_p50/p99 (keys: moving, paging, \
filtering as you type, new data). Live first, for IDLE_SECONDS: a demo sandbox in a child process plus the same \
tenants, the whole console runtime (stores, attached engine, 1 s tick) over HTTP: first_data_frame_ms, \
idle_cpu_percent, idle_frames_per_second, rss_mb; and, when kubectl is installed, \
kubectl_get_captenants_ms and kubectl_rss_mb for one `kubectl get captenants -A` of the same cluster.")]
    Console(BenchConsoleArgs),
}

#[derive(Debug, Args)]
pub struct BenchConsoleArgs {
    /// Tenants added to the demo data
    #[arg(long, default_value_t = 10_000)]
    pub tenants: usize,
    /// How long to measure the live console at rest (0 skips the live part)
    #[arg(long, default_value_t = 30)]
    pub idle_seconds: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct BenchEngineArgs {
    /// CAPApplications
    #[arg(long, default_value_t = 100)]
    pub apps: usize,
    /// Deployments per application (each consumes every service)
    #[arg(long, default_value_t = 5)]
    pub deployments_per_app: usize,
    /// Services (binding Secrets) per application
    #[arg(long, default_value_t = 5)]
    pub services_per_app: usize,
    /// Secrets nobody references
    #[arg(long, default_value_t = 0)]
    pub unreferenced_secrets: usize,
    /// Binding Secrets to rotate (one per application, first service)
    #[arg(long, default_value_t = 100)]
    pub rotate: usize,
    /// Simulated rollout pace, replicas per second
    #[arg(long, default_value_t = 1.0)]
    pub pace: f64,
    /// Deployments the engine under test rolls at once
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel_rollouts: u32,
    /// Let each batch's window end on its own (a 5 s window, nobody acts) instead of forcing it
    #[arg(long)]
    pub natural_windows: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct BenchSandboxArgs {
    /// How many Secrets to create
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Address to listen on (port 0 picks a free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// Where to write the kubeconfig [default: <temp dir>/capdeck-sandbox/kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
    /// What the cluster starts with: `empty` (namespaces only) or `demo` (CRDs and four CAP applications)
    #[arg(long, value_enum, default_value_t = Seed::Empty)]
    pub seed: Seed,
    /// Move Deployment status through rolling updates and complete Jobs, like a real cluster
    #[arg(long)]
    pub simulate_workloads: bool,
    /// Replicas per second a simulated rollout progresses
    #[arg(long, value_name = "N", default_value_t = 1.0, requires = "simulate_workloads")]
    pub pace: f64,
    /// Also run ReplicaSets and Pods (one node; a stalled rollout's new Pod crash-loops, with a
    /// log `kubectl logs` and the console's `l` read), as `--demo` does
    #[arg(long, requires = "simulate_workloads")]
    pub simulate_pods: bool,
    /// Rotate a random binding Secret every 20-40 s
    #[arg(long)]
    pub rotate_credentials: bool,
    /// Who SelfSubjectReview says you are
    #[arg(long, value_name = "NAME", default_value = "sandbox-admin")]
    pub user: String,
    /// Deny VERB:RESOURCE (e.g. patch:rotationbatches, *:secrets): access reviews say no, writes get 403; repeatable
    #[arg(long, value_name = "VERB:RESOURCE")]
    pub deny: Vec<DenyRule>,
    /// Benchmark seed APPS:DEPLOYMENTS:SERVICES:UNREFERENCED (used by `capdeck bench engine`)
    #[arg(long, value_name = "A:D:S:U", hide = true, value_parser = parse_synthetic)]
    pub synthetic: Option<SyntheticSize>,
}

/// The size of the benchmark seed (`--synthetic A:D:S:U`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticSize {
    pub apps: usize,
    pub deployments_per_app: usize,
    pub services_per_app: usize,
    pub unreferenced_secrets: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Seed {
    Empty,
    Demo,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Manifest file or directory (every *.yaml, *.yml, *.json below it); repeatable
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Include the VCAP_SERVICES payloads (credential values!) in the output
    #[arg(long)]
    pub show_secrets: bool,
}

#[derive(Debug, Args)]
pub struct DepsArgs {
    /// The application: NAMESPACE/NAME, or NAME with -n
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub app: String,
    /// Read manifests (file or directory; repeatable) instead of the cluster
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct TenantsArgs {
    /// Only the tenants of this CAPApplication (NAME in the -n/-A scope, or NAMESPACE/NAME)
    #[arg(long, value_name = "[NAMESPACE/]NAME")]
    pub app: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CredentialsArgs {
    /// Read manifests (file or directory; repeatable) instead of the cluster
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<PathBuf>,
    /// The batch window to judge with [default: the leading engine's, which it publishes on its
    /// Lease; else 1h]
    #[arg(long, value_name = "DURATION", value_parser = crate::engine::config::parse_go_duration)]
    pub rollout_delay: Option<std::time::Duration>,
    /// How long rolling a batch's Deployments is expected to take [default: the leading engine's;
    /// else 15m]
    #[arg(long, value_name = "DURATION", value_parser = crate::engine::config::parse_go_duration)]
    pub expected_rollout: Option<std::time::Duration>,
    /// The cluster's change windows to judge with (an application's or namespace's
    /// capdeck.dev/change-windows annotation still wins), e.g. 'Mon-Fri 22:00-05:00 Europe/Berlin'
    /// [default: the leading engine's --change-windows, which it publishes on its Lease]
    #[arg(long, value_name = "WINDOWS", value_parser = parse_change_windows)]
    pub change_windows: Option<ClusterWindows>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The contexts to read: `all` (every context of the kubeconfig) or names separated by commas
    #[arg(long, value_name = "all|NAME,...", default_value = "all")]
    pub contexts: crate::fleet::ContextList,
    /// How long each context may take to answer (Go duration)
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::fleet::parse_timeout)]
    pub timeout: std::time::Duration,
    /// Namespace of capdeck's engine Lease in each context [default: the context's namespace]
    #[arg(long, value_name = "NS", value_parser = parse::parse_namespace)]
    pub lease_namespace: Option<String>,
    /// Name of capdeck's engine Lease
    #[arg(long, value_name = "NAME", default_value = "capdeck-engine", value_parser = parse_object_name)]
    pub lease_name: String,
    /// The batch window to judge each context's credentials with [default: that context's leading
    /// engine's, which it publishes on its
    /// Lease; else 1h]
    #[arg(long, value_name = "DURATION", value_parser = crate::engine::config::parse_go_duration)]
    pub rollout_delay: Option<std::time::Duration>,
    /// How long rolling a batch's Deployments is expected to take [default: the leading engine's;
    /// else 15m]
    #[arg(long, value_name = "DURATION", value_parser = crate::engine::config::parse_go_duration)]
    pub expected_rollout: Option<std::time::Duration>,
    #[command(flatten)]
    pub output: crate::output::DocumentOutputArgs,
}

#[derive(Debug, Args)]
pub struct WindowsArgs {
    /// The change windows, e.g. 'Mon-Fri 22:00-05:00 Europe/Berlin' (unquoted words are joined)
    #[arg(value_name = "WINDOWS", required = true, num_args = 1..)]
    pub windows: Vec<String>,
    /// How many openings to list
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub next: u16,
    /// Judge at this instant (RFC 3339, e.g. 2026-03-28T12:00:00Z) instead of now
    #[arg(long, value_name = "TIME", value_parser = parse_instant)]
    pub at: Option<jiff::Timestamp>,
    /// Output format
    #[arg(short = 'o', long = "output", value_enum, default_value_t = WindowsFormat::Table)]
    pub output: WindowsFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WindowsFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Output format of the definitions
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CrdFormat::Yaml)]
    pub output: CrdFormat,
    /// Only capdeck's own definitions (RotationBatch, Freeze) or only the CAP Operator's
    /// (sme.sap.com); all when not given
    #[arg(long, value_enum, value_name = "SET")]
    pub only: Option<CrdSet>,
}

/// Whose definitions `capdeck crds --only` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdSet {
    /// capdeck.dev: RotationBatch, Freeze
    Capdeck,
    /// sme.sap.com: the CAP Operator's kinds
    CapOperator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CrdFormat {
    Yaml,
    Json,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::CommandFactory;

    use super::*;

    /// A credential given by mistake where a Secret reference belongs is not repeated in the
    /// error (clap's own would, into the container's log); a cluster's name is plain.
    #[test]
    fn secret_reference_errors_never_repeat_the_value() {
        for argv in [
            ["capdeck", "--daemon", "--notify-secret", "x@pagerduty=LEAKKEY"],
            ["capdeck", "--daemon", "--notify-secret", "https://hooks.slack.com/services/T0/B0/LEAKKEY"],
            ["capdeck", "--daemon", "--notify-signing-secret", "whsec_LEAKKEY"],
            ["capdeck", "manifests", "--notify-secret", "x@pagerduty=https://h/?routing_key=LEAKKEY"],
        ] {
            let error = Cli::parse_checked(argv).expect_err("refused").to_string();
            assert!(error.contains("not repeated here") && !error.contains("LEAKKEY"), "{error}");
        }
        for bad in ["prod\neu", "[x](https://e)", "", &"x".repeat(64)] {
            assert!(Cli::parse_checked(["capdeck", "--daemon", "--cluster-name", bad]).is_err(), "{bad:?}");
        }
        assert!(Cli::parse_checked(["capdeck", "--daemon", "--cluster-name", "prod-eu10"]).is_ok());
    }

    /// A namespace that is not a name is refused before any request (`../x` would be another
    /// URL, and its 404 read as a missing kind); `$CAPDECK_READONLY` takes the usual words, empty
    /// is unset, and anything else names the variable.
    #[test]
    fn namespaces_and_readonly_values_are_checked_at_parse_time() {
        for bad in ["../x", "a/b", "UP", "", "x-", "x.y", &"a".repeat(64)] {
            let error = Cli::parse_checked(["capdeck", "-n", bad, "batches"]).expect_err(bad).to_string();
            assert!(error.contains("is not a namespace name"), "{bad}: {error}");
        }
        let error = Cli::parse_checked(["capdeck", "--lease-namespace", "../x"]).expect_err("lease").to_string();
        assert!(error.contains("is not a namespace name"), "{error}");
        assert!(Cli::parse_checked(["capdeck", "-n", "cap-shop", "batches"]).is_ok());
        for (text, readonly) in [("true", true), ("1", true), ("Yes", true), ("on", true), ("", false), ("off", false)]
        {
            assert_eq!(parse::parse_readonly(text), Ok(readonly), "{text:?}");
        }
        let error = parse::parse_readonly("maybe").expect_err("maybe");
        assert!(error.contains("CAPDECK_READONLY") && error.contains("true/false"), "{error}");
    }

    /// The shortest valid command line of every subcommand (derived names; a new subcommand with
    /// required arguments fails here until it is given one).
    pub fn minimal(name: &str) -> Vec<&'static str> {
        match name {
            "plan" => vec!["plan", "-f", "x.yaml"],
            "approve" | "force" | "hold" | "release" | "cancel" | "retry" | "undo" => {
                vec![leak(name), "ns/batch", "--reason", "why"]
            }
            "freeze" => vec!["freeze", "--app", "ns/app", "--until", "4h", "--reason", "why"],
            "unfreeze" => vec!["unfreeze", "--app", "ns/app", "--reason", "why"],
            "deps" => vec!["deps", "--app", "ns/app"],
            "completion" => vec!["completion", "bash"],
            "kubectl-plugin" => vec!["kubectl-plugin", "install"],
            "windows" => vec!["windows", "Mon 22:00-23:00 UTC"],
            "bench" => vec!["bench", "engine"],
            other => vec![leak(other)],
        }
    }

    fn leak(text: &str) -> &'static str {
        Box::leak(text.to_string().into_boxed_str())
    }

    /// A valid value for a top-level flag, from its possible values or its value name.
    fn sample(arg: &clap::Arg) -> Option<String> {
        if !arg.get_action().takes_values() {
            return None;
        }
        if let Some(value) = arg.get_possible_values().iter().find(|value| value.get_name() != "auto") {
            return Some(value.get_name().to_string());
        }
        let name = arg.get_value_names().and_then(|names| names.first()).map(ToString::to_string).unwrap_or_default();
        Some(
            match name.as_str() {
                "DURATION" => "30s",
                "N" | "PER_SECOND" => "3",
                "BOOL" => "false",
                "ADDR" => "127.0.0.1:1",
                "MIN-MAX|off" => "off",
                "all|NAME,..." => "all",
                "[NAME@][FORMAT=]URL" => "http://127.0.0.1:9/hook",
                "NS/NAME:KEY" => "ns/notify:url",
                "[NAME@][FORMAT=]NS/NAME:KEY" => "oncall@pagerduty=ns/pd:routing-key",
                "WINDOWS" => "Mon-Fri 22:00-05:00 Europe/Berlin",
                _ => "x",
            }
            .to_string(),
        )
    }

    /// Every top-level flag against every subcommand, `--daemon` and the console: each is used
    /// (the front end's table says so and it parses) or refused with exit code 2 and a message
    /// that names the flag and where it belongs. Flags and subcommands come from clap, so a new
    /// one is walked too.
    #[test]
    fn listen_addresses_take_go_and_localhost_forms() {
        assert_eq!(parse_listen_addr(":8080").map(|a| a.to_string()).as_deref(), Ok("0.0.0.0:8080"));
        assert_eq!(parse_listen_addr("localhost:9").map(|a| a.to_string()).as_deref(), Ok("127.0.0.1:9"));
        assert_eq!(parse_listen_addr("[::1]:80").map(|a| a.to_string()).as_deref(), Ok("[::1]:80"));
        assert_eq!(
            parse_listen_addr("8080").err().as_deref(),
            Some(
                "\"8080\" is not an address to listen on: write IP:PORT or :PORT, such as 0.0.0.0:8080, 127.0.0.1:8080 or :8080"
            )
        );
    }

    #[test]
    fn as_kubectl_capdeck_usage_and_errors_say_kubectl_capdeck() {
        use std::ffi::OsStr;
        let plugin = format!("/home/u/.local/bin/kubectl-capdeck{}", std::env::consts::EXE_SUFFIX);
        assert_eq!(invoked_as(Some(OsStr::new(&plugin))), Some("kubectl capdeck"));
        for other in ["capdeck", "/usr/bin/capdeck", "kubectl-capdeck-x", "kubectl_complete-capdeck", "kubectl"] {
            assert_eq!(invoked_as(Some(OsStr::new(other))), None, "{other}");
        }
        assert_eq!(invoked_as(None), None);
        // The same flags, passed through by kubectl unchanged, parse the same.
        for argv0 in [plugin.as_str(), "capdeck"] {
            let error = Cli::parse_checked([argv0, "batches", "-n", "shop", "-A"]).expect_err("-n and -A conflict");
            assert!(error.to_string().contains("cannot be used with '--all-namespaces'"), "{error}");
        }
        let cli = Cli::parse_checked([plugin.as_str(), "-n", "shop", "--context", "prod", "batches"]).expect("parses");
        assert_eq!(cli.cluster.namespace.as_deref(), Some("shop"));
        assert_eq!(cli.cluster.context.as_deref(), Some("prod"));
        let usage = |argv: &[&str]| {
            let error = Cli::parse_checked(std::iter::once(plugin.as_str()).chain(argv.iter().copied()))
                .expect_err("a usage error");
            assert_eq!(error.exit_code(), 2, "{argv:?}");
            error.render().to_string()
        };
        assert!(usage(&["nope"]).contains("Usage: kubectl capdeck [OPTIONS] [COMMAND]"), "{}", usage(&["nope"]));
        let text = usage(&["batches", "--nope"]);
        assert!(text.contains("Usage: kubectl capdeck batches [OPTIONS]"), "{text}");
        let text = usage(&["hold", "ns/b", "--reason", "x", "--readonly"]);
        assert!(text.contains("`kubectl capdeck --readonly hold ...`"), "{text}");
        let text = usage(&["--expected-rollout", "5m", "credentials"]);
        assert!(text.contains("`kubectl capdeck credentials --expected-rollout ...`"), "{text}");
        // Run as capdeck, the same errors name capdeck.
        let error = Cli::parse_checked(["capdeck", "hold", "ns/b", "--reason", "x", "--readonly"]).expect_err("late");
        assert!(error.to_string().contains("`capdeck --readonly hold ...`"), "{error}");
        let help = Cli::command_as(Some(OsStr::new(&plugin))).render_help().to_string();
        assert!(help.contains("Usage: kubectl capdeck [OPTIONS] [COMMAND]"), "{help}");
    }

    #[test]
    fn a_top_level_flag_after_the_subcommand_says_where_it_belongs() {
        let table = [
            (
                &["hold", "ns/b", "--reason", "x", "--readonly"][..],
                "--readonly goes before the subcommand: `capdeck --readonly hold ...`",
            ),
            (
                &["batches", "--config=c.toml"],
                "--config PATH goes before the subcommand: `capdeck --config PATH batches ...`",
            ),
            (&["daemon", "--readonly"], "`daemon` writes to the cluster and never runs read-only: drop --readonly"),
            (&["batches", "--theme", "dark"], "--theme is a console flag; `batches` opens no console"),
            (
                &["tenants", "--rollout-delay", "5s"],
                "--rollout-delay configures the engine of the console and the daemon; `tenants` runs no engine",
            ),
            (
                &["tenants", "--health-addr", "127.0.0.1:1"],
                "--health-addr is for `capdeck daemon`; `tenants` is not the daemon",
            ),
            (
                &["tenants", "--daemon"],
                "--daemon runs the operator and takes no subcommand; drop `tenants` or --daemon",
            ),
        ];
        for (args, expected) in table {
            let argv: Vec<&str> = std::iter::once("capdeck").chain(args.iter().copied()).collect();
            let error = Cli::parse_checked(&argv).expect_err(&argv.join(" "));
            assert_eq!(error.exit_code(), 2, "{argv:?}");
            assert!(error.to_string().contains(expected), "{argv:?}: {error}");
        }
        // Not a top-level flag: clap's own words stay.
        let error = Cli::parse_checked(["capdeck", "batches", "--nope"]).expect_err("unknown");
        assert!(error.to_string().contains("unexpected argument '--nope'"), "{error}");
    }

    #[test]
    fn every_flag_is_used_or_refused_with_where_it_belongs() {
        let command = Cli::command();
        let mut fronts: Vec<(FrontEnd, Vec<&'static str>)> =
            vec![(FrontEnd::Console, vec![]), (FrontEnd::Daemon, vec!["--daemon"])];
        for sub in command.get_subcommands() {
            fronts.push((FrontEnd::Subcommand, minimal(sub.get_name())));
        }
        let mut walked = 0;
        for arg in command.get_arguments().filter(|arg| !arg.is_global_set()) {
            let id = arg.get_id().as_str();
            let Some(long) = arg.get_long() else { continue };
            if matches!(id, "help" | "version" | "daemon") {
                continue;
            }
            let group = FlagGroup::of(id);
            assert_ne!(group, FlagGroup::Other, "--{long} belongs to no group");
            for (front, rest) in &fronts {
                let mut argv = vec!["capdeck".to_string(), format!("--{long}")];
                argv.extend(sample(arg));
                // The demo rotation needs the demo; the demo is the console.
                if id == "demo_rotation" {
                    argv.push("--demo".into());
                }
                argv.extend(rest.iter().map(ToString::to_string));
                let parsed = Cli::parse_checked(&argv);
                let clash = matches!(id, "demo" | "demo_rotation" | "contexts") && *front == FrontEnd::Daemon;
                if front.uses(group) && !clash {
                    assert!(parsed.is_ok(), "{}: {:?}", argv.join(" "), parsed.err().map(|e| e.to_string()));
                } else {
                    let error = parsed.expect_err(&argv.join(" "));
                    assert_eq!(error.exit_code(), 2, "{}", argv.join(" "));
                    let text = error.to_string();
                    // `--demo-rotation` comes with `--demo`, which is named first.
                    let named = if id == "demo_rotation" { "--demo".to_string() } else { format!("--{long}") };
                    assert!(text.contains(&named) || clash, "{}: {text}", argv.join(" "));
                }
                walked += 1;
            }
        }
        assert!(walked > 300, "walked {walked} combinations");
        // The worst case: the same flag before the subcommand must not give another verdict.
        let error =
            Cli::parse_checked(["capdeck", "--expected-rollout", "5m", "credentials", "-A"]).expect_err("refused");
        assert!(error.to_string().contains("`capdeck credentials --expected-rollout ...`"), "{error}");
        let error = Cli::parse_checked(["capdeck", "--rollout-delay", "30s", "fleet"]).expect_err("refused");
        assert!(error.to_string().contains("goes after the subcommand"), "{error}");
        let error = Cli::parse_checked(["capdeck", "-n", "x", "crds"]).expect_err("crds reads no cluster");
        assert_eq!(error.exit_code(), 2);
        assert!(Cli::parse_checked(["capdeck", "-n", "x", "manifests"]).is_ok(), "manifests installs into -n");
        // --request-timeout: every command that reads a cluster, the console and the daemon; the
        // fleet has its own --timeout.
        for argv in [
            &["capdeck", "--request-timeout", "5s", "batches"][..],
            &["capdeck", "--request-timeout", "0"],
            &["capdeck", "--daemon", "--request-timeout", "1m"],
        ] {
            assert!(Cli::parse_checked(argv).is_ok(), "{argv:?}");
        }
        let error =
            Cli::parse_checked(["capdeck", "fleet", "--request-timeout", "5s"]).expect_err("fleet has --timeout");
        assert!(error.to_string().contains("--timeout"), "{error}");
        let error =
            Cli::parse_checked(["capdeck", "crds", "--request-timeout", "5s"]).expect_err("crds reads no cluster");
        assert!(error.to_string().contains("--request-timeout"), "{error}");
        for bad in ["", "Capdeck", "a/b", "engine-"] {
            let error = Cli::parse_checked(["capdeck", "doctor", "--lease-name", bad]).expect_err("not an object name");
            assert_eq!(error.exit_code(), 2, "{bad:?}");
            assert!(error.to_string().contains("not a Kubernetes object name"), "{error}");
        }
        let error = Cli::parse_checked(["capdeck", "--readonly", "--engine", "lead"]).expect_err("a usage error");
        assert_eq!(error.exit_code(), 2);
        let cli = Cli::parse_checked(["capdeck", "--readonly", "hold", "ns/b", "--reason", "x"]).expect("parses");
        assert_eq!(cli.readonly_from, Some(ReadonlyFrom::Flag), "the write is refused at run time, naming the flag");
    }

    /// `freeze` and `unfreeze` take their target from the cluster flags and `--app`; their own
    /// `--lease-namespace` is not the engine's, and the top-level flags keep their places.
    #[test]
    fn freeze_flags_have_their_places() {
        let freeze = ["freeze", "-A", "--until", "4h", "--reason", "x"];
        let cli = Cli::parse_checked(["capdeck"].iter().chain(&freeze).chain(&["--lease-namespace", "ops"]))
            .expect("the subcommand's own --lease-namespace");
        let Some(Command::Freeze(args)) = cli.command else { panic!("freeze") };
        assert_eq!(args.target.lease_namespace.as_deref(), Some("ops"));
        assert!(cli.cluster.all_namespaces, "-A after the subcommand is the cluster flag");
        let error = Cli::parse_checked(["capdeck", "--lease-namespace", "ops"].iter().chain(&freeze))
            .expect_err("the engine's --lease-namespace");
        assert!(error.to_string().contains("--lease-namespace goes after the subcommand"), "{error}");
        let error = Cli::parse_checked(["capdeck"].iter().chain(&freeze).chain(&["--readonly"])).expect_err("late");
        assert!(error.to_string().contains("`capdeck --readonly freeze ...`"), "{error}");
        let error = Cli::parse_checked(["capdeck", "freeze", "-n", "shop", "--reason", "x"]).expect_err("no --until");
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("--until"), "{error}");
        let error = Cli::parse_checked(["capdeck", "unfreeze", "-n", "shop"]).expect_err("no --reason");
        assert!(error.to_string().contains("--reason"), "{error}");
        let error = Cli::parse_checked(["capdeck", "freeze", "-n", "shop", "--until", "yesterday", "--reason", "x"])
            .expect_err("not a time");
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("is neither a time nor a duration"), "{error}");
        let error = Cli::parse_checked(["capdeck", "freezes", "-n", "shop", "-A"]).expect_err("-n or -A");
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn engine_flags_parse_with_defaults() {
        let cli = Cli::try_parse_from(["capdeck"]).expect("parses");
        assert_eq!(cli.engine.max_parallel_rollouts, 5);
        assert_eq!(cli.engine.min_rollout_interval, std::time::Duration::from_secs(600));
        assert!(Cli::try_parse_from(["capdeck", "--max-parallel-rollouts", "0"]).is_err());
        assert!(Cli::try_parse_from(["capdeck", "--min-rollout-interval", "banana"]).is_err());
        // Engine flags belong to the commands that run an engine (or check its settings) only.
        assert!(Cli::try_parse_from(["capdeck", "batches", "--approval", "manual"]).is_err());
        let before = Cli::parse_checked(["capdeck", "--approval", "manual", "batches"]).expect_err("silently ignored");
        assert_eq!(before.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(before.to_string().contains("--approval configures the engine"), "{before}");
        assert!(Cli::try_parse_from(["capdeck", "plan", "-f", "x", "--rollout-delay", "5m"]).is_err());
        let cli = Cli::try_parse_from(["capdeck", "doctor", "--rollout-delay", "5m"]).expect("doctor takes them");
        let Some(Command::Doctor(doctor)) = cli.command else { panic!("doctor") };
        assert_eq!(doctor.engine.rollout_delay.as_deref(), Some("5m"));
        assert!(Cli::parse_checked(["capdeck", "--daemon", "batches"]).is_err(), "--daemon takes no subcommand");
        assert!(Cli::parse_checked(["capdeck", "--daemon"]).is_ok());
    }

    #[test]
    fn console_flags_parse_and_conflicts_are_usage_errors() {
        let cli = Cli::parse_checked(["capdeck"]).expect("no arguments: the console");
        assert!(cli.command.is_none() && !cli.console.demo && !cli.console.readonly);
        assert_eq!(cli.console.demo_rotation, DemoRotation(Some((Duration::from_secs(20), Duration::from_secs(40)))));
        let cli = Cli::parse_checked(["capdeck", "--demo", "--demo-rotation", "off", "--theme", "light", "--readonly"])
            .expect("demo flags");
        assert!(cli.console.demo && cli.console.readonly);
        assert_eq!(cli.console.demo_rotation, DemoRotation(None));
        assert_eq!(cli.console.theme.as_deref(), Some("light"));
        let cli = Cli::parse_checked(["capdeck", "--demo", "--demo-rotation", "5s-1m"]).expect("range");
        assert_eq!(cli.console.demo_rotation, DemoRotation(Some((Duration::from_secs(5), Duration::from_secs(60)))));
        for bad in [
            &["capdeck", "--demo", "--daemon"][..],
            &["capdeck", "--demo", "batches"],
            &["capdeck", "--demo", "--context", "prod"],
            &["capdeck", "--demo-rotation", "off"],
            &["capdeck", "--demo", "--demo-rotation", "40s-20s"],
            &["capdeck", "--demo", "--demo-rotation", "often"],
        ] {
            let error = Cli::parse_checked(bad.iter().copied()).expect_err(&bad.join(" "));
            assert_eq!(error.exit_code(), 2, "{}", bad.join(" "));
        }
    }
}
