//! Why a client operation failed: [`ClientError`], [`ProtocolError`], and the JSON-RPC error
//! a [`Handler`](super::Handler) answers with ([`RpcError`]).

use std::fmt;
use std::time::Duration;

#[cfg(doc)]
use super::{ClientConfig, Handler, Redirects};
use super::{TaskError, TaskErrorKind};
use crate::contract::{Code, Kind, Outcome};
use crate::gate::Verdict;
use crate::guard::Refusal;
use crate::message::{Message, RpcId};
use crate::resume::Failure;

/// A JSON-RPC error object, as an answer to a server request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RpcError {
    /// The error code (`-32601` method not found, ...).
    pub code: i64,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// How the server broke the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A JSON answer that is not one complete JSON value.
    JsonBody(Verdict),
    /// A JSON answer that is not the response to the request.
    NotTheResponse(RpcId),
    /// An answer with a content type that is neither JSON nor an event stream.
    ContentType(Option<String>),
    /// A JSON answer over the size limit.
    BodyTooLarge(usize),
    /// A response stream that ended without the response.
    StreamEndedWithoutResponse,
    /// `initialize` answered with a JSON-RPC error.
    InitializeError(String),
    /// A header value the client cannot send (an id with control characters).
    Unsendable(&'static str),
    /// The server speaks none of the client's protocol versions (it named these).
    NoCommonVersion(Vec<String>),
    /// A 2026-07-28 request kept being answered `input_required` (the rounds answered).
    TooManyInputRounds(u32),
    /// On the 2024-11-05 HTTP+SSE transport, the event stream gave no usable `endpoint` event
    /// (it ended first, the event is over [`ClientConfig::max_endpoint_event`], or its data is no
    /// URI reference): why.
    NoEndpoint(String),
    /// On the 2024-11-05 HTTP+SSE transport, the `endpoint` event names another origin than the
    /// event stream's (scheme, host and port): nothing is sent there.
    ForeignEndpoint(String),
    /// The [`Handler`] could not answer an input request of an `input_required` result.
    InputRequest {
        /// The input request's method.
        method: String,
        /// The handler's error.
        error: RpcError,
    },
}

impl std::error::Error for ProtocolError {}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::JsonBody(v) => {
                write!(f, "the JSON answer is {v:?}, not one complete JSON value")
            }
            ProtocolError::NotTheResponse(id) => {
                write!(f, "the JSON answer is not the response to request {id}")
            }
            ProtocolError::ContentType(ct) => write!(f, "unexpected content type {ct:?}"),
            ProtocolError::BodyTooLarge(n) => write!(f, "the JSON answer exceeds {n} bytes"),
            ProtocolError::StreamEndedWithoutResponse => {
                write!(f, "the response stream ended without the response")
            }
            ProtocolError::InitializeError(e) => write!(f, "initialize failed: {e}"),
            ProtocolError::Unsendable(what) => write!(f, "cannot send {what} as a header"),
            ProtocolError::NoCommonVersion(v) => {
                write!(
                    f,
                    "the server speaks none of our protocol versions (it supports {v:?})"
                )
            }
            ProtocolError::TooManyInputRounds(n) => {
                write!(f, "the server still asked for input after {n} rounds")
            }
            ProtocolError::NoEndpoint(why) => {
                write!(f, "the HTTP+SSE stream gave no message endpoint: {why}")
            }
            ProtocolError::ForeignEndpoint(url) => write!(
                f,
                "the HTTP+SSE stream's message endpoint {url:?} is on another origin; refused"
            ),
            ProtocolError::InputRequest { method, error } => write!(
                f,
                "the handler could not answer the server's {method} input request: {} ({})",
                error.message, error.code
            ),
        }
    }
}

