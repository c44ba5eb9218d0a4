//! `capdeck plan -f PATH`: the start-up re-check computed offline from manifests.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::cli::PlanArgs;
use crate::manifest;
use crate::output::Table;
use crate::plan::{CapIndex, Plan, PlanAction, plan_all};

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    args.output.refuse_name("plan").map_err(|error| crate::commands::UsageError(error.to_string()))?;
    let manifests = match manifest::load(&args.files) {
        Ok(manifests) => manifests,
        Err(error) => {
            crate::safe_eprintln!("error: {error}");
            return Ok(ExitCode::from(1));
        }
    };
    if manifests.objects == 0 {
        let paths: Vec<String> = args.files.iter().map(|p| p.display().to_string()).collect();
        crate::safe_eprintln!(
            "warning: no Kubernetes objects read from {} ({} manifest file(s) found: *.yaml, *.yml, *.json)",
            paths.join(", "),
            manifests.files
        );
    }
    let index = CapIndex::new(
        manifests.applications.clone(),
        manifests.versions.iter().cloned(),
        manifests.tenants.iter().cloned(),
    );
    let mut plan = plan_all(&index, &manifests);
    plan.problems.splice(0..0, manifests.problems.iter().cloned());
    // The static form of the credential margin, with the engine's window ($ROLLOUT_DELAY or 1h)
    // and a Deployment's default progress deadline.
    let (window, _) = crate::engine::config::parse_rollout_delay(std::env::var("ROLLOUT_DELAY").ok().as_deref());
    for (binding, message) in crate::credentials::short_ttls(&manifests.service_bindings, window) {
        plan.problems.push(crate::plan::Problem {
            namespace: binding.namespace().to_string(),
            application: None,
            deployment: None,
            secret: Some(binding.secret_name().to_string()),
            message,
            kind: crate::plan::ProblemKind::CredentialsTtl,
        });
    }
    let opted_out = index.applications().iter().filter(|app| !app.rollout_opted_in()).count();
    let document = plan_json(&plan, args.show_secrets);
    let text = crate::output::render_object(&args.output, "plan", &document, |wide, headers| {
        plan_table(&plan, args.show_secrets, opted_out, wide, headers)
    })
    .map_err(|error| crate::commands::UsageError(error.to_string()))?;
    crate::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn action_name(action: PlanAction) -> &'static str {
    match action {
        PlanAction::Restart => "Restart",
        PlanAction::Unchanged => "Unchanged",
        PlanAction::Missing => "Missing",
        PlanAction::NotOwned => "NotOwned",
    }
}

pub fn plan_json(plan: &Plan, show_secrets: bool) -> Value {
    let deployments: Vec<Value> = plan
        .deployments
        .iter()
        .map(|deployment| {
            let mut object = json!({
                "namespace": deployment.namespace,
                "application": deployment.application,
                "version": deployment.version,
                "workload": deployment.workload,
                "deployment": deployment.deployment,
                "action": action_name(deployment.action),
                "reason": deployment.reason,
                "currentSecret": deployment.current_secret,
                "services": deployment.services,
                "vcapSha256": deployment.payload.sha256(),
            });
            if show_secrets {
                object["vcapServices"] = Value::String(deployment.payload.expose().to_string());
            }
            object
        })
        .collect();
    json!({ "deployments": deployments, "problems": plan.problems })
}

fn plan_table(plan: &Plan, show_secrets: bool, opted_out: usize, wide: bool, headers: bool) -> String {
    let mut table = Table::with_wide(
        &["NAMESPACE", "APPLICATION", "DEPLOYMENT", "ACTION", "REASON"],
        &["VERSION", "CURRENT SECRET", "SERVICES"],
    );
    for deployment in &plan.deployments {
        table.row(vec![
            deployment.namespace.clone(),
            deployment.application.clone(),
            deployment.deployment.clone(),
            action_name(deployment.action).to_string(),
            deployment.reason.clone(),
            deployment.version.clone(),
            deployment.current_secret.clone().unwrap_or_else(|| "-".into()),
            deployment.services.join(","),
        ]);
    }
    let mut out =
        if table.is_empty() { "No affected Deployments.\n".to_string() } else { table.render_with(wide, headers) };
    let count = |action| plan.deployments.iter().filter(|deployment| deployment.action == action).count();
    out.push_str(&format!(
        "\n{} to restart, {} unchanged, {} missing, {} not owned (left alone), {} problem(s){}\n",
        count(PlanAction::Restart),
        count(PlanAction::Unchanged),
        count(PlanAction::Missing),
        count(PlanAction::NotOwned),
        plan.problems.len(),
        if opted_out > 0 { format!("; {opted_out} application(s) not opted in") } else { String::new() }
    ));
    if !plan.problems.is_empty() {
        let mut problems = Table::new(&["NAMESPACE", "APPLICATION", "DEPLOYMENT", "SECRET", "PROBLEM"]);
        for problem in &plan.problems {
            problems.row(vec![
                problem.namespace.clone(),
                problem.application.clone().unwrap_or_else(|| "-".into()),
                problem.deployment.clone().unwrap_or_else(|| "-".into()),
                problem.secret.clone().unwrap_or_else(|| "-".into()),
                problem.message.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&problems.render_with(wide, headers));
    }
    if show_secrets {
        for deployment in &plan.deployments {
            out.push_str(&format!(
                "\n{}/{} VCAP_SERVICES:\n{}\n",
                deployment.namespace,
                deployment.deployment,
                deployment.payload.expose()
            ));
        }
    }
    out
}
