use std::io::Write as _;
use std::process::ExitCode;

use crate::api::crds;
use crate::cli::{CrdFormat, CrdSet, CrdsArgs};

pub fn run(args: &CrdsArgs) -> anyhow::Result<ExitCode> {
    let chosen: Vec<_> = crds::all()
        .into_iter()
        .filter(|crd| {
            let ours = crd.spec.group == crds::CAPDECK_GROUP;
            match args.only {
                None => true,
                Some(CrdSet::Capdeck) => ours,
                Some(CrdSet::CapOperator) => !ours,
            }
        })
        .collect();
    let text = match args.output {
        CrdFormat::Yaml => crds::to_yaml_stream(&chosen)?,
        CrdFormat::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": chosen});
            crate::output::json(&list)
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
