//! `capdeck freeze`, `capdeck unfreeze` and `capdeck freezes`: the target from the command line
//! (`-n`, `-A`, `--app`), where the cluster's freeze goes (the leading engine's Lease), the
//! identity, and what the write did, in words.

use std::io::Write as _;
use std::process::ExitCode;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::UsageError;
use crate::api::common::{MAX_REASON, MAX_USER, bounded};
use crate::api::{Freeze, ObjectKey};
use crate::cli::{FreezeArgs, FreezeTargetArgs, FreezesArgs, UnfreezeArgs};
use crate::cluster::{ClusterTarget, Connection, Scope, describe_error, who_am_i};
use crate::freezes::{FreezeReport, FreezeState, Target, in_text};
use crate::leadership::{DEFAULT_LEASE_NAME, EngineScope, LeaderView};
use crate::output::{OutputFormat, Printable, SafeOut, Table};

const FORMS: &str = "-n NAMESPACE (every application of a namespace), --app NAMESPACE/NAME (one CAPApplication) or \
                     -A (every namespace the engine serves)";

/// The target as given, before the cluster says where the cluster's freeze lives.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Given {
    Namespace(String),
    Application { namespace: String, name: String },
    Cluster,
}

/// Exactly one of `-n NS`, `-A`, `--app NS/NAME`; `--lease-namespace` only with `-A`.
fn given(verb: &str, namespace: Option<&str>, all: bool, target: &FreezeTargetArgs) -> Result<Given, UsageError> {
    let named: Vec<String> = [
        namespace.map(|namespace| format!("-n {namespace}")),
        all.then(|| "-A".to_string()),
        target.app.as_ref().map(|app| format!("--app {app}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let found = match (namespace, all, target.app.as_deref()) {
        _ if named.len() > 1 => {
            return Err(UsageError(format!(
                "{} each name what to {verb}; give exactly one: {FORMS}",
                named.join(" and ")
            )));
        }
        (Some(namespace), _, _) if !namespace.trim().is_empty() => Given::Namespace(namespace.trim().to_string()),
        (_, true, _) => Given::Cluster,
        (_, _, Some(app)) => match app.split('/').collect::<Vec<_>>().as_slice() {
            [namespace, name] if !namespace.is_empty() && !name.is_empty() => {
                Given::Application { namespace: (*namespace).into(), name: (*name).into() }
            }
            _ => return Err(UsageError(format!("--app {app:?} is not NAMESPACE/NAME (such as shop/bookshop)"))),
        },
        _ => return Err(UsageError(format!("say what to {verb}: {FORMS}"))),
    };
    if target.lease_namespace.is_some() && found != Given::Cluster {
        return Err(UsageError(
            "--lease-namespace is for -A (where the cluster's freeze goes when no leading engine is found); -n and \
             --app name their namespace"
                .into(),
        ));
    }
    Ok(found)
}

/// How the target was given, for the read-only refusal (`-n shop`, `--app shop/bookshop`, `-A`).
pub(super) fn target_words(cluster: &ClusterTarget, target: &FreezeTargetArgs) -> String {
    let words: Vec<String> = [
        cluster.namespace.as_ref().map(|namespace| format!("-n {namespace}")),
        cluster.all_namespaces.then(|| "-A".to_string()),
        target.app.as_ref().map(|app| format!("--app {app}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    words.join(" ")
}

/// The target, with the cluster's freeze placed in the namespace of the leading engine's Lease
/// (else `--lease-namespace`, else the install namespace), and a line saying where and why.
async fn resolve(connection: &Connection, given: Given, lease_namespace: Option<&str>) -> (Target, Option<String>) {
    match given {
        Given::Namespace(namespace) => (Target::Namespace(namespace), None),
        Given::Application { namespace, name } => (Target::Application { namespace, name }, None),
        Given::Cluster => {
            let fallback: Vec<ObjectKey> =
                lease_namespace.map(|ns| vec![ObjectKey::new(ns, DEFAULT_LEASE_NAME)]).unwrap_or_default();
            let leader = crate::leadership::find(&connection.client, &Scope::All, &fallback).await;
            let (namespace, why) = cluster_namespace(&leader, lease_namespace);
            (Target::Cluster { lease_namespace: namespace }, Some(why))
        }
    }
}

/// Where the cluster's freeze goes, and why there (pure: the leader as found).
fn cluster_namespace(leader: &LeaderView, flag: Option<&str>) -> (String, String) {
    if let LeaderView::Leads { lease, identity, scope, .. } = leader {
        let namespace = lease.split('/').next().unwrap_or_default().to_string();
        let mut why = format!(
            "the cluster's freeze is kept in namespace {namespace}, where the leading engine {identity} has its \
             Lease {lease}"
        );
        if let EngineScope::Namespace(served) = scope {
            why.push_str(&format!(" (that engine serves namespace {served} only)"));
        }
        if let Some(flag) = flag.filter(|flag| *flag != namespace) {
            why.push_str(&format!("; --lease-namespace {flag} counts only when no leader is found"));
        }
        return (namespace, why);
    }
    let found = leader.to_string();
    match flag {
        Some(flag) => {
            (flag.to_string(), format!("{found}; the cluster's freeze is kept in namespace {flag} (--lease-namespace)"))
        }
        None => (
            crate::leadership::INSTALL_NAMESPACE.to_string(),
            format!(
                "{found}; the cluster's freeze is kept in namespace {} (where capdeck manifests installs the engine; \
                 --lease-namespace chooses another): an engine honours it only if its Lease is there",
                crate::leadership::INSTALL_NAMESPACE
            ),
        ),
    }
}

/// `--app`'s CAPApplication must exist before it is frozen. Not allowed to read it: say so and
/// go on (the freeze's RBAC is what counts).
async fn application_exists(connection: &Connection, target: &Target) -> Result<(), String> {
    let Target::Application { namespace, name } = target else { return Ok(()) };
    // Existence only: an application that does not decode still exists.
    let api: Api<crate::api::lenient::Lenient<crate::api::CAPApplication>> =
        Api::namespaced(connection.client.clone(), namespace);
    let hint = format!(
        "kubectl get capapplications -n {namespace} lists the applications, capdeck freezes -n {namespace} the \
         freezes"
    );
    match api.get(name).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 && crate::freezes::kind_missing(&status.message) => {
            Err(format!("the cluster has no CAPApplication kind, so no CAPApplication {namespace}/{name} ({hint})"))
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(format!("CAPApplication {namespace}/{name} does not exist ({hint})"))
        }
        Err(error) => {
            crate::safe_eprintln!(
                "note: cannot check that CAPApplication {namespace}/{name} exists: {}",
                describe_error(&error)
            );
            Ok(())
        }
    }
}

/// Who the write is recorded as; `None` (said on stderr) when the server does not say.
async fn identity(connection: &Connection, verb: &str, target: &Target) -> Option<String> {
    match who_am_i(&connection.client).await {
        Ok(user) => Some(user),
        Err(why) => {
            crate::safe_eprintln!(
                "error: cannot {verb} {}: the API server at {} did not say who you are ({why}), and capdeck records \
                 who froze and who lifted every freeze; check `kubectl auth whoami`",
                target.describe(),
                connection.server
            );
            None
        }
    }
}

pub async fn freeze(cluster: &ClusterTarget, args: &FreezeArgs) -> anyhow::Result<ExitCode> {
    let given = given("freeze", cluster.namespace.as_deref(), cluster.all_namespaces, &args.target)?;
    let now = Timestamp::now();
    let until = args.until.resolve(now).map_err(UsageError)?;
    let connection = cluster.connect().await?;
    let (target, placed) = resolve(&connection, given, args.target.lease_namespace.as_deref()).await;
    if let Err(refusal) = application_exists(&connection, &target).await {
        crate::safe_eprintln!("error: cannot freeze {}: {refusal}", target.describe());
        return Ok(ExitCode::from(1));
    }
    let Some(user) = identity(&connection, "freeze", &target).await else { return Ok(ExitCode::from(1)) };
    let mut out = SafeOut(std::io::stdout().lock());
    if args.dry_run {
        let current = match crate::freezes::current(&connection.client, &target).await {
            Ok(current) => current,
            Err(error) => {
                crate::safe_eprintln!("error: cannot freeze {}: {error}", target.describe());
                return Ok(ExitCode::from(1));
            }
        };
        let object = crate::freezes::new_freeze(&target, &user, &args.reason, now, until);
        let report = FreezeReport { target: target.clone(), by: user, freeze: object.clone(), previous: current };
        writeln!(out, "dry run, nothing written: it would {}", would(&report.frozen_summary(now)))?;
        if let Some(placed) = placed {
            writeln!(out, "{placed}")?;
        }
        let verb = if report.previous.is_some() { "replace" } else { "create" };
        writeln!(out, "the Freeze it would {verb} ({}):", crate::freezes::key(&object))?;
        out.write_all(crate::output::yaml(&serde_json::to_value(&object)?).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    match crate::freezes::freeze(&connection.client, &target, &user, &args.reason, until, now).await {
        Ok(report) => {
            writeln!(out, "{}", report.frozen_summary(now))?;
            if let Some(placed) = placed {
                writeln!(out, "{placed}")?;
            }
            writeln!(out, "reason: {}", crate::output::terminal_safe(&args.reason, false))?;
            writeln!(
                out,
                "a batch whose old credentials would be revoked before then asks for an approval instead of \
                 waiting (DeadlineDuringFreeze); lift the freeze early with `capdeck unfreeze {} --reason ...`",
                target.flags()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            crate::safe_eprintln!("error: cannot freeze {}: {error}", target.describe());
            Ok(ExitCode::from(1))
        }
    }
}

/// `froze …` → `freeze …`: the dry run says the same sentence as what it would do.
fn would(summary: &str) -> String {
    summary
        .replacen("froze ", "freeze ", 1)
        .replacen(" collect but do not roll", " would collect but not roll", 1)
        .replacen("; it replaces ", "; it would replace ", 1)
}

pub async fn unfreeze(cluster: &ClusterTarget, args: &UnfreezeArgs) -> anyhow::Result<ExitCode> {
    let given = given("unfreeze", cluster.namespace.as_deref(), cluster.all_namespaces, &args.target)?;
    let now = Timestamp::now();
    let connection = cluster.connect().await?;
    let (target, placed) = resolve(&connection, given, args.target.lease_namespace.as_deref()).await;
    let Some(user) = identity(&connection, "unfreeze", &target).await else { return Ok(ExitCode::from(1)) };
    let mut out = SafeOut(std::io::stdout().lock());
    if args.dry_run {
        let checked = match crate::freezes::current(&connection.client, &target).await {
            Ok(Some(current)) => match crate::freezes::lift_refusal(&target, &current, now) {
                None => Ok(current),
                Some(refusal) => Err(refusal),
            },
            Ok(None) => Err(crate::freezes::not_found(&target).to_string()),
            Err(error) => Err(error.to_string()),
        };
        let current = match checked {
            Ok(current) => current,
            Err(refusal) => {
                crate::safe_eprintln!("error: cannot unfreeze {}: {refusal}", target.describe());
                return Ok(ExitCode::from(1));
            }
        };
        let report = FreezeReport { target: target.clone(), by: user, freeze: current.clone(), previous: None };
        let said =
            report.lifted_summary().replacen("lifted ", "lift ", 1).replacen(" roll again", " would roll again", 1);
        writeln!(out, "dry run, nothing written: it would {said}")?;
        writeln!(out, "the Freeze it would update: {}", crate::freezes::key(&current))?;
        return Ok(ExitCode::SUCCESS);
    }
    match crate::freezes::unfreeze(&connection.client, &target, &user, &args.reason, now).await {
        Ok(report) => {
            writeln!(out, "{}", report.lifted_summary())?;
            if let Some(placed) = placed {
                writeln!(out, "{placed}")?;
            }
            writeln!(out, "reason: {}", crate::output::terminal_safe(&args.reason, false))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            crate::safe_eprintln!("error: cannot unfreeze {}: {error}", target.describe());
            Ok(ExitCode::from(1))
        }
    }
}

/// `capdeck freezes`: every Freeze in the scope.
pub async fn list(cluster: &ClusterTarget, args: &FreezesArgs) -> anyhow::Result<ExitCode> {
    let connection = cluster.connect().await?;
    let scope = cluster.scope(&connection);
    let api: Api<crate::api::lenient::Lenient<Freeze>> = scope.api(&connection.client);
    let mut freezes = match crate::cluster::list_each(&api, &ListParams::default()).await {
        Ok(listed) => {
            super::warn_undecodable("Freeze", &listed.undecodable);
            listed.items
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            anyhow::bail!("{}", crate::freezes::FreezeError::NoKind)
        }
        Err(kube::Error::Api(status)) if status.code == 403 => anyhow::bail!(
            "you may not list freezes.capdeck.dev in {} (ask for a Role that grants list on freezes; docs/WINDOWS.md, \
             Freezes, has one)",
            scope.label()
        ),
        Err(error) => anyhow::bail!("cannot list freezes: {}", describe_error(&error)),
    };
    freezes.sort_by_key(|freeze| (freeze.namespace(), freeze.name_any()));
    let printable = printable(&freezes, Timestamp::now());
    let text = printable.render(&args.output, "freezes").map_err(|error| UsageError(error.to_string()))?;
    if printable.table.is_empty() && matches!(args.output.format, OutputFormat::Table | OutputFormat::Wide) {
        let missing = super::batches::missing_namespace(&connection, &scope).await;
        let elsewhere = match (&scope, &missing) {
            (Scope::Namespace(_), None) => {
                " (capdeck freezes -A looks in every namespace, also where the cluster's freeze is)".to_string()
            }
            _ => String::new(),
        };
        crate::safe_eprintln!(
            "No freezes in {}.{}{elsewhere}",
            scope.label(),
            missing.map(|note| format!(" {note}")).unwrap_or_default()
        );
    } else {
        crate::output::print(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn printable(freezes: &[Freeze], now: Timestamp) -> Printable {
    let mut table = Table::with_wide(
        &["NAMESPACE", "TARGET", "STATE", "FROM", "UNTIL", "BY", "REASON", "LIFTED BY"],
        &["NAME", "LIFTED AT", "LIFT REASON"],
    );
    for freeze in freezes {
        let spec = &freeze.spec;
        let state = FreezeState::of(freeze, now);
        let until = match state {
            FreezeState::Active if crate::api::lenient::is_forever(spec.until.0) => "forever".into(),
            FreezeState::Active => format!("{} ({})", spec.until.0, in_text(spec.until.0, now)),
            _ => spec.until.0.to_string(),
        };
        let lifted = spec.lifted.as_ref();
        let reason = |text: Option<&String>| text.map_or_else(|| "-".into(), |r| bounded(r, MAX_REASON).into_owned());
        table.row(vec![
            freeze.namespace().unwrap_or_default(),
            freeze.target(),
            state.as_str().into(),
            spec.frozen.at.0.to_string(),
            until,
            bounded(&spec.frozen.by, MAX_USER).into_owned(),
            reason(spec.frozen.reason.as_ref()),
            lifted.map_or_else(|| "-".into(), |lifted| bounded(&lifted.by, MAX_USER).into_owned()),
            freeze.name_any(),
            lifted.map_or_else(|| "-".into(), |lifted| lifted.at.0.to_string()),
            reason(lifted.and_then(|lifted| lifted.reason.as_ref())),
        ]);
    }
    Printable::list(
        table,
        freezes.iter().map(|freeze| freeze_json(freeze, now)).collect(),
        freezes.iter().map(crate::freezes::key).collect(),
    )
}

fn freeze_json(freeze: &Freeze, now: Timestamp) -> Value {
    json!({
        "namespace": freeze.namespace(),
        "name": freeze.name_any(),
        "target": freeze.target(),
        "scope": freeze.spec.scope,
        "application": freeze.spec.application,
        "state": FreezeState::of(freeze, now).as_str(),
        "frozen": freeze.spec.frozen,
        "until": freeze.spec.until,
        "lifted": freeze.spec.lifted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(app: Option<&str>, lease_namespace: Option<&str>) -> FreezeTargetArgs {
        FreezeTargetArgs { app: app.map(str::to_string), lease_namespace: lease_namespace.map(str::to_string) }
    }

    #[test]
    fn exactly_one_target_in_one_of_three_forms() {
        let application =
            |namespace: &str, name: &str| Given::Application { namespace: namespace.into(), name: name.into() };
        // -n, -A, --app, --lease-namespace, and what they make.
        type Case<'a> = (Option<&'a str>, bool, Option<&'a str>, Option<&'a str>, Result<Given, &'a str>);
        let table: [Case<'_>; 11] = [
            (Some("shop"), false, None, None, Ok(Given::Namespace("shop".into()))),
            (None, true, None, None, Ok(Given::Cluster)),
            (None, true, None, Some("ops"), Ok(Given::Cluster)),
            (None, false, Some("shop/bookshop"), None, Ok(application("shop", "bookshop"))),
            (
                None,
                false,
                None,
                None,
                Err("say what to freeze: -n NAMESPACE (every application of a namespace), --app"),
            ),
            (
                Some("shop"),
                false,
                Some("shop/bookshop"),
                None,
                Err("-n shop and --app shop/bookshop each name what to freeze; give exactly one: -n NAMESPACE"),
            ),
            (None, true, Some("shop/bookshop"), None, Err("-A and --app shop/bookshop each name what to freeze")),
            (
                None,
                false,
                Some("bookshop"),
                None,
                Err("--app \"bookshop\" is not NAMESPACE/NAME (such as shop/bookshop)"),
            ),
            (None, false, Some("shop/"), None, Err("is not NAMESPACE/NAME")),
            (None, false, Some("a/b/c"), None, Err("is not NAMESPACE/NAME")),
            (Some("shop"), false, None, Some("ops"), Err("--lease-namespace is for -A")),
        ];
        for (namespace, all, app, lease, expected) in table {
            let found = given("freeze", namespace, all, &target(app, lease)).map_err(|error| error.0);
            match expected {
                Ok(expected) => assert_eq!(found, Ok(expected), "{namespace:?} {all} {app:?}"),
                Err(says) => {
                    let error = found.expect_err(says);
                    assert!(error.contains(says), "{namespace:?} {all} {app:?}: {error}");
                }
            }
        }
    }

    #[test]
    fn the_cluster_freeze_goes_where_the_leader_keeps_its_lease() {
        let leads = |scope: EngineScope| LeaderView::Leads {
            lease: "ops/capdeck-engine".into(),
            identity: "capdeck-7d9".into(),
            renewed_ago: 2,
            scope,
            settings: None,
        };
        let (namespace, why) = cluster_namespace(&leads(EngineScope::All), None);
        assert_eq!(namespace, "ops");
        assert_eq!(
            why,
            "the cluster's freeze is kept in namespace ops, where the leading engine capdeck-7d9 has its Lease \
             ops/capdeck-engine"
        );
        let (namespace, why) = cluster_namespace(&leads(EngineScope::Namespace("shop".into())), Some("elsewhere"));
        assert_eq!(namespace, "ops", "the leader wins over the flag");
        assert!(why.ends_with(
            " (that engine serves namespace shop only); --lease-namespace elsewhere counts only when no leader is found"
        ));
        let nobody = LeaderView::Nobody { detail: "no capdeck engine runs for this scope".into() };
        let (namespace, why) = cluster_namespace(&nobody, Some("elsewhere"));
        assert_eq!(namespace, "elsewhere");
        assert_eq!(
            why,
            "nobody leads: no capdeck engine runs for this scope; the cluster's freeze is kept in namespace elsewhere \
             (--lease-namespace)"
        );
        let cannot = LeaderView::CannotLook { reason: "you may not list leases".into() };
        let (namespace, why) = cluster_namespace(&cannot, None);
        assert_eq!(namespace, "capdeck-system");
        assert!(why.starts_with("cannot tell who leads: you may not list leases; the cluster's freeze is kept in namespace capdeck-system (where capdeck manifests installs"), "{why}");
    }

    #[test]
    fn the_dry_run_says_what_it_would_do() {
        assert_eq!(
            would(
                "froze namespace shop as alice until T (in 4h): batches of namespace shop collect but do not roll until then; it replaces the freeze by bob lifted by carol"
            ),
            "freeze namespace shop as alice until T (in 4h): batches of namespace shop would collect but not roll until then; it would replace the freeze by bob lifted by carol"
        );
    }
}
