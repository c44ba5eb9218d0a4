//! Sending one body to one receiver over HTTP(S), with retries. Errors name the status or the
//! failure, never the URL (it is the receiver's credential).

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::super::config::{RetryPolicy, SigningKey};
use super::request::Request;

/// How a delivery is signed: the key, and the message's id, the same on every try and from every
/// engine (a receiver deduplicates on it).
#[derive(Clone, Copy)]
pub struct Signed<'a> {
    pub key: &'a SigningKey,
    pub id: &'a str,
}

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

    /// One POST of `request`, signed when `signed` says so (with this try's time); the status
    /// code, or why there is none.
    async fn post(&self, request: &Request, signed: Option<Signed<'_>>) -> Result<u16, String> {
        let mut builder = hyper::Request::post(request.url.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, concat!("capdeck/", env!("CARGO_PKG_VERSION")));
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        if let Some(Signed { key, id }) = signed {
            let timestamp = k8s_openapi::jiff::Timestamp::now().as_second();
            builder = builder
                .header("webhook-id", id)
                .header("webhook-timestamp", timestamp.to_string())
                .header("webhook-signature", key.sign(id, timestamp, &request.body));
        }
        let http = builder
            .body(Full::new(Bytes::from(request.body.clone())))
            .map_err(|_| "the URL or a header cannot be requested".to_string())?;
        let response = self.client.request(http).await.map_err(|error| failure_kind(&error))?;
        Ok(response.status().as_u16())
    }
}

/// What kind of failure `error` is, and what to check: hyper's own text can include the URI, so
/// only the kinds are read from its chain (the connector's fixed words, an I/O error's kind).
fn failure_kind(error: &hyper_util::client::legacy::Error) -> String {
    if !error.is_connect() {
        return "the request failed after connecting (the receiver closed the connection; or an http URL on an \
                https port?)"
            .into();
    }
    let mut source = std::error::Error::source(error);
    let mut dns = false;
    while let Some(cause) = source {
        if let Some(outer) = cause.downcast_ref::<std::io::Error>() {
            // TLS errors come as an I/O error inside an I/O error, rustls's inside that.
            let mut io = outer;
            while let Some(inner) = io.get_ref().and_then(|inner| inner.downcast_ref::<std::io::Error>()) {
                io = inner;
            }
            let tls = io.get_ref().is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
            let kind = if tls { std::io::ErrorKind::InvalidData } else { io.kind() };
            return match kind {
                _ if dns => "cannot connect: its host name does not resolve (check the URL's host, and DNS from the \
                             daemon's Pod)"
                    .into(),
                std::io::ErrorKind::ConnectionRefused => {
                    "cannot connect: connection refused (nothing listens at the URL's host and port)".into()
                }
                std::io::ErrorKind::TimedOut => {
                    "cannot connect: timed out (a firewall, a NetworkPolicy or an egress proxy in the way?)".into()
                }
                std::io::ErrorKind::InvalidData => "cannot connect: the TLS handshake failed (an https URL on a plain \
                                                    HTTP port, or a certificate the daemon does not trust)"
                    .into(),
                _ => "cannot connect".into(),
            };
        }
        // hyper-util's connector says "dns error" before the resolver's I/O error.
        dns |= cause.to_string() == "dns error";
        source = cause.source();
    }
    if dns { "cannot connect: its host name does not resolve".into() } else { "cannot connect".into() }
}

/// Whether trying again later can help.
fn retriable(code: u16) -> bool {
    matches!(code, 408 | 429 | 500..=599)
}

