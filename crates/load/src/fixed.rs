//! A minimal fixed-reply upstream: answers every unary call with an empty message and OK.
//! It does as little as a gRPC server can, so it measures the path in front of it.

use std::path::Path;

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use http::{HeaderValue, Response};
use tokio::net::UnixListener;

use csi_gateway::grpc::{body, frame, status, CONTENT_TYPE};

/// Serves on `path` until the process ends.
pub async fn serve(path: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    loop {
        let (io, _) = listener.accept().await?;
        tokio::spawn(async move {
            let Ok(mut conn) = h2::server::Builder::new()
                .initial_window_size(1 << 20)
                .max_concurrent_streams(1024)
                .handshake::<_, Bytes>(io)
                .await
            else {
                return;
            };
            let mut calls = FuturesUnordered::new();
            loop {
                tokio::select! {
                    Some(()) = calls.next(), if !calls.is_empty() => {}
                    next = conn.accept() => match next {
                        Some(Ok((request, respond))) => calls.push(answer(request, respond)),
                        _ => break,
                    },
                }
            }
        });
    }
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let mut body = request.into_body();
    if body::read_to_end(&mut body).await.is_err() {
        return;
    }
    let mut head = Response::new(());
    head.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    if stream.send_data(frame::encode(&[]), false).is_ok() {
        let _ = stream.send_trailers(status::ok_trailers());
    }
}
