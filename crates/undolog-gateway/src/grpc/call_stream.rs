//! The gateway's side of `Calls`: the operations every call makes of a remote engine (Intercept,
//! Commit, Fail, RecordRead) go out on one stream, as many to a message as are waiting, and each
//! caller gets the answer with its operation's id. One HTTP/2 stream per request cost the gateway
//! and the engine more CPU per call than the engine's store did.
//!
//! A link is one `Calls` stream and two tasks: one sends what callers queue, one hands out the
//! answers. A link that breaks fails the operations it carried (as a broken connection fails a
//! request: the engine was unreachable) and the next operation opens another. An engine that
//! answers `Calls` with UNIMPLEMENTED (one older than the method) is asked one request at a time
//! from then on.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use prost::Message as _;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, metadata::MetadataMap, transport::Channel};

use super::{
    calls::{BYTES_PER_MESSAGE, LARGEST, entries, replied, with},
    proto::{
        Operation, Operations, answer::Reply, effect_engine_client::EffectEngineClient,
        operation::Request as Asked,
    },
};

/// Operations queued for a link before callers wait for room.
const QUEUED: usize = 1024;
/// Operations put in one message at most.
const OPERATIONS_PER_MESSAGE: usize = 256;
/// Messages handed to the stream before the sending task waits for HTTP/2 to take them.
const MESSAGES_IN_FLIGHT: usize = 16;
/// How long an operation waits for its answer: as long as a request (`RemoteEngine::connect`).
const ANSWER_WITHIN: Duration = Duration::from_secs(90);

/// The operations of one remote engine, on its current link.
#[derive(Debug)]
pub(super) struct CallStream {
    client: EffectEngineClient<Channel>,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Where operations go: the open link, if any.
    link: Option<mpsc::Sender<Pending>>,
    /// Which link that is, so a link that ends forgets only itself.
    generation: u64,
    /// The engine has no `Calls`: every operation is a request of its own.
    unary: bool,
}

/// An operation waiting to be sent, and where its answer goes.
struct Pending {
    request: Asked,
    metadata: MetadataMap,
    answer: oneshot::Sender<Outcome>,
}

enum Outcome {
    Answered(Result<Reply, Status>),
    /// The engine has no `Calls`: ask this as a request of its own.
    Unstreamed(Box<(Asked, MetadataMap)>),
}

/// The answers a link's operations wait for, by id.
#[derive(Default)]
struct Waiting {
    answers: HashMap<u64, oneshot::Sender<Outcome>>,
    /// The link's stream ended: nothing more is answered on it.
    ended: bool,
}

impl CallStream {
    pub(super) fn new(client: EffectEngineClient<Channel>) -> CallStream {
        CallStream {
            client,
            state: Default::default(),
        }
    }

    /// The engine's client, for the requests that go one at a time.
    pub(super) fn client(&self) -> &EffectEngineClient<Channel> {
        &self.client
    }

    /// `request` with `metadata` (its credentials and trace context), answered as the unary
    /// request would be.
    pub(super) async fn ask(&self, request: Asked, metadata: MetadataMap) -> Result<Reply, Status> {
        let (mut request, mut metadata) = (request, metadata);
        // A link that ended between being handed out and taking this gets one successor.
        for _ in 0..2 {
            let Some(link) = self.link() else {
                return self.unary(request, metadata).await;
            };
            let (answer, answered) = oneshot::channel();
            let pending = Pending {
                request,
                metadata,
                answer,
            };
            if let Err(mpsc::error::SendError(back)) = link.send(pending).await {
                (request, metadata) = (back.request, back.metadata);
                continue;
            }
            return match tokio::time::timeout(ANSWER_WITHIN, answered).await {
                Ok(Ok(Outcome::Answered(reply))) => reply,
                Ok(Ok(Outcome::Unstreamed(unsent))) => {
                    let (request, metadata) = *unsent;
                    self.unary(request, metadata).await
                }
                Ok(Err(_)) => Err(Status::unavailable(
                    "the stream to the engine ended before the engine answered",
                )),
                Err(_) => Err(Status::deadline_exceeded(format!(
                    "the engine did not answer within {} s",
                    ANSWER_WITHIN.as_secs()
                ))),
            };
        }
        Err(Status::unavailable("the streams to the engine keep ending"))
    }

    /// The open link, opened if there is none; `None` when the engine has no `Calls`.
    fn link(&self) -> Option<mpsc::Sender<Pending>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.unary {
            return None;
        }
        if let Some(link) = state.link.as_ref().filter(|link| !link.is_closed()) {
            return Some(link.clone());
        }
        let (link, queued) = mpsc::channel(QUEUED);
        state.generation += 1;
        state.link = Some(link.clone());
        let opened = open(
            self.client.clone(),
            queued,
            self.state.clone(),
            state.generation,
        );
        tokio::spawn(opened);
        Some(link)
    }

    /// `request` as a request of its own.
    async fn unary(&self, request: Asked, metadata: MetadataMap) -> Result<Reply, Status> {
        let mut client = self.client.clone();
        Ok(match request {
            Asked::Intercept(message) => Reply::Intercept(
                client
                    .intercept(with(metadata, message))
                    .await?
                    .into_inner(),
            ),
            Asked::Commit(message) => {
                Reply::Effect(client.commit(with(metadata, message)).await?.into_inner())
            }
            Asked::Fail(message) => {
                Reply::Effect(client.fail(with(metadata, message)).await?.into_inner())
            }
            Asked::RecordRead(message) => Reply::RecordRead(
                client
                    .record_read(with(metadata, message))
                    .await?
                    .into_inner(),
            ),
        })
    }
}

