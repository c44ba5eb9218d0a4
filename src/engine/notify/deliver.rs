//! Sending one body to one receiver over HTTP(S), with retries. Errors name the status or the
//! failure, never the URL (it is the receiver's credential).

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::super::config::{NotifyTarget, RetryPolicy};

/// An HTTP client for http and https receivers (the system's root certificates).
pub struct Sender {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Sender {
    pub fn new() -> Result<Self, String> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
            .map_err(|error| format!("no root certificates: {error}"))?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self { client: Client::builder(TokioExecutor::new()).build(https) })
    }

    /// One POST; the status code, or why there is none.
    async fn post(&self, url: &str, body: Vec<u8>) -> Result<u16, String> {
        let request = hyper::Request::post(url)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, concat!("capdeck/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| "the URL cannot be requested".to_string())?;
        let response = self.client.request(request).await.map_err(|error| {
            // hyper's error text can include the URI: say only what kind of failure it was.
            if error.is_connect() { "cannot connect".to_string() } else { "the request failed".to_string() }
        })?;
        Ok(response.status().as_u16())
    }
}

/// Whether trying again later can help.
fn retriable(code: u16) -> bool {
    matches!(code, 408 | 429 | 500..=599)
}

/// Deliver `body` to `target`; `Err` names the last failure after every try.
pub async fn deliver(sender: &Sender, target: &NotifyTarget, body: Vec<u8>, retry: RetryPolicy) -> Result<(), String> {
    let mut backoff = retry.first_backoff;
    let mut last = String::from("not tried");
    for attempt in 1..=retry.attempts.max(1) {
        match tokio::time::timeout(retry.attempt_timeout, sender.post(target.url(), body.clone())).await {
            Ok(Ok(code)) if (200..300).contains(&code) => return Ok(()),
            Ok(Ok(code)) if !retriable(code) => return Err(format!("the receiver answered {code} (not retried)")),
            Ok(Ok(code)) => last = format!("the receiver answered {code}"),
            Ok(Err(error)) => last = error,
            Err(_) => last = format!("no answer within {}s", retry.attempt_timeout.as_secs_f32()),
        }
        if attempt < retry.attempts {
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2);
        }
    }
    Err(format!("{last} ({} tries)", retry.attempts.max(1)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// What a failed delivery says (it goes into the WARN line) never has the URL's path or query.
    #[tokio::test]
    async fn a_failure_names_what_happened_not_the_url() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("address").port();
        drop(closed);
        let target =
            NotifyTarget::parse(&format!("http://127.0.0.1:{port}/T0/secret-path?token=secret-query")).expect("target");
        let retry = RetryPolicy {
            attempts: 2,
            attempt_timeout: Duration::from_secs(5),
            first_backoff: Duration::from_millis(10),
        };
        let sender = Sender::new().expect("sender");
        let error = deliver(&sender, &target, b"{}".to_vec(), retry).await.expect_err("nothing listens");
        assert_eq!(error, "cannot connect (2 tries)");
    }
}
