//! Requests that frame their body two ways at once, `Content-Length` beside
//! `Transfer-Encoding`, are refused.
//!
//! Such a request is how a body is smuggled past a proxy that reads the other header. hyper
//! reads it by `Transfer-Encoding` and drops `Content-Length` before the application sees the
//! headers, so the check has to happen where the bytes arrive: [`Inspected`] wraps a connection,
//! follows its request heads and bodies as they are read (content lengths and chunks, to know
//! where the next head starts), and raises a flag when a head carries both. The connection's
//! service then answers 400 instead of routing the request.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest request head followed; beyond it the connection is no longer inspected (hyper
/// refuses heads that long anyway).
const MAX_HEAD: usize = 64 * 1024;

/// A connection whose requests are checked for two framings as they are read.
#[derive(Debug)]
pub struct Inspected<T> {
    inner: T,
    framing: Framing,
}

impl<T> Inspected<T> {
    pub fn new(inner: T) -> (Inspected<T>, Arc<AtomicBool>) {
        let framing = Framing::default();
        let flag = framing.both_seen.clone();
        (Inspected { inner, framing }, flag)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Inspected<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = &buf.filled()[before..];
            self.framing.feed(read);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Inspected<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Where in the request stream the bytes read so far end.
#[derive(Debug)]
enum State {
    /// Collecting a request head, up to its empty line.
    Head(Vec<u8>),
    /// Bytes of a `Content-Length` body still to come.
    Body(u64),
    /// Collecting a chunk-size line.
    ChunkSize(Vec<u8>),
    /// Bytes of a chunk still to come, then its CRLF.
    ChunkData(u64),
    /// Collecting trailer lines, up to an empty one.
    Trailers(Vec<u8>),
    /// No longer followed: two framings were seen (the connection closes after that request),
    /// or the bytes are not HTTP/1.1 that can be followed (hyper refuses them itself).
    Stopped,
}

#[derive(Debug)]
struct Framing {
    state: State,
    both_seen: Arc<AtomicBool>,
}

impl Default for Framing {
    fn default() -> Framing {
        Framing {
            state: State::Head(Vec::new()),
            both_seen: Arc::default(),
        }
    }
}

impl Framing {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let state = std::mem::replace(&mut self.state, State::Stopped);
            let (next, used) = self.step(state, bytes);
            self.state = next;
            bytes = &bytes[used..];
            if matches!(self.state, State::Stopped) {
                return;
            }
        }
    }

    /// One step: the state after it and how many bytes it used.
    fn step(&self, state: State, bytes: &[u8]) -> (State, usize) {
        match state {
            State::Head(mut head) => match line_block(&mut head, bytes) {
                Some(used) => (self.after_head(&head), used),
                None if head.len() > MAX_HEAD => (State::Stopped, bytes.len()),
                None => (State::Head(head), bytes.len()),
            },
            State::Body(left) => {
                let used = left.min(bytes.len() as u64);
                let left = left - used;
                let next = if left == 0 {
                    State::Head(Vec::new())
                } else {
                    State::Body(left)
                };
                (next, used as usize)
            }
            State::ChunkSize(mut line) => match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    line.extend_from_slice(&bytes[..=end]);
                    let size = std::str::from_utf8(&line)
                        .ok()
                        .and_then(|l| l.split(';').next())
                        .and_then(|s| u64::from_str_radix(s.trim(), 16).ok());
                    let next = match size {
                        Some(0) => State::Trailers(Vec::new()),
                        // The chunk, then its CRLF.
                        Some(n) => State::ChunkData(n.saturating_add(2)),
                        None => State::Stopped,
                    };
                    (next, end + 1)
                }
                None if line.len() > MAX_HEAD => (State::Stopped, bytes.len()),
                None => {
                    line.extend_from_slice(bytes);
                    (State::ChunkSize(line), bytes.len())
                }
            },
            State::ChunkData(left) => {
                let used = left.min(bytes.len() as u64);
                let left = left - used;
                let next = if left == 0 {
                    State::ChunkSize(Vec::new())
                } else {
                    State::ChunkData(left)
                };
                (next, used as usize)
            }
            State::Trailers(mut lines) => {
                // The trailer section ends with an empty line: "\r\n" alone, or after others.
                let before = lines.len();
                lines.extend_from_slice(bytes);
                let end = if lines.starts_with(b"\r\n") {
                    Some(2)
                } else {
                    find(&lines, b"\r\n\r\n").map(|i| i + 4)
                };
                match end {
                    Some(end) => (State::Head(Vec::new()), end - before),
                    None if lines.len() > MAX_HEAD => (State::Stopped, bytes.len()),
                    None => (State::Trailers(lines), bytes.len()),
                }
            }
            State::Stopped => (State::Stopped, bytes.len()),
        }
    }

    /// What follows a complete head: its body, by the framing it declares.
    fn after_head(&self, head: &[u8]) -> State {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut request = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(_)) = request.parse(head) else {
            return State::Stopped;
        };
        let named = |name: &'static str| {
            request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
        };
        let length = named("content-length");
        let chunked = named("transfer-encoding");
        match (length, chunked) {
            (Some(_), Some(_)) => {
                self.both_seen.store(true, Ordering::Release);
                State::Stopped
            }
            (None, Some(_)) => State::ChunkSize(Vec::new()),
            (Some(length), None) => {
                match std::str::from_utf8(length.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                {
                    Some(0) => State::Head(Vec::new()),
                    Some(n) => State::Body(n),
                    None => State::Stopped,
                }
            }
            (None, None) => State::Head(Vec::new()),
        }
    }
}