/// Opens link `generation`'s stream and runs it: its operations go out from `queued`, its
/// answers come back to their callers, until the stream ends.
async fn open(
    mut client: EffectEngineClient<Channel>,
    mut queued: mpsc::Receiver<Pending>,
    state: Arc<Mutex<State>>,
    generation: u64,
) {
    let (messages, outgoing) = mpsc::channel(MESSAGES_IN_FLIGHT);
    let mut answers = match client.calls(ReceiverStream::new(outgoing)).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            let unary = status.code() == Code::Unimplemented;
            forget(&state, generation, unary);
            queued.close();
            while let Some(pending) = queued.recv().await {
                let _ = pending.answer.send(match unary {
                    true => Outcome::Unstreamed(Box::new((pending.request, pending.metadata))),
                    false => Outcome::Answered(Err(status.clone())),
                });
            }
            return;
        }
    };
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    tokio::spawn(send(queued, messages, waiting.clone()));
    let ended = loop {
        match answers.message().await {
            Ok(Some(message)) => {
                let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
                for answer in message.answers {
                    if let Some(caller) = waiting.answers.remove(&answer.id) {
                        let _ = caller.send(Outcome::Answered(replied(answer.reply)));
                    }
                }
            }
            Ok(None) => break Status::unavailable("the engine ended the stream"),
            Err(status) => break status,
        }
    };
    forget(&state, generation, false);
    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
    waiting.ended = true;
    for (_, caller) in waiting.answers.drain() {
        let _ = caller.send(Outcome::Answered(Err(Status::unavailable(format!(
            "the stream to the engine ended before the engine answered: {}",
            ended.message()
        )))));
    }
}

/// Link `generation` is gone: the next operation opens another, or none if `unary`.
fn forget(state: &Mutex<State>, generation: u64, unary: bool) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    if state.generation == generation {
        state.link = None;
    }
    state.unary |= unary;
}

