//! How a direct call's POST reaches a Streamable HTTP upstream.
//!
//! A plain `http://` URL (no credentials in it) that no proxy takes, the usual upstream beside
//! the gateway, is posted with hyper's pooled client (the one reqwest drives), its URI parsed
//! once: reqwest would parse the URL into a URI again, merge the headers into a map of its own
//! and wrap the request in futures of its own on every call, a tenth of the gateway's CPU on a
//! read-only call. Anything else (TLS, a proxy from the environment, credentials in the URL) goes
//! through reqwest, as the MCP client reaches the same upstream. Both give the answer in one
//! shape, [`Answer`].

use std::{io, time::Duration};

use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _, stream::BoxStream};
use http::{HeaderMap, Method, StatusCode, Uri, header};
use http_body_util::{BodyDataStream, Full};
use hyper_util::{
    client::{
        legacy::{Client, connect::HttpConnector},
        proxy::matcher::Matcher,
    },
    rt::{TokioExecutor, TokioTimer},
};

/// Where calls are posted.
#[derive(Debug)]
pub(super) enum Poster {
    Plain {
        client: Box<Client<HttpConnector, Full<Bytes>>>,
        uri: Uri,
    },
    Reqwest {
        client: reqwest::Client,
        url: reqwest::Url,
    },
}

/// An upstream's answer, its body not yet read.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    /// The body is an event stream (`text/event-stream`), not one JSON message.
    pub(super) event_stream: bool,
    pub(super) body: BoxStream<'static, io::Result<Bytes>>,
}

/// Why a POST got no answer.
pub(super) enum Failed {
    /// Refused before a byte was written: the upstream never saw the call.
    Connect(String),
    /// The request or its answer broke off.
    Broken(String),
}

impl Poster {
    /// `None` when `url` is not a URL. `proxies` are the environment's (`Matcher::from_system`),
    /// which reqwest follows too.
    pub(super) fn new(url: &str, proxies: &Matcher) -> Option<Poster> {
        let parsed = reqwest::Url::parse(url).ok()?;
        // Credentials in the URL are reqwest's to turn into a header.
        let plain = parsed.scheme() == "http"
            && parsed.username().is_empty()
            && parsed.password().is_none();
        let plain = plain.then(|| parsed.as_str().parse::<Uri>().ok());
        match plain.flatten() {
            Some(uri) if proxies.intercept(&uri).is_none() => Some(Poster::Plain {
                client: Box::new(plain_client()),
                uri,
            }),
            _ => Some(Poster::Reqwest {
                client: reqwest::Client::new(),
                url: parsed,
            }),
        }
    }

    pub(super) async fn post(&self, headers: HeaderMap, body: Vec<u8>) -> Result<Answer, Failed> {
        let (status, event_stream, body) = match self {
            Poster::Plain { client, uri } => {
                let mut request = http::Request::new(Full::new(Bytes::from(body)));
                *request.method_mut() = Method::POST;
                *request.uri_mut() = uri.clone();
                *request.headers_mut() = headers;
                let response =
                    (client.request(request).await).map_err(|e| Failed::new(e.is_connect(), &e))?;
                let (status, sse) = (response.status(), is_event_stream(response.headers()));
                let body = BodyDataStream::new(response.into_body()).map_err(io::Error::other);
                (status, sse, body.boxed())
            }
            Poster::Reqwest { client, url } => {
                let request = client.post(url.clone()).headers(headers).body(body);
                let response =
                    (request.send().await).map_err(|e| Failed::new(e.is_connect(), &e))?;
                let (status, sse) = (response.status(), is_event_stream(response.headers()));
                let body = response.bytes_stream().map_err(io::Error::other);
                (status, sse, body.boxed())
            }
        };
        Ok(Answer {
            status,
            event_stream,
            body,
        })
    }
}

impl Failed {
    fn new(connect: bool, error: &dyn std::fmt::Display) -> Failed {
        if connect {
            Failed::Connect(error.to_string())
        } else {
            Failed::Broken(error.to_string())
        }
    }
}

/// hyper's pooled client, with reqwest's defaults: `TCP_NODELAY`, idle connections kept for 90 s.
fn plain_client() -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector)
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests {
    use axum::{Router, routing::post};
    use futures::TryStreamExt as _;

    use super::*;

    #[test]
    fn a_plain_url_no_proxy_takes_is_posted_by_hyper_and_any_other_by_reqwest() {
        let none = Matcher::builder().build();
        let proxied = Matcher::builder().http("http://proxy.example:3128").build();
        let except_bank = Matcher::builder()
            .http("http://proxy.example:3128")
            .no("bank.internal")
            .build();
        // (url, proxies, Some(plain) or None for no URL)
        let cases = [
            ("http://127.0.0.1:8080/mcp", &none, Some(true)),
            ("http://bank.internal/mcp", &none, Some(true)),
            ("https://bank.example/mcp", &none, Some(false)),
            ("http://user:secret@bank.internal/mcp", &none, Some(false)),
            ("http://bank.internal/mcp", &proxied, Some(false)),
            ("http://bank.internal/mcp", &except_bank, Some(true)),
            ("not a url", &none, None),
        ];
        for (url, proxies, plain) in cases {
            let poster = Poster::new(url, proxies);
            let got = poster.as_ref().map(|p| matches!(p, Poster::Plain { .. }));
            assert_eq!(got, plain, "{url}: {poster:?}");
        }
    }

    /// A local HTTP server answering POSTs to `/json` with JSON and to `/sse` with an event
    /// stream; its address.
    async fn server() -> std::net::SocketAddr {
        let app =
            Router::new()
                .route(
                    "/json",
                    post(|body: Bytes| async move {
                        ([(header::CONTENT_TYPE, "application/json")], body)
                    }),
                )
                .route(
                    "/sse",
                    post(|body: Bytes| async move {
                        let mut event = b"data: ".to_vec();
                        event.extend_from_slice(&body);
                        event.extend_from_slice(b"\n\n");
                        ([(header::CONTENT_TYPE, "text/event-stream")], event)
                    }),
                );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    #[tokio::test]
    async fn both_posters_give_the_same_answer() {
        let addr = server().await;
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let refused = closed.local_addr().unwrap();
        drop(closed);
        // (url, Some((status, event stream, body)) or None for a refused connection)
        let cases = [
            (
                format!("http://{addr}/json"),
                Some((200, false, "{\"a\":1}")),
            ),
            (
                format!("http://{addr}/sse"),
                Some((200, true, "data: {\"a\":1}\n\n")),
            ),
            (format!("http://{addr}/nowhere"), Some((404, false, ""))),
            (format!("http://{refused}/json"), None),
        ];
        for (url, want) in cases {
            let plain = Poster::new(&url, &Matcher::builder().build()).unwrap();
            let reqwest = Poster::Reqwest {
                client: reqwest::Client::new(),
                url: reqwest::Url::parse(&url).unwrap(),
            };
            assert!(matches!(plain, Poster::Plain { .. }));
            for poster in [plain, reqwest] {
                let answer = poster.post(HeaderMap::new(), b"{\"a\":1}".to_vec()).await;
                let got = match answer {
                    Ok(answer) => {
                        let body: Vec<Bytes> = answer.body.try_collect().await.unwrap();
                        Some((answer.status.as_u16(), answer.event_stream, body.concat()))
                    }
                    Err(Failed::Connect(_)) => None,
                    Err(Failed::Broken(e)) => panic!("{url}: broken: {e}"),
                };
                let want = want.map(|(status, sse, body)| (status, sse, body.as_bytes().to_vec()));
                assert_eq!(got, want, "{url} by {poster:?}");
            }
        }
    }
}
