//! The operators' endpoints on the admin listener, without a token (load
//! balancers and Prometheus call them): `GET /healthz` (the process runs),
//! `GET /readyz` (the database answers) and `GET /metrics` (Prometheus text).

use hookline_app::App;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::transport::failure::json_response;

/// An operators' endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    Health,
    Ready,
    Metrics,
}

impl Probe {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Probe::Health => "GET /healthz",
            Probe::Ready => "GET /readyz",
            Probe::Metrics => "GET /metrics",
        }
    }
}

/// The probe `GET path` asks for, if any (other methods on these paths are the
/// admin router's 404s).
pub(crate) fn route(method: &Method, path: &str) -> Option<Probe> {
    if method != Method::GET {
        return None;
    }
    match path {
        "/healthz" => Some(Probe::Health),
        "/readyz" => Some(Probe::Ready),
        "/metrics" => Some(Probe::Metrics),
        _ => None,
    }
}

#[derive(Debug)]
pub(crate) struct Operations {
    app: App,
    metrics: Option<PrometheusHandle>,
}

impl Operations {
    pub(crate) fn new(app: App, metrics: Option<PrometheusHandle>) -> Operations {
        Operations { app, metrics }
    }

    pub(crate) async fn answer(&self, probe: Probe) -> Response<Full<Bytes>> {
        match probe {
            Probe::Health => json_response(StatusCode::OK, r#"{"status":"ok"}"#.to_owned()),
            Probe::Ready => match self.app.database_answers().await {
                Ok(_) => {
                    crate::transport::outage::OUTAGE.answered();
                    json_response(StatusCode::OK, r#"{"status":"ready"}"#.to_owned())
                }
                Err(error) => {
                    crate::transport::outage::OUTAGE.refused(&error);
                    let mut response = json_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        r#"{"status":"unavailable","error":"The database does not answer."}"#
                            .to_owned(),
                    );
                    response
                        .headers_mut()
                        .insert("retry-after", HeaderValue::from_static("5"));
                    response
                }
            },
            Probe::Metrics => self.metrics().await,
        }
    }

    /// The recorded metrics, with the queue's gauges read now.
    async fn metrics(&self) -> Response<Full<Bytes>> {
        let Some(handle) = &self.metrics else {
            return json_response(
                StatusCode::NOT_FOUND,
                r#"{"success":false,"error":"Metrics are not recorded by this server."}"#
                    .to_owned(),
            );
        };
        match self.app.backlog().await {
            Ok((due, late)) => {
                metrics::gauge!("hookline_delivery_queue_due").set(due as f64);
                metrics::gauge!("hookline_delivery_queue_oldest_due_seconds")
                    .set(late.as_secs_f64());
            }
            Err(error) => tracing::warn!(%error, "cannot read the delivery queue for /metrics"),
        }
        let mut response = Response::new(Full::new(Bytes::from(handle.render())));
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
    }
}
