use std::io::Write as _;
use std::process::ExitCode;

use crate::api::crds;
use crate::cli::{CrdFormat, CrdsArgs};

pub fn run(args: &CrdsArgs) -> anyhow::Result<ExitCode> {
    let text = match args.output {
        CrdFormat::Yaml => crds::all_yaml()?,
        CrdFormat::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds::all()});
            crate::output::json(&list)
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
