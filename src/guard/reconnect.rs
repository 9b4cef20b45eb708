//! The answer to a reconnect (`GET` + `Last-Event-ID`) as the engine judges it: its status and the
//! two headers that matter, parsed once.

use std::time::{Duration, SystemTime};

/// The response to a reconnect (`GET` + `Last-Event-ID`): build it with
/// [`ReconnectResponse::new`], [`ReconnectResponse::event_stream`] or
/// [`ReconnectResponse::from_raw`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconnectResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Retry-After` header, if present.
    pub retry_after: Option<Duration>,
    /// The `Content-Type` header, if present.
    pub content_type: Option<String>,
}

/// Parses a `Retry-After` header value: delta-seconds (`120`) or an HTTP-date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, and the obsolete forms RFC 9110 accepts) relative to `now`.
/// A date in the past is zero; anything else is `None`.
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Saturate: a huge delta is clamped by the stream's max_delay anyway.
        let secs = text.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

impl ReconnectResponse {
    /// A response with this status, and with the `Retry-After` delay and `Content-Type` given
    /// (already parsed; [`ReconnectResponse::from_raw`] parses header bytes).
    pub fn new(
        status: u16,
        retry_after: Option<Duration>,
        content_type: Option<String>,
    ) -> ReconnectResponse {
        ReconnectResponse {
            status,
            retry_after,
            content_type,
        }
    }

    /// A `200 text/event-stream` answer (what a replaying server sends).
    pub fn event_stream() -> ReconnectResponse {
        ReconnectResponse {
            status: 200,
            retry_after: None,
            content_type: Some("text/event-stream".to_owned()),
        }
    }

    /// From a status and the raw `Retry-After` and `Content-Type` header values, at wall-clock
    /// time `now` (for an HTTP-date `Retry-After`).
    pub fn from_raw(
        status: u16,
        retry_after: Option<&[u8]>,
        content_type: Option<&[u8]>,
        now: SystemTime,
    ) -> ReconnectResponse {
        ReconnectResponse {
            status,
            retry_after: retry_after.and_then(|v| parse_retry_after(v, now)),
            content_type: content_type.map(|v| String::from_utf8_lossy(v).into_owned()),
        }
    }

    /// From an `http` response head, at wall-clock time `now`.
    #[cfg(feature = "http")]
    pub fn from_parts(parts: &http::response::Parts, now: SystemTime) -> ReconnectResponse {
        ReconnectResponse::from_headers(parts.status.as_u16(), &parts.headers, now)
    }

    /// From a status and the response's headers (`http`'s map, which reqwest and hyper hand
    /// out), at wall-clock time `now`.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use ssegate::resume::ReconnectResponse;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("2"));
    /// let busy = ReconnectResponse::from_headers(503, &headers, SystemTime::now());
    /// assert_eq!((busy.status, busy.retry_after), (503, Some(Duration::from_secs(2))));
    /// assert_eq!(busy.content_type, None);
    /// ```
    #[cfg(feature = "http")]
    pub fn from_headers(
        status: u16,
        headers: &http::HeaderMap,
        now: SystemTime,
    ) -> ReconnectResponse {
        let header = |name| headers.get(name).map(http::HeaderValue::as_bytes);
        ReconnectResponse::from_raw(
            status,
            header(http::header::RETRY_AFTER),
            header(http::header::CONTENT_TYPE),
            now,
        )
    }
}
