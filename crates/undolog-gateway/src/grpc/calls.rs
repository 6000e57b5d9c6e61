//! `Calls`: Intercept, Commit, Fail and RecordRead many at a time on one stream. Each operation
//! becomes the request it stands for (its metadata, its message) and is answered by the unary
//! method itself, so it is authenticated, authorized, traced and refused exactly as that request
//! would be; only the transport differs. A gateway in front of this engine asks these for every
//! call it serves, and one HTTP/2 stream per request cost both processes more than the store did.

use std::{collections::HashMap, future::Future, str::FromStr, sync::Arc};

use futures::{FutureExt as _, StreamExt as _, TryFutureExt as _, future::BoxFuture};
use prost::Message as _;
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{
    Request, Response, Status, Streaming,
    metadata::{AsciiMetadataKey, AsciiMetadataValue, KeyAndValueRef, MetadataMap},
};

use super::{
    proto::{
        Answer, Answers, Operation, Operations, Refusal, answer::Reply,
        effect_engine_server::EffectEngine, operation::Request as Asked,
    },
    service::EngineService,
    traced,
};

/// Operations of one stream that may run at once: past this, the engine reads no more of it
/// until one is answered, and HTTP/2's flow control holds the sender back.
const IN_FLIGHT: usize = 1024;

/// Answers put in one message at most: as many as were ready when the last one was sent.
const ANSWERS_PER_MESSAGE: usize = 256;

/// The bytes of operations or answers a message gathers before another is started.
pub(super) const BYTES_PER_MESSAGE: usize = 1024 * 1024;

/// The largest operation or answer that goes on the stream: a message alone, and under the
/// 4 MiB tonic decodes by default. A larger operation is sent as its own request and a larger
/// answer becomes a refusal, so each fails alone, as its request would, and the stream that
/// carries others' operations is never broken by one.
pub(super) const LARGEST: usize = 4 * 1024 * 1024 - 1024;

/// The stream of answers to `incoming`'s operations, each run as a task of its own.
pub(super) fn answer_calls(
    service: EngineService,
    incoming: Streaming<Operations>,
) -> super::service::Streamed<Answers> {
    let (answered, answers) = mpsc::channel::<Answer>(IN_FLIGHT);
    tokio::spawn(run_operations(service, incoming, answered));
    Box::pin(
        ReceiverStream::new(answers)
            .ready_chunks(ANSWERS_PER_MESSAGE)
            .flat_map(|answers| futures::stream::iter(in_messages(answers).into_iter().map(Ok))),
    )
}

/// Runs `incoming`'s operations, at most [`IN_FLIGHT`] at once, each answer to `answered`. A
/// broken or ended stream, or the server shutting down, ends the reading; operations already
/// read still run and are answered (the stream of answers ends after the last), and what they
/// recorded stays recorded whether or not their answer can be sent.
async fn run_operations(
    service: EngineService,
    mut incoming: Streaming<Operations>,
    answered: mpsc::Sender<Answer>,
) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
            () = service.stopping.cancelled() => None,
        };
        let operations = match message {
            Some(Ok(message)) => message.operations,
            Some(Err(status)) => {
                let read = "its operations already read are still answered";
                tracing::warn!(%status, "a gateway's Calls stream broke; {read}");
                return;
            }
            None => return,
        };
        for operation in operations {
            let Ok(permit) = in_flight.clone().acquire_owned().await else {
                return;
            };
            let (service, answered) = (service.clone(), answered.clone());
            tokio::spawn(async move {
                let answer = answer(&service, operation).await;
                let _ = answered.send(answer).await;
                drop(permit);
            });
        }
    }
}