/// Sends what callers queue, as many to a message as are waiting (up to
/// [`BYTES_PER_MESSAGE`]), until the link ends. An operation over [`LARGEST`] goes back to its
/// caller to be sent as a request of its own.
async fn send(
    mut queued: mpsc::Receiver<Pending>,
    messages: mpsc::Sender<Operations>,
    waiting: Arc<Mutex<Waiting>>,
) {
    let mut next = 0u64;
    let mut batch = Vec::with_capacity(OPERATIONS_PER_MESSAGE);
    while queued.recv_many(&mut batch, OPERATIONS_PER_MESSAGE).await > 0 {
        let (mut operations, mut bytes, mut ended) = (Vec::with_capacity(batch.len()), 0, false);
        for Pending {
            request,
            metadata,
            answer,
        } in batch.drain(..)
        {
            let mut operation = Operation {
                id: 0,
                metadata: entries(&metadata),
                request: Some(request),
            };
            let size = operation.encoded_len();
            if size > LARGEST {
                if let Some(request) = operation.request.take() {
                    let _ = answer.send(Outcome::Unstreamed(Box::new((request, metadata))));
                }
                continue;
            }
            if !operations.is_empty() && bytes + size > BYTES_PER_MESSAGE {
                let full = std::mem::take(&mut operations);
                if messages
                    .send(Operations { operations: full })
                    .await
                    .is_err()
                {
                    return;
                }
                bytes = 0;
            }
            let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
            ended |= waiting.ended;
            if ended {
                let _ = answer.send(Outcome::Answered(Err(Status::unavailable(
                    "the stream to the engine ended before the operation was sent",
                ))));
                continue;
            }
            next += 1;
            operation.id = next;
            waiting.answers.insert(next, answer);
            bytes += size;
            operations.push(operation);
        }
        if ended
            || (!operations.is_empty() && messages.send(Operations { operations }).await.is_err())
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{net::SocketAddr, sync::Arc, time::Duration};

    use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
    use tonic::{Code, metadata::MetadataMap, server::NamedService, transport::Endpoint};
    use tower_service::Service;
    use undolog_store::SqliteStore;

    use super::{
        super::{proto, service::EngineService},
        Asked, CallStream, Reply,
    };
    use crate::{Gateway, GatewayConfig};

    /// The engine served on `at` (its process's own store, in memory), until `stop` is sent.
    struct Served {
        stop: oneshot::Sender<()>,
        serving: JoinHandle<()>,
    }

    async fn serve(gateway: &Arc<Gateway>, at: SocketAddr) -> Served {
        let listener = TcpListener::bind(at).await.unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(crate::serve_engine(gateway.clone(), listener, async move {
            let _ = stopped.await;
        }));
        let serving = tokio::spawn(async move { serving.await.unwrap().unwrap() });
        Served { stop, serving }
    }

    async fn gateway() -> Arc<Gateway> {
        let store = Arc::new(SqliteStore::in_memory().await.unwrap());
        Gateway::with_store(GatewayConfig::from_toml("").unwrap(), store)
            .await
            .unwrap()
    }

    fn stream_to(at: SocketAddr) -> CallStream {
        let endpoint = Endpoint::from_shared(format!("http://{at}")).unwrap();
        let client = proto::effect_engine_client::EffectEngineClient::new(endpoint.connect_lazy());
        CallStream::new(client)
    }

    fn intercept(session: &str) -> Asked {
        Asked::Intercept(proto::InterceptRequest {
            session_id: session.into(),
            tool: "lookup".into(),
            tier: proto::Tier::ReadOnly as i32,
            ..Default::default()
        })
    }

    async fn decided(stream: &CallStream, session: &str) -> Result<Reply, tonic::Status> {
        stream.ask(intercept(session), MetadataMap::new()).await
    }

    /// An engine served on a free port, and a stream to it that has had one answer.
    async fn answered_once() -> (Arc<Gateway>, SocketAddr, Served, CallStream) {
        let gateway = gateway().await;
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = free.local_addr().unwrap();
        drop(free);
        let served = serve(&gateway, at).await;
        let stream = stream_to(at);
        let answer = decided(&stream, "s1").await;
        assert!(matches!(answer, Ok(Reply::Intercept(_))), "{answer:?}");
        (gateway, at, served, stream)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_engine_that_stops_ends_the_link_and_the_next_operation_opens_another() {
        let (gateway, at, served, stream) = answered_once().await;

        // The open stream does not hold the engine's shutdown.
        served.stop.send(()).unwrap();
        let stopped = tokio::time::timeout(Duration::from_secs(10), served.serving).await;
        stopped
            .expect("the engine stops with a Calls stream open")
            .unwrap();
        let refused = decided(&stream, "s2").await.unwrap_err();
        assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

        // Back on the same address: the next operation opens a link to it.
        let _served = serve(&gateway, at).await;
        let again = decided(&stream, "s3").await;
        assert!(matches!(again, Ok(Reply::Intercept(_))), "{again:?}");
        assert!(!stream.state.lock().unwrap().unary);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_operation_too_large_for_the_stream_fails_alone_and_the_link_stays() {
        let (_, _, _served, stream) = answered_once().await;
        let huge = Asked::Intercept(proto::InterceptRequest {
            session_id: "s2".into(),
            tool: "lookup".into(),
            arguments_json: format!("{{\"text\": \"{}\"}}", "x".repeat(5 * 1024 * 1024)),
            ..Default::default()
        });
        let (huge, small) =
            tokio::join!(stream.ask(huge, MetadataMap::new()), decided(&stream, "s3"));
        // As its own request: the engine decodes at most 4 MiB a message.
        let refused = huge.unwrap_err();
        assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
        assert!(matches!(small, Ok(Reply::Intercept(_))), "{small:?}");
        assert!(matches!(
            decided(&stream, "s4").await,
            Ok(Reply::Intercept(_))
        ));
        assert_eq!(
            stream.state.lock().unwrap().generation,
            1,
            "one link throughout"
        );
    }

    /// An engine older than `Calls`: the method answers UNIMPLEMENTED, as tonic's router does
    /// for a path it does not know.
    #[derive(Clone)]
    struct WithoutCalls<S>(S);

    impl<S: NamedService> NamedService for WithoutCalls<S> {
        const NAME: &'static str = S::NAME;
    }

    impl<S, B> Service<http::Request<B>> for WithoutCalls<S>
    where
        S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
        S::Future: Send + 'static,
    {
        type Response = S::Response;
        type Error = S::Error;
        type Future =
            futures::future::Either<S::Future, std::future::Ready<Result<S::Response, S::Error>>>;

        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), S::Error>> {
            self.0.poll_ready(cx)
        }

        fn call(&mut self, request: http::Request<B>) -> Self::Future {
            if request.uri().path().ends_with("/Calls") {
                let answer = tonic::Status::unimplemented("no such method").into_http();
                return futures::future::Either::Right(std::future::ready(Ok(answer)));
            }
            futures::future::Either::Left(self.0.call(request))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_engine_without_calls_is_asked_one_request_at_a_time() {
        let gateway = gateway().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let service = proto::effect_engine_server::EffectEngineServer::new(EngineService {
            gateway,
            stopping: Default::default(),
        });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(WithoutCalls(service))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let stream = stream_to(at);
        for session in ["s1", "s2"] {
            let answer = decided(&stream, session).await;
            assert!(matches!(answer, Ok(Reply::Intercept(_))), "{answer:?}");
            assert!(stream.state.lock().unwrap().unary, "asked one at a time");
        }
    }
}