/// Why a client operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The URL does not parse, or the HTTP client cannot be built (bad root certificate...).
    Setup(String),
    /// An HTTP exchange failed (connect, TLS, reset before a response head...).
    Http {
        /// What the client was doing.
        during: &'static str,
        /// reqwest's error (its source chain names TLS and connect failures).
        source: reqwest::Error,
    },
    /// The server answered an unexpected status.
    Status {
        /// What the client was doing.
        during: &'static str,
        /// The status code.
        status: u16,
        /// The start of the body (at most [`ClientConfig::max_error_body`] bytes), lossy UTF-8.
        body: String,
    },
    /// The server answered with a redirect the client does not follow ([`Redirects`]).
    Redirect {
        /// What the client was doing.
        during: &'static str,
        /// The status code (`3xx`).
        status: u16,
        /// The `Location` header, if any.
        location: Option<String>,
    },
    /// More redirects than [`Redirects::Follow`] allows.
    TooManyRedirects {
        /// What the client was doing.
        during: &'static str,
        /// Hops followed.
        hops: u32,
    },
    /// The server's response head is not valid HTTP (malformed, or larger than the HTTP stack
    /// accepts). Not a cut: the request is not re-issued.
    InvalidResponse {
        /// What the client was doing.
        during: &'static str,
        /// reqwest's error (its source chain names the HTTP parser's complaint).
        source: reqwest::Error,
    },
    /// The server's answer breaks the protocol.
    Protocol(ProtocolError),
    /// The stream was lost, the call was re-issued as often as allowed, and the last stream was
    /// lost too.
    Refused {
        /// The last failure.
        failure: Box<Failure>,
        /// Attempts made.
        attempts: u32,
        /// The last transport error on the stream (a failed body or reconnect), if any.
        transport: Option<Box<ClientError>>,
    },
    /// The stream was lost and the call is not known to be safe to re-issue: the server may have
    /// run it. Nothing was re-issued.
    OutcomeUnknown {
        /// The failure.
        failure: Box<Failure>,
        /// The method (and tool, for `tools/call`).
        method: String,
        /// Messages received for the call before the loss (progress notifications...): the
        /// first 64.
        received: Vec<Message>,
        /// The last transport error on the stream (a failed body or reconnect), if any.
        transport: Option<Box<ClientError>>,
    },
    /// The call's deadline passed.
    Timeout(Duration),
    /// The call ran (or had to run) as a task and has no result.
    Task(Box<TaskError>),
    /// The server wants a token and the client could not get one it accepts (feature `auth`).
    #[cfg(feature = "auth")]
    Auth(Box<super::auth::AuthFailure>),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Setup(what) => write!(f, "client setup: {what}"),
            ClientError::Http { during, source } => {
                write!(f, "HTTP error during {during}: {source}")?;
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            ClientError::Status {
                during,
                status,
                body,
            } => write!(f, "{during} answered {status}: {body}"),
            ClientError::Redirect {
                during,
                status,
                location,
            } => write!(
                f,
                "{during} answered {status}, a redirect to {}, which is not followed (MCP has no \
                 redirects; see ClientConfig::redirects)",
                location.as_deref().unwrap_or("(no Location)")
            ),
            ClientError::TooManyRedirects { during, hops } => {
                write!(f, "{during}: more than {hops} redirects")
            }
            ClientError::InvalidResponse { during, source } => {
                write!(f, "invalid response during {during}: {source}")?;
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            ClientError::Protocol(e) => write!(f, "protocol error: {e}"),
            ClientError::Refused {
                failure,
                attempts,
                transport,
            } => {
                write!(f, "refused after {attempts} attempt(s): {failure}")?;
                if let Some(t) = transport {
                    write!(f, "; last transport error: {t}")?;
                }
                Ok(())
            }
            ClientError::OutcomeUnknown {
                failure,
                method,
                transport,
                ..
            } => {
                write!(
                    f,
                    "{method}: the stream was lost and the call is not safe to re-issue; the server \
                     may have run it (outcome unknown): {failure}"
                )?;
                if let Some(t) = transport {
                    write!(f, "; last transport error: {t}")?;
                }
                Ok(())
            }
            ClientError::Timeout(after) => {
                write!(f, "the call timed out after {} ms", after.as_millis())
            }
            ClientError::Task(e) => e.fmt(f),
            #[cfg(feature = "auth")]
            ClientError::Auth(e) => write!(f, "sign-in: {e}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Http { source, .. } | ClientError::InvalidResponse { source, .. } => {
                Some(source)
            }
            ClientError::Protocol(e) => Some(e),
            ClientError::Task(e) => Some(&**e),
            ClientError::Refused { failure, .. } | ClientError::OutcomeUnknown { failure, .. } => {
                Some(&**failure)
            }
            _ => None,
        }
    }
}