/// Adds `bytes` to a head being collected; once it ends (an empty line), how many of `bytes`
/// it took. Empty lines before a request line are skipped, as RFC 9112 allows.
fn line_block(head: &mut Vec<u8>, bytes: &[u8]) -> Option<usize> {
    let before = head.len();
    head.extend_from_slice(bytes);
    while head.starts_with(b"\r\n") {
        head.drain(..2);
    }
    let skipped = before + bytes.len() - head.len();
    let end = find(head, b"\r\n\r\n")? + 4;
    head.truncate(end);
    Some(end + skipped - before)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether a connection's flag says it sent a request framed two ways.
pub fn framed_twice(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Acquire)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` in pieces of `piece` bytes; whether two framings were seen and where the
    /// stream ended.
    fn fed(stream: &str, piece: usize) -> (bool, String) {
        let mut framing = Framing::default();
        for part in stream.as_bytes().chunks(piece) {
            framing.feed(part);
        }
        let at = match &framing.state {
            State::Head(h) if h.is_empty() => "between requests".to_owned(),
            other => format!("{other:?}"),
        };
        (framing.both_seen.load(Ordering::Acquire), at)
    }

    #[test]
    fn two_framings_are_seen_wherever_the_request_is_on_the_connection() {
        let ok = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
        let chunked = "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
                       5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let both = "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        let both_other_order = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\ncontent-length: 4\r\nHost: h\r\n\r\n";
        // A body that looks like headers is a body, not a head.
        let lookalike = "POST /d HTTP/1.1\r\nHost: h\r\nContent-Length: 45\r\n\r\n\r\nContent-Length: 1\r\nTransfer-Encoding: x\r\n\r\n";
        let get = "\r\nGET /e HTTP/1.1\r\nHost: h\r\n\r\n";
        let cases = [
            ("one request", ok.to_owned(), false),
            ("a chunked one", chunked.to_owned(), false),
            ("both headers", both.to_owned(), true),
            ("both, the other order", both_other_order.to_owned(), true),
            (
                "after others on the connection",
                format!("{ok}{chunked}{get}{both}"),
                true,
            ),
            ("headers inside a body", format!("{lookalike}{get}"), false),
        ];
        for (what, stream, expected) in cases {
            for piece in [1, 3, 7, 1000] {
                let (seen, at) = fed(&stream, piece);
                assert_eq!(seen, expected, "{what}, read {piece} bytes at a time");
                if !expected {
                    assert_eq!(at, "between requests", "{what}, {piece} at a time");
                }
            }
        }
    }
}