/// `answers` in messages of at most [`BYTES_PER_MESSAGE`], unless one alone is more; an answer
/// over [`LARGEST`] is replaced by its refusal.
fn in_messages(answers: Vec<Answer>) -> Vec<Answers> {
    let mut messages = Vec::new();
    let (mut current, mut bytes) = (Vec::new(), 0);
    for answer in answers {
        let answer = match answer.encoded_len() {
            size if size > LARGEST => Answer {
                id: answer.id,
                reply: Some(Reply::Refusal(refusal(&Status::out_of_range(format!(
                    "the engine's answer is {size} bytes, more than the {LARGEST} one may be"
                ))))),
            },
            _ => answer,
        };
        let size = answer.encoded_len();
        if !current.is_empty() && bytes + size > BYTES_PER_MESSAGE {
            messages.push(Answers {
                answers: std::mem::take(&mut current),
            });
            bytes = 0;
        }
        bytes += size;
        current.push(answer);
    }
    if !current.is_empty() {
        messages.push(Answers { answers: current });
    }
    messages
}

/// One operation's answer: what its unary method replied, or the status it refused with.
async fn answer(service: &EngineService, operation: Operation) -> Answer {
    let Operation {
        id,
        metadata,
        request,
    } = operation;
    let reply = match (request, metadata_of(metadata)) {
        (_, Err(refusal)) => Err(refusal),
        (None, _) => Err(Status::invalid_argument(
            "an operation names no request: send intercept, commit, fail or record_read",
        )),
        (Some(request), Ok(metadata)) => ask(service, request, metadata).await,
    };
    Answer {
        id,
        reply: Some(reply.unwrap_or_else(|status| Reply::Refusal(refusal(&status)))),
    }
}

/// `request` as the unary method answers it, in the server span that request would have.
async fn ask(
    service: &EngineService,
    request: Asked,
    metadata: MetadataMap,
) -> Result<Reply, Status> {
    let headers = metadata.into_headers();
    let span = (service.gateway.traces).engine_request(path(&request), &headers);
    let metadata = MetadataMap::from_headers(headers);
    let answer = match request {
        Asked::Intercept(m) => unary(service.intercept(with(metadata, m)), Reply::Intercept),
        Asked::Commit(m) => unary(service.commit(with(metadata, m)), Reply::Effect),
        Asked::Fail(m) => unary(service.fail(with(metadata, m)), Reply::Effect),
        Asked::RecordRead(m) => unary(service.record_read(with(metadata, m)), Reply::RecordRead),
    };
    traced::within(span, answer).await
}

/// The path of the unary method `request` stands for, which names its span.
fn path(request: &Asked) -> &'static str {
    match request {
        Asked::Intercept(_) => "/undolog.engine.v1.EffectEngine/Intercept",
        Asked::Commit(_) => "/undolog.engine.v1.EffectEngine/Commit",
        Asked::Fail(_) => "/undolog.engine.v1.EffectEngine/Fail",
        Asked::RecordRead(_) => "/undolog.engine.v1.EffectEngine/RecordRead",
    }
}

/// A unary method's answer as an operation's `reply`.
fn unary<'a, R: 'a>(
    answer: impl Future<Output = Result<Response<R>, Status>> + Send + 'a,
    reply: fn(R) -> Reply,
) -> BoxFuture<'a, Result<Reply, Status>> {
    answer.map_ok(move |r| reply(r.into_inner())).boxed()
}

/// A request of `message` with `metadata`, as the transport would have handed it over.
pub(super) fn with<T>(metadata: MetadataMap, message: T) -> Request<T> {
    Request::from_parts(metadata, Default::default(), message)
}