impl ClientError {
    /// What happened, as the wire contract words it ([`Kind`]): the failure's own kind for a lost
    /// stream ([`Failure::kind`]).
    pub fn kind(&self) -> Kind {
        match self {
            ClientError::Setup(_) => Kind::Setup,
            ClientError::Http { source, .. } if source.is_connect() => Kind::Unreachable,
            ClientError::Http { .. } => Kind::Http,
            ClientError::Status { .. } => Kind::Status,
            ClientError::Redirect { .. } | ClientError::TooManyRedirects { .. } => Kind::Redirect,
            ClientError::InvalidResponse { .. } => Kind::InvalidResponse,
            ClientError::Protocol(_) => Kind::Protocol,
            ClientError::Refused { failure, .. } | ClientError::OutcomeUnknown { failure, .. } => {
                failure.kind()
            }
            ClientError::Timeout(_) => Kind::Timeout,
            ClientError::Task(t) => match t.kind {
                TaskErrorKind::Failed { .. } => Kind::TaskFailed,
                TaskErrorKind::Cancelled => Kind::TaskCancelled,
                TaskErrorKind::Required | TaskErrorKind::Unsupported => Kind::Tasks,
                TaskErrorKind::NotFound { .. }
                | TaskErrorKind::ReadsFailed { .. }
                | TaskErrorKind::ReadError { .. }
                | TaskErrorKind::InvalidAnswer(_) => Kind::Task,
            },
            #[cfg(feature = "auth")]
            ClientError::Auth(_) => Kind::Auth,
        }
    }

    /// Whether the server may have acted on the request ([`Outcome`]): not for a connection that
    /// was never made, a client that was never set up, a redirect or a `4xx` status; a failed
    /// task's outcome is [`Outcome::Failed`]; anything after the request may have been sent is
    /// [`Outcome::Unknown`].
    pub fn outcome(&self) -> Outcome {
        match self {
            ClientError::Setup(_)
            | ClientError::Redirect { .. }
            | ClientError::TooManyRedirects { .. } => Outcome::NotRun,
            #[cfg(feature = "auth")]
            ClientError::Auth(_) => Outcome::NotRun,
            ClientError::Http { source, .. } if source.is_connect() => Outcome::NotRun,
            ClientError::Status { status, .. } if *status < 500 => Outcome::NotRun,
            ClientError::Task(t) => match t.kind {
                TaskErrorKind::Failed { .. } | TaskErrorKind::Cancelled => Outcome::Failed,
                TaskErrorKind::Required | TaskErrorKind::Unsupported => Outcome::NotRun,
                _ => Outcome::Unknown,
            },
            _ => Outcome::Unknown,
        }
    }

    /// The code of the error answering a `method` request that failed with this error:
    /// [`Code::OutcomeUnknown`] for [`ClientError::OutcomeUnknown`] (whatever the method: the caller
    /// said it must not be re-sent), else [`Code::for_answer`].
    pub fn code(&self, method: &str) -> Code {
        match self {
            ClientError::OutcomeUnknown { .. } => Code::OutcomeUnknown,
            _ => Code::for_answer(method, self.kind(), self.outcome()),
        }
    }

    /// The guard's refusal behind this error, if any.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            ClientError::Refused { failure, .. } | ClientError::OutcomeUnknown { failure, .. } => {
                failure.refusal()
            }
            _ => None,
        }
    }

    pub(super) fn http(during: &'static str) -> impl Fn(reqwest::Error) -> ClientError {
        move |source| ClientError::from_reqwest(during, source)
    }

    /// reqwest's error, typed: a response head the HTTP parser rejected is
    /// [`ClientError::InvalidResponse`], anything else [`ClientError::Http`].
    fn from_reqwest(during: &'static str, source: reqwest::Error) -> ClientError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&source);
        let mut invalid = false;
        while let Some(c) = cause {
            if let Some(h) = c.downcast_ref::<hyper::Error>() {
                // Every parse error: a malformed or too large head, an invalid status or header.
                invalid = h.is_parse();
                break;
            }
            cause = c.source();
        }
        if invalid {
            ClientError::InvalidResponse { during, source }
        } else {
            ClientError::Http { during, source }
        }
    }
}

/// How one attempt at a call ended, short of its response.
pub(super) enum Attempt {
    /// An error the client reports as is.
    Client(ClientError),
    /// The stream was lost; the messages received before; the last transport error.
    Lost(Failure, Vec<Message>, Option<Box<ClientError>>),
    /// The server did not take the request (`404` on the POST: the session had expired).
    NotTaken(Failure),
    /// The server answered `429` or `503` (the error, its `Retry-After`): the request was not taken.
    Busy(ClientError, Option<Duration>),
}

impl Attempt {
    /// The error of a single-attempt exchange (`initialize`, `server/discover`): a lost stream is
    /// a refusal after one attempt.
    pub(super) fn into_error(self) -> ClientError {
        match self {
            Attempt::Client(e) | Attempt::Busy(e, _) => e,
            Attempt::Lost(f, _, transport) => ClientError::Refused {
                failure: Box::new(f),
                attempts: 1,
                transport,
            },
            Attempt::NotTaken(f) => ClientError::Refused {
                failure: Box::new(f),
                attempts: 1,
                transport: None,
            },
        }
    }
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        Attempt::Client(e)
    }
}