/// Why a delivery did not happen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The status of a refusal (`Request::refusals`).
    pub refused: Option<u16>,
    /// What happened, for the log: never the URL.
    pub text: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Deliver `request`, signed if `signed` says so and the request is signable (Slack, Teams and
/// the incident services verify nothing of ours); `Err` names the last failure after every try.
pub async fn deliver(
    sender: &Sender,
    request: &Request,
    retry: RetryPolicy,
    signed: Option<Signed<'_>>,
) -> Result<(), Failure> {
    let signed = signed.filter(|_| request.signed);
    let mut backoff = retry.first_backoff;
    let mut last = String::from("not tried");
    for attempt in 1..=retry.attempts.max(1) {
        match tokio::time::timeout(retry.attempt_timeout, sender.post(request, signed)).await {
            Ok(Ok(code)) if (200..300).contains(&code) => return Ok(()),
            // The receiver refuses capdeck itself: every later notification would be refused too,
            // until someone fixes the Secret.
            Ok(Ok(code)) if request.refusals.contains(&code) => {
                return Err(Failure {
                    refused: Some(code),
                    text: format!(
                        "the receiver refused it: {code} (its URL or key is wrong, revoked or gone; not retried)"
                    ),
                });
            }
            Ok(Ok(code)) if (300..400).contains(&code) => {
                let text = format!(
                    "the receiver answered {code}, a redirect, which is not followed (not retried): configure the URL \
                     it redirects to"
                );
                return Err(Failure { refused: None, text });
            }
            Ok(Ok(code)) if !retriable(code) => {
                return Err(Failure { refused: None, text: format!("the receiver answered {code} (not retried)") });
            }
            Ok(Ok(code)) => last = format!("the receiver answered {code}"),
            Ok(Err(error)) => last = error,
            Err(_) => {
                last = format!(
                    "no answer within {}s (the receiver is slow or stuck, or something on the way drops the \
                     connection or holds the request: a firewall, a NetworkPolicy, a proxy)",
                    retry.attempt_timeout.as_secs_f32()
                );
            }
        }
        if attempt < retry.attempts {
            tokio::time::sleep(backoff).await;
            backoff = backoff.saturating_mul(2);
        }
    }
    Err(Failure { refused: None, text: format!("{last} ({} tries)", retry.attempts.max(1)) })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::config::{NotifyTarget, PayloadFormat};

    /// `body` to `target` as it is, signable when the target takes the generic JSON.
    fn raw(target: &NotifyTarget, body: Vec<u8>) -> Request {
        Request {
            url: target.url().to_string(),
            headers: Vec::new(),
            body,
            signed: target.format == PayloadFormat::Json,
            refusals: super::super::request::REFUSALS,
        }
    }

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
        let error = deliver(&sender, &raw(&target, b"{}".to_vec()), retry, None).await.expect_err("nothing listens");
        assert_eq!(
            error.text,
            "cannot connect: connection refused (nothing listens at the URL's host and port) (2 tries)"
        );
    }

    /// An https URL on a port that speaks plain HTTP: said as a TLS failure, not "cannot connect".
    #[tokio::test]
    async fn a_tls_failure_and_a_redirect_say_what_to_check() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let answers = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            for answer in [
                &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"[..],
                b"HTTP/1.1 302 Found\r\nlocation: http://elsewhere/\r\ncontent-length: 0\r\n\r\n",
            ] {
                let (mut stream, _) = listener.accept().await.expect("accept");
                let mut buffer = [0_u8; 4096];
                let _ = stream.read(&mut buffer).await;
                let _ = stream.write_all(answer).await;
            }
        });
        let retry = RetryPolicy { attempts: 1, attempt_timeout: Duration::from_secs(5), first_backoff: Duration::ZERO };
        let sender = Sender::new().expect("sender");
        let tls = NotifyTarget::parse(&format!("https://127.0.0.1:{port}/secret-path")).expect("target");
        let error = deliver(&sender, &raw(&tls, b"{}".to_vec()), retry, None).await.expect_err("no TLS there");
        assert!(error.text.starts_with("cannot connect: the TLS handshake failed"), "{}", error.text);
        let plain = NotifyTarget::parse(&format!("http://127.0.0.1:{port}/secret-path")).expect("target");
        let error = deliver(&sender, &raw(&plain, b"{}".to_vec()), retry, None).await.expect_err("a redirect");
        assert!(error.text.contains("302, a redirect, which is not followed"), "{}", error.text);
        assert!(!error.text.contains("secret-path") && !error.text.contains("elsewhere"), "{}", error.text);
        answers.await.expect("both answered");
    }

    /// A `format` receiver on a loopback port, tried once, and the one request it will get.
    async fn loopback_receiver(
        format: &str,
    ) -> (NotifyTarget, RetryPolicy, tokio::task::JoinHandle<(std::collections::BTreeMap<String, String>, Vec<u8>)>)
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let received = tokio::spawn(receive_one(listener));
        let target = NotifyTarget::parse(&format!("{format}=http://127.0.0.1:{port}/hook")).expect("target");
        let retry =
            RetryPolicy { attempts: 1, attempt_timeout: Duration::from_secs(10), first_backoff: Duration::ZERO };
        (target, retry, received)
    }

    /// One request to a loopback receiver: its head (lower-cased header names) and body.
    async fn receive_one(listener: tokio::net::TcpListener) -> (std::collections::BTreeMap<String, String>, Vec<u8>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (mut stream, _) = listener.accept().await.expect("a request");
        let mut read = Vec::new();
        let mut buffer = [0u8; 4096];
        let (head, body_start) = loop {
            let n = stream.read(&mut buffer).await.expect("read");
            assert!(n > 0, "the request ended early");
            read.extend_from_slice(&buffer[..n]);
            if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                break (String::from_utf8_lossy(&read[..end]).into_owned(), end + 4);
            }
        };
        let headers: std::collections::BTreeMap<String, String> = head
            .lines()
            .skip(1)
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_string()))
            .collect();
        let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        let mut body = read[body_start..].to_vec();
        while body.len() < length {
            let n = stream.read(&mut buffer).await.expect("read");
            assert!(n > 0, "the body ended early");
            body.extend_from_slice(&buffer[..n]);
        }
        stream.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await.expect("answer");
        (headers, body)
    }

    /// Runs docs/NOTIFICATIONS.md's verifier (Python's hmac, not this crate's) over `headers` and
    /// `body`: its answer.
    fn python_verifies(secret: &str, headers: &std::collections::BTreeMap<String, String>, body: &[u8]) -> bool {
        let doc = include_str!("../../../docs/NOTIFICATIONS.md");
        let block = doc.split("<!-- verifier -->").nth(1).expect("the verifier block");
        let code = block.split("```python").nth(1).and_then(|rest| rest.split("```").next()).expect("its code");
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("body"), body).expect("body");
        let script = format!(
            "{code}\nimport json, sys\nheaders = json.loads(sys.argv[1])\nbody = open(sys.argv[2], 'rb').read()\n\
             sys.exit(0 if verify(sys.argv[3], headers, body) else 1)\n"
        );
        let headers = serde_json::to_string(headers).expect("json");
        let status = std::process::Command::new("python3")
            .args(["-c", &script, &headers, &dir.path().join("body").to_string_lossy(), secret])
            .status()
            .expect("python3 runs (the CI machine and the README's toolchains have it)");
        status.success()
    }

    /// A signed delivery carries the Standard Webhooks headers, and the documented verifier, an
    /// implementation of its own (Python's hmac), accepts it with the secret and refuses it with
    /// another secret, another body or another id.
    #[tokio::test]
    async fn a_signed_webhook_verifies_with_the_documented_python() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let key = SigningKey::parse(secret.as_bytes()).expect("key");
        let (target, retry, received) = loopback_receiver("json").await;
        let body = br#"{"event":"BatchAwaitingApproval","batch":"b1"}"#.to_vec();
        let signed = Signed { key: &key, id: "msg_0123456789abcdef0123456789abcdef" };
        deliver(&Sender::new().expect("sender"), &raw(&target, body.clone()), retry, Some(signed))
            .await
            .expect("delivered");
        let (headers, got) = received.await.expect("received");
        assert_eq!(got, body, "the body is sent as signed");
        assert_eq!(headers.get("webhook-id").map(String::as_str), Some(signed.id));
        assert!(headers.get("webhook-signature").is_some_and(|s| s.starts_with("v1,")), "{headers:?}");
        assert!(python_verifies(secret, &headers, &got), "the documented verifier refuses a good delivery");
        assert!(!python_verifies("whsec_b3RoZXItc2VjcmV0LW9mLTI0LWJ5dGVzLWxvbmc=", &headers, &got), "another secret");
        assert!(!python_verifies(secret, &headers, b"{\"event\":\"forged\"}"), "another body");
        let mut other_id = headers.clone();
        other_id.insert("webhook-id".into(), "msg_forged".into());
        assert!(!python_verifies(secret, &other_id, &got), "another id");
    }

    /// A Slack receiver is never signed (it checks nothing), and a short or malformed key is
    /// refused without repeating it.
    #[tokio::test]
    async fn only_json_receivers_are_signed_and_short_keys_are_refused() {
        let (target, retry, received) = loopback_receiver("slack").await;
        let key = SigningKey::parse(b"a-plain-text-secret-of-32-bytes!").expect("key");
        let signed = Signed { key: &key, id: "msg_x" };
        deliver(&Sender::new().expect("sender"), &raw(&target, b"{}".to_vec()), retry, Some(signed))
            .await
            .expect("sent");
        let (headers, _) = received.await.expect("received");
        assert!(!headers.contains_key("webhook-signature"), "{headers:?}");
        for bad in [&b"short-secret"[..], b"whsec_not*base64*at*all*not*base64*at*all"] {
            let error = SigningKey::parse(bad).expect_err("refused");
            assert!(!error.contains(std::str::from_utf8(bad).expect("text")), "{error}");
        }
        assert_eq!(format!("{key:?}"), "SigningKey(32 bytes)", "Debug never shows the key");
    }
}