/// An operation's metadata as its request's: a key or value no request could carry refuses it.
fn metadata_of(fields: HashMap<String, String>) -> Result<MetadataMap, Status> {
    let mut metadata = MetadataMap::with_capacity(fields.len());
    for (key, value) in fields {
        let Some((key, mut value)) = ascii_entry(&key, &value) else {
            return Err(Status::invalid_argument(format!(
                "an operation's metadata {key:?} is not an ASCII gRPC metadata entry: send \
                 lowercase keys (none ending in -bin) and printable ASCII values"
            )));
        };
        if key.as_str() == "authorization" {
            value.set_sensitive(true);
        }
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// `key: value` as ASCII gRPC metadata, if it can be.
fn ascii_entry(key: &str, value: &str) -> Option<(AsciiMetadataKey, AsciiMetadataValue)> {
    let key =
        (AsciiMetadataKey::from_str(key).ok()).filter(|key| !key.as_str().ends_with("-bin"))?;
    Some((key, value.parse().ok()?))
}

/// `status` as an answer carries it.
fn refusal(status: &Status) -> Refusal {
    Refusal {
        code: status.code() as i32,
        message: status.message().to_owned(),
        metadata: entries(status.metadata()),
    }
}

/// `metadata`'s ASCII entries, as an operation or a refusal carries them.
pub(super) fn entries(metadata: &MetadataMap) -> HashMap<String, String> {
    (metadata.iter())
        .filter_map(|entry| match entry {
            KeyAndValueRef::Ascii(key, value) => {
                Some((key.to_string(), value.to_str().ok()?.to_owned()))
            }
            KeyAndValueRef::Binary(..) => None,
        })
        .collect()
}

/// The status a refusal carries.
fn status_of(refusal: Refusal) -> Status {
    let mut metadata = MetadataMap::with_capacity(refusal.metadata.len());
    for (key, value) in refusal.metadata {
        if let Some((key, value)) = ascii_entry(&key, &value) {
            metadata.insert(key, value);
        }
    }
    Status::with_metadata(refusal.code.into(), refusal.message, metadata)
}

/// Answers as the unary method answers: the reply this operation expects, or its refusal.
pub(super) fn replied(answer: Option<Reply>) -> Result<Reply, Status> {
    match answer {
        Some(Reply::Refusal(refusal)) => Err(status_of(refusal)),
        Some(reply) => Ok(reply),
        None => Err(Status::internal(
            "the engine answered an operation with nothing",
        )),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use tonic::Code;

    use super::{Answer, BYTES_PER_MESSAGE, LARGEST, Reply, in_messages};
    use crate::grpc::proto::{RecordReadReply, Refusal};

    /// An answer of about `bytes` bytes.
    fn answer(id: u64, bytes: usize) -> Answer {
        let reply = RecordReadReply {
            rejection_json: Some("x".repeat(bytes)),
        };
        Answer {
            id,
            reply: Some(Reply::RecordRead(reply)),
        }
    }

    #[test]
    fn answers_go_in_messages_of_a_bounded_size_and_none_is_lost() {
        const KIB: usize = 1024;
        // (sizes of the answers ready together, how many messages carry them)
        let rows: [(&[usize], usize); 5] = [
            (&[100; 256], 1),
            (&[600 * KIB, 600 * KIB, 600 * KIB], 3),
            (&[300 * KIB, 300 * KIB, 300 * KIB, 300 * KIB], 2),
            (&[3 * 1024 * KIB, 10], 2),
            (&[10, 5 * 1024 * KIB, 10], 1),
        ];
        for (sizes, expected) in rows {
            let answers = (sizes.iter().enumerate())
                .map(|(i, &bytes)| answer(i as u64, bytes))
                .collect();
            let messages = in_messages(answers);
            assert_eq!(messages.len(), expected, "{sizes:?}");
            let mut ids = Vec::new();
            for message in &messages {
                let size = message.encoded_len();
                let alone = message.answers.len() == 1;
                assert!(
                    size <= BYTES_PER_MESSAGE || alone,
                    "{sizes:?}: {size} bytes"
                );
                assert!(size <= LARGEST + 16, "{sizes:?}: {size} bytes");
                ids.extend(message.answers.iter().map(|a| a.id));
            }
            assert_eq!(
                ids,
                (0..sizes.len() as u64).collect::<Vec<_>>(),
                "{sizes:?}"
            );
            for (answer, &bytes) in messages.iter().flat_map(|m| &m.answers).zip(sizes) {
                let refused = matches!(
                    answer.reply,
                    Some(Reply::Refusal(Refusal { code, .. })) if code == Code::OutOfRange as i32
                );
                assert_eq!(
                    refused,
                    bytes > LARGEST,
                    "{sizes:?}: answer of {bytes} bytes"
                );
            }
        }
    }
}
