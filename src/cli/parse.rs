//! Value parsers of the flags, and the words of the usage errors parse_checked gives.

use super::*;

/// An address to listen on: `HOST:PORT` with an IP, `:PORT` (every interface, as Go servers
/// write it) or `localhost:PORT`.
pub(super) fn parse_listen_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let spelled = if let Some(port) = text.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else if let Some(port) = text.strip_prefix("localhost:") {
        format!("127.0.0.1:{port}")
    } else {
        text.to_string()
    };
    spelled.parse().map_err(|_| {
        format!("{text:?} is not an address to listen on: write IP:PORT or :PORT, such as 0.0.0.0:8080, 127.0.0.1:8080 or :8080")
    })
}

/// A top-level flag written after a subcommand that has no flag of that name (clap says only
/// "unexpected argument"): say where it belongs instead.
pub(super) fn top_level_flag_after_subcommand(
    command: &clap::Command,
    args: &[std::ffi::OsString],
    error: &clap::Error,
) -> Option<clap::Error> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(given)) = error.get(ContextKind::InvalidArg) else { return None };
    let long = given.strip_prefix("--")?.split('=').next()?;
    let arg = command.get_arguments().find(|arg| arg.get_long() == Some(long) && !arg.is_global_set())?;
    let name = args.iter().skip(1).find_map(|a| a.to_str().filter(|text| command.find_subcommand(text).is_some()))?;
    let group = FlagGroup::of(arg.get_id().as_str());
    let message = match group {
        _ if long == "daemon" => {
            format!("--daemon runs the operator and takes no subcommand; drop `{name}` or --daemon")
        }
        // Before it, the daemon would only refuse to run: say so, not where the flag goes.
        _ if long == "readonly" && name == "daemon" => {
            "`daemon` writes to the cluster and never runs read-only: drop --readonly (the console observes \
             when read-only)"
                .to_string()
        }
        _ if FrontEnd::Subcommand.uses(group) => {
            // A flag with a value is shown with it (`--config PATH`).
            let value = arg
                .get_value_names()
                .and_then(|names| names.first())
                .filter(|_| arg.get_action().takes_values())
                .map(|v| format!(" {v}"))
                .unwrap_or_default();
            format!(
                "--{long}{value} goes before the subcommand: `{} --{long}{value} {name} ...`",
                invoked_name(command)
            )
        }
        _ => not_used_here(&format!("--{long}"), group, &format!("`{name}`")),
    };
    Some(command.clone().error(ErrorKind::ArgumentConflict, message))
}

/// Why flag `long` of `group` does not fit `where_` (`` `batches` ``, `--daemon`, the console).
pub(super) fn not_used_here(long: &str, group: FlagGroup, where_: &str) -> String {
    match group {
        // `manifests` passes Secret references to the daemon it installs, never a URL.
        FlagGroup::Engine if long == "--notify" && where_ == "`manifests`" => format!(
            "{long} configures the engine of the console and the daemon; `manifests` runs no engine: give the \
             daemon it installs the URL from a Secret with --notify-secret NS/SECRET:KEY (a URL in a manifest is \
             readable by anyone who may read the Deployment)"
        ),
        FlagGroup::Engine => {
            format!("{long} configures the engine of the console and the daemon; {where_} runs no engine")
        }
        FlagGroup::Console => format!("{long} is a console flag; {where_} opens no console"),
        _ => format!("{long} is for `capdeck daemon`; {where_} is not the daemon"),
    }
}

/// A Kubernetes object name (a Lease's): refused at parse time, not by the API server later.
pub(super) fn parse_object_name(text: &str) -> Result<String, String> {
    if crate::api::common::is_dns_subdomain(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not a Kubernetes object name: lower-case letters, digits, '-' and '.', starting and ending \
             with a letter or digit (such as capdeck-engine)"
        ))
    }
}

/// A namespace (`-n`, `--lease-namespace`): refused at parse time, where a path-like value such as
/// `../x` would otherwise reach the API server as another URL and come back a misleading 404.
pub(super) fn parse_namespace(text: &str) -> Result<String, String> {
    if crate::api::common::is_dns_label(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{text:?} is not a namespace name: at most 63 lower-case letters, digits and '-', starting and ending \
             with a letter or digit (such as cap-shop)"
        ))
    }
}

/// `--readonly` / `$CAPDECK_READONLY`: true/false, 1/0, yes/no, on/off; an exported but empty
/// variable is unset (false).
pub(super) fn parse_readonly(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "on" => Ok(true),
        "" | "false" | "0" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!(
            "{text:?} is not a yes or a no: CAPDECK_READONLY (like --readonly=VALUE) takes true/false, 1/0, \
             yes/no or on/off"
        )),
    }
}

