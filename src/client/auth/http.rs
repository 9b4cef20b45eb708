//! The OAuth requests (discovery, registration, token requests) on the client's own HTTP stack:
//! rmcp's [`OAuthHttpClient`] over a reqwest client built like the MCP client's (its TLS roots,
//! proxy and connect timeout), with bounded bodies, a time limit, redirects followed only where
//! rmcp asks for it, and RFC 8707 `resource` left out of token requests when
//! [`AuthConfig::send_resource`](super::AuthConfig::send_resource) is off.

use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;
use reqwest::header;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};

/// The most an OAuth answer may hold (rmcp's own limit).
const MAX_BODY: usize = 1 << 20;
/// Redirects followed where rmcp asks for them (registration).
const MAX_REDIRECTS: usize = 10;
/// Time limit of one OAuth request when rmcp names none.
const TIMEOUT: Duration = Duration::from_secs(30);

pub(super) struct OAuthHttp {
    /// Built by `build_http`: no redirects of its own, the client's roots and proxy.
    pub(super) http: reqwest::Client,
    pub(super) send_resource: bool,
}

#[derive(Debug)]
struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

fn fail(why: impl Into<String>) -> OAuthHttpClientError {
    Box::new(Failure(why.into()))
}

/// `form` (`application/x-www-form-urlencoded`) without its `name` parameters.
pub(super) fn without_param(form: &str, name: &str) -> String {
    let mut url = Url::parse("http://form.invalid/").expect("a valid URL");
    url.set_query(Some(form));
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| k != name)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    url.query_pairs_mut().clear().extend_pairs(kept);
    url.query().unwrap_or("").to_owned()
}

impl OAuthHttp {
    async fn run(
        &self,
        request: http::Request<Vec<u8>>,
        policy: OAuthHttpRedirectPolicy,
    ) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
        let (parts, mut body) = request.into_parts();
        let is_form = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
        if !self.send_resource && is_form {
            let form = String::from_utf8_lossy(&body).into_owned();
            body = without_param(&form, "resource").into_bytes();
        }
        let mut method = parts.method;
        let mut url = Url::parse(&parts.uri.to_string()).map_err(|e| fail(e.to_string()))?;
        let mut headers = parts.headers;
        let mut body = Some(Bytes::from(body));
        let origin = url.origin();
        let mut hops = 0;
        loop {
            let mut req = self.http.request(method.clone(), url.clone());
            req = req.headers(headers.clone());
            if let Some(b) = &body {
                req = req.body(b.clone());
            }
            let res = req
                .send()
                .await
                .map_err(|e| Box::new(e) as OAuthHttpClientError)?;
            let status = res.status();
            let follow = policy == OAuthHttpRedirectPolicy::Follow && status.is_redirection();
            if follow
                && let Some(next) = res
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
            {
                hops += 1;
                if hops > MAX_REDIRECTS {
                    return Err(fail(format!("more than {MAX_REDIRECTS} redirects")));
                }
                if !matches!(status.as_u16(), 307 | 308) {
                    method = reqwest::Method::GET;
                    body = None;
                    headers.remove(header::CONTENT_TYPE);
                }
                if next.origin() != origin {
                    headers.remove(header::AUTHORIZATION);
                }
                url = next;
                continue;
            }
            return read(res).await;
        }
    }
}

/// The answer as rmcp wants it, its body read up to [`MAX_BODY`].
async fn read(mut res: reqwest::Response) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
    let mut builder = http::Response::builder()
        .status(res.status())
        .version(res.version());
    for (name, value) in res.headers() {
        builder = builder.header(name, value);
    }
    let mut body = Vec::new();
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| Box::new(e) as OAuthHttpClientError)?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(fail(format!("the OAuth answer exceeds {MAX_BODY} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    builder
        .body(body)
        .map_err(|e| Box::new(e) as OAuthHttpClientError)
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        let OAuthHttpRequest {
            request,
            redirect_policy,
            timeout,
            ..
        } = request;
        let limit = timeout.unwrap_or(TIMEOUT);
        Box::pin(async move {
            match tokio::time::timeout(limit, self.run(request, redirect_policy)).await {
                Ok(answer) => answer,
                Err(_) => Err(fail(format!(
                    "no OAuth answer within {} s",
                    limit.as_secs()
                ))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_is_left_out_of_a_form() {
        let form = "grant_type=authorization_code&code=a+b&resource=http%3A%2F%2Fx%2Fmcp&x=%26";
        assert_eq!(
            without_param(form, "resource"),
            "grant_type=authorization_code&code=a+b&x=%26"
        );
        assert_eq!(without_param("", "resource"), "");
    }
}
