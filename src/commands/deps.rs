//! `capdeck deps --app NS/NAME [-f PATH...]`: the subscription dependencies of an application.

use std::process::ExitCode;

use kube::Api;

use crate::api::CAPApplication;
use crate::cli::DepsArgs;
use crate::cluster::{ClusterTarget, describe_error};
use crate::deps::{Dependency, DependencyReport, dependencies};
use crate::lookup::Objects;
use crate::output::{OutputFormat, Table};

pub async fn run(cluster: &ClusterTarget, args: &DepsArgs) -> anyhow::Result<ExitCode> {
    args.output.refuse_name("deps").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    // NAMESPACE/NAME, or NAME in -n (else the context's namespace; `default` for manifests).
    let default_namespace =
        if args.files.is_empty() { cluster.connect().await?.default_namespace } else { "default".to_string() };
    let crate::api::ObjectKey { namespace, name } = super::batches::target(
        cluster.namespace.as_deref(),
        cluster.all_namespaces,
        &default_namespace,
        "--app",
        &args.app,
    )?;
    let (namespace, name) = (namespace.as_str(), name.as_str());
    let report = if args.files.is_empty() {
        live(cluster, namespace, name).await?
    } else {
        let manifests = match crate::manifest::load(&args.files) {
            Ok(manifests) => manifests,
            Err(error) => {
                crate::safe_eprintln!("error: {error}");
                return Ok(ExitCode::from(1));
            }
        };
        let app = manifests
            .applications
            .iter()
            .find(|app| {
                kube::ResourceExt::namespace(app.as_ref()).as_deref() == Some(namespace)
                    && app.metadata.name.as_deref() == Some(name)
            })
            .ok_or_else(|| anyhow::anyhow!("no CAPApplication {namespace}/{name} in the manifests"))?;
        dependencies(app, &manifests)
    };
    // -o json is exactly the subscription server's answer (an array), as documented.
    let document = serde_json::to_value(&report.dependencies)?;
    let text = match args.output.format {
        OutputFormat::Json => crate::output::json_line(&report.dependencies)?,
        _ => crate::output::render_object(&args.output, "deps", &document, |_wide, headers| table(&report, headers))
            .map_err(|error| crate::commands::UsageError(error.to_string()))?,
    };
    crate::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

async fn live(cluster: &ClusterTarget, namespace: &str, name: &str) -> anyhow::Result<DependencyReport> {
    let connection = cluster.connect().await?;
    let apps: Api<crate::api::lenient::Lenient<CAPApplication>> = Api::namespaced(connection.client.clone(), namespace);
    let app = match apps.get_opt(name).await.map(|found| found.map(crate::api::lenient::Lenient::into_result)) {
        Ok(Some(Ok(app))) => app,
        Ok(Some(Err(undecodable))) => {
            anyhow::bail!("{}", crate::cluster::describe_undecodable("CAPApplication", &undecodable))
        }
        Ok(None) => anyhow::bail!("no CAPApplication {namespace}/{name} (list them with `kubectl get ca -A`)"),
        Err(error) => anyhow::bail!("cannot read CAPApplication {namespace}/{name}: {}", describe_error(&error)),
    };
    let mut fetched = Objects::default();
    for service in &app.spec.btp.services {
        let lookup = crate::cluster::read_secret(&connection.client, namespace, &service.secret).await;
        fetched.secrets.insert(crate::api::ObjectKey::new(namespace, service.secret.clone()), lookup);
    }
    Ok(dependencies(&app, &fetched))
}

/// The table shows every column already; `-o wide` prints the same.
fn table(report: &DependencyReport, headers: bool) -> String {
    let mut table = Table::new(&["SERVICE", "CLASS", "SECRET", "SETTING", "DEPENDENCY", "WHY"]);
    for service in &report.services {
        let dependency = match &service.dependency {
            Some(Dependency::Plain { xsappname }) => xsappname.clone(),
            Some(Dependency::Special { app_id, app_name }) => format!("{app_id} ({app_name})"),
            None => "-".into(),
        };
        table.row(vec![
            service.service.clone(),
            service.class.clone(),
            service.secret.clone(),
            service.setting.clone(),
            dependency,
            service.reason.clone(),
        ]);
    }
    let summary = match report.dependencies.len() {
        1 => "1 dependency".to_string(),
        n => format!("{n} dependencies"),
    };
    if table.is_empty() {
        "The application has no services.\n".into()
    } else {
        format!("{}\n{summary} in the getDependencies answer.\n", table.render_with(false, headers))
    }
}