/// `20s-40s` → a range; `off` → none.
pub(super) fn parse_rotation(text: &str) -> Result<DemoRotation, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(DemoRotation(None));
    }
    let (min, max) = text.split_once('-').unwrap_or((text, text));
    let min = crate::engine::config::parse_go_duration(min).map_err(|e| e.to_string())?;
    let max = crate::engine::config::parse_go_duration(max).map_err(|e| e.to_string())?;
    if min.is_zero() || max < min {
        return Err(format!("{text:?}: expected MIN-MAX with 0 < MIN <= MAX (e.g. 20s-40s), or off"));
    }
    Ok(DemoRotation(Some((min, max))))
}

/// Parsed at once, so a bad value is a usage error naming the range.
pub(super) fn parse_change_windows(text: &str) -> Result<ClusterWindows, String> {
    if text.trim().is_empty() {
        return Ok(ClusterWindows(None));
    }
    crate::api::change_window::ChangeWindows::parse(text)
        .map(|windows| ClusterWindows(Some(windows)))
        .map_err(|error| format!("{error} (see docs/WINDOWS.md)"))
}

/// `--rollout-delay`: a Go duration with a unit. `30` alone is refused (it would silently have
/// meant the 1h fallback).
pub(super) fn go_duration_text(text: &str) -> Result<String, String> {
    crate::engine::config::parse_go_duration(text)
        .map(|_| text.trim().to_string())
        .map_err(|error| format!("{error} (a Go duration with its unit: 30s, 15m, 1h30m)"))
}

/// `--write-qps`: writes per second, 0 (no limit) or a finite number from `MIN_QPS` up.
pub(super) fn parse_write_qps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(qps) if qps == 0.0 || qps.is_finite() && qps >= crate::engine::write_rate::MIN_QPS => Ok(qps),
        _ => Err(format!(
            "`{text}` is not a number of writes per second from {} up (25, 0.5; 0 for no limit)",
            crate::engine::write_rate::MIN_QPS
        )),
    }
}

/// A reason is an explanation: blank text is none.
pub(super) fn non_blank(text: &str) -> Result<String, String> {
    crate::api::common::check_reason(text)
}

pub(super) fn parse_synthetic(text: &str) -> Result<SyntheticSize, String> {
    let parts: Vec<usize> = text
        .split(':')
        .map(|part| part.parse::<usize>().map_err(|_| format!("{part:?} is not a number")))
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [apps, deployments, services, unreferenced] => Ok(SyntheticSize {
            apps: *apps,
            deployments_per_app: *deployments,
            services_per_app: *services,
            unreferenced_secrets: *unreferenced,
        }),
        _ => Err("expected APPS:DEPLOYMENTS:SERVICES:UNREFERENCED".into()),
    }
}

pub(super) fn parse_instant(text: &str) -> Result<jiff::Timestamp, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an instant: write RFC 3339 such as 2026-03-28T12:00:00Z (leave out --at for now)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_rate_is_a_finite_number_from_zero() {
        assert_eq!(parse_write_qps("25"), Ok(25.0));
        assert_eq!(parse_write_qps(" 0.5 "), Ok(0.5));
        assert_eq!(parse_write_qps("0"), Ok(0.0), "no limit");
        assert_eq!(parse_write_qps("1e9"), Ok(1e9), "as good as no limit");
        for bad in ["-1", "NaN", "inf", "fast", "", "0.001", "1e-300"] {
            let error = parse_write_qps(bad).expect_err(bad);
            assert!(error.contains("writes per second"), "{bad}: {error}");
        }
    }
}

/// `--cluster-name`: what every notification and incident key calls the cluster, so plain:
/// letters, digits, `-`, `_` and `.`, at most 63.
pub(super) fn parse_cluster_name(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(text.to_string())
    } else {
        Err("a cluster's name is 1 to 63 letters, digits, '-', '_' and '.' (it names the cluster in every \
             notification and incident key), e.g. prod-eu10"
            .into())
    }
}

/// The value parser of a flag whose value may hold a credential by mistake (a URL or key where a
/// Secret reference belongs): its error says what is wrong without repeating the value, which
/// clap's own "invalid value '…'" would put in the container's log.
#[derive(Clone)]
pub struct Redacted<T>(std::marker::PhantomData<T>);

impl<T> Redacted<T> {
    pub const fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T> Default for Redacted<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> clap::builder::TypedValueParser for Redacted<T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.and_then(clap::Arg::get_long).map_or_else(String::new, |long| format!("--{long}"));
        let why = match value.to_str() {
            Some(text) => match text.parse::<T>() {
                Ok(parsed) => return Ok(parsed),
                Err(why) => why,
            },
            None => "the value is not UTF-8".to_string(),
        };
        let message = format!("invalid value for '{flag}' (not repeated here: it may hold a credential): {why}\n");
        let mut command = command.clone();
        Err(clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).format(&mut command))
    }
}
