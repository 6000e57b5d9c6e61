//! From [`RawConfig`] to [`GatewayConfig`]: every check, every default, in one pass.

use std::{collections::BTreeMap, collections::BTreeSet, net::SocketAddr, time::Duration};

use serde_json::json;
use undolog_store::{Compensation, StoreUrl};
use undolog_types::Tier;

use super::{
    ApprovalMode, ApprovalSettings, Error, ExecutorSettings, GatewayConfig, HttpSettings, Limits,
    RawConfig, Secret, TaskSupport, ToolSettings, UpstreamConfig, UpstreamTransport,
    raw::{RawCompensation, RawTool, RawUpstream},
};
use crate::template::Template;

mod executor;
mod interceptors;
use executor::executor;

pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub(crate) const DEFAULT_STORE: &str = "sqlite://undolog.db";

pub(super) fn validate(raw: RawConfig) -> Result<GatewayConfig, Error> {
    let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        Error::key(
            "listen",
            format!("{listen_text:?} is not an address; write IP:PORT, such as 127.0.0.1:8080"),
        )
    })?;
    let store_text = raw.store.as_deref().unwrap_or(DEFAULT_STORE);
    let store: StoreUrl = store_text
        .parse()
        .map_err(|e| Error::key("store", format!("{e}")))?;
    let engine = raw.engine.as_deref().map(engine_url).transpose()?;
    let default_tier = match &raw.default_tier {
        None => Tier::Irreversible,
        Some(text) => tier("default_tier", text)?,
    };
    let prefix_separator = raw.prefix_separator.unwrap_or_else(|| "__".to_owned());
    if prefix_separator.is_empty() {
        return Err(Error::key(
            "prefix_separator",
            "is empty; use a separator such as \"__\"",
        ));
    }
    let approvals = approvals(&raw.approvals, listen_text)?;
    let run_idle = Duration::from_secs(positive(
        "sessions.idle_secs",
        raw.sessions.idle_secs,
        15 * 60,
    )?);
    let limits = Limits {
        max_body_bytes: positive("limits.max_body_bytes", raw.limits.max_body_bytes, 4 << 20)?,
        upstream_timeout: Duration::from_secs(positive(
            "limits.upstream_timeout_secs",
            raw.limits.upstream_timeout_secs,
            30,
        )?),
        header_timeout: Duration::from_secs(positive(
            "limits.header_timeout_secs",
            raw.limits.header_timeout_secs,
            10,
        )?),
        body_timeout: Duration::from_secs(positive(
            "limits.body_timeout_secs",
            raw.limits.body_timeout_secs,
            30,
        )?),
        identical_call_wait: Duration::from_secs(positive(
            "limits.identical_call_wait_secs",
            raw.limits.identical_call_wait_secs,
            30,
        )?),
        sdk_lease: Duration::from_secs(positive(
            "limits.sdk_lease_secs",
            raw.limits.sdk_lease_secs,
            300,
        )?),
    };
    let executor = executor(&raw.executor)?;
    let http = HttpSettings {
        allowed_hosts: allowed("http.allowed_hosts", raw.http.allowed_hosts, false)?,
        allowed_origins: allowed("http.allowed_origins", raw.http.allowed_origins, true)?,
    };

    let pool = &raw.store_pool;
    let store_pool = undolog_store::PoolSettings {
        max_connections: pool
            .max_connections
            .map(|n| positive("store_pool.max_connections", Some(n), n))
            .transpose()?,
        min_connections: pool.min_connections,
        acquire_timeout: pool
            .acquire_timeout_secs
            .map(|s| {
                positive("store_pool.acquire_timeout_secs", Some(s), s).map(Duration::from_secs)
            })
            .transpose()?,
    };

    let raw_upstreams = if raw.upstreams.is_empty() {
        vec![RawUpstream {
            name: Some("demo".into()),
            builtin: Some("demo".into()),
            ..RawUpstream::default()
        }]
    } else {
        raw.upstreams
    };
    let mut upstreams = Vec::with_capacity(raw_upstreams.len());
    let mut names = BTreeSet::new();
    for (i, raw) in raw_upstreams.into_iter().enumerate() {
        let upstream = upstream(i, raw)?;
        if !names.insert(upstream.name.clone()) {
            return Err(Error::key(
                format!("upstreams[{i}].name"),
                format!(
                    "{:?} is used twice; give each upstream its own name",
                    upstream.name
                ),
            ));
        }
        upstreams.push(upstream);
    }

    let mut tools = BTreeMap::new();
    if upstreams
        .iter()
        .any(|u| matches!(u.transport, UpstreamTransport::Demo))
    {
        tools.extend(demo_tools());
    }
    for (name, raw) in raw.tools {
        let settings = tool(&name, raw)?;
        tools.insert(name, settings);
    }
    compensations_need_no_person(&tools)?;

    let interceptors = raw
        .interceptors
        .into_iter()
        .enumerate()
        .map(|(i, raw)| interceptors::interceptor(i, raw))
        .collect::<Result<Vec<_>, _>>()?;

    let oauth = raw.oauth.map(super::oauth::oauth).transpose()?;
    let metrics_listen = raw
        .metrics
        .listen
        .map(|text| {
            text.parse::<SocketAddr>().map_err(|_| {
                Error::key(
                    "metrics.listen",
                    format!("{text:?} is not an address; write IP:PORT, such as 127.0.0.1:9464"),
                )
            })
        })
        .transpose()?;

    let traces = raw.traces.map(traces).transpose()?;
    let notify = super::notify::targets(&raw.notify)?;

    Ok(GatewayConfig {
        notify,
        traces,
        metrics_listen,
        oauth,
        interceptors,
        listen,
        store,
        engine,
        default_tier,
        prefix_separator,
        approvals,
        run_idle,
        limits,
        executor,
        http,
        store_pool,
        upstreams,
        tools,
    })
}

/// `grpc://HOST:PORT` (or `http://`, which tonic dials the same way), as tonic wants it.
fn engine_url(text: &str) -> Result<String, Error> {
    let rest = text
        .strip_prefix("grpc://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| {
            Error::key(
                "engine",
                format!("{text:?} is not an engine address; write grpc://HOST:PORT"),
            )
        })?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') || !authority.contains(':') {
        return Err(Error::key(
            "engine",
            format!("{text:?} must be grpc://HOST:PORT, with nothing after the port"),
        ));
    }
    Ok(format!("http://{authority}"))
}

/// An allow-list as written: `["*"]` becomes the empty list (accept any); origins need a scheme.
fn allowed(
    key: &str,
    list: Option<Vec<String>>,
    origins: bool,
) -> Result<Option<Vec<String>>, Error> {
    let Some(list) = list else {
        return Ok(None);
    };
    if list.iter().any(|entry| entry == "*") {
        if list.len() > 1 {
            return Err(Error::key(
                key,
                "\"*\" accepts any value; write it alone or list the values",
            ));
        }
        return Ok(Some(Vec::new()));
    }
    if list.is_empty() {
        return Err(Error::key(
            key,
            "is empty; list the values to accept, or [\"*\"] to accept any",
        ));
    }
    for entry in &list {
        if entry.trim().is_empty() || (origins && entry != "null" && !entry.contains("://")) {
            return Err(Error::key(
                key,
                format!(
                    "{entry:?} is not {}",
                    if origins {
                        "an origin; write it with its scheme, such as \"https://app.example.com\""
                    } else {
                        "a host name; write a name or host:port, such as \"gateway.internal:8080\""
                    }
                ),
            ));
        }
    }
    Ok(Some(list))
}

fn tier(key: &str, text: &str) -> Result<Tier, Error> {
    text.parse().map_err(|_| {
        Error::key(
            key,
            format!("{text:?} is not a tier; use read_only, compensable or irreversible"),
        )
    })
}

fn positive<T: PartialOrd + Default + Copy>(
    key: &str,
    value: Option<T>,
    default: T,
) -> Result<T, Error> {
    match value {
        None => Ok(default),
        Some(v) if v > T::default() => Ok(v),
        Some(_) => Err(Error::key(key, "must be greater than zero")),
    }
}

fn approvals(raw: &super::raw::RawApprovals, listen: &str) -> Result<ApprovalSettings, Error> {
    let mode = match raw.mode.as_deref() {
        None | Some("hold") => ApprovalMode::Hold,
        Some("defer") => ApprovalMode::Defer,
        Some(other) => {
            return Err(Error::key(
                "approvals.mode",
                format!("{other:?} is not a mode; use \"hold\" or \"defer\""),
            ));
        }
    };
    Ok(ApprovalSettings {
        mode,
        timeout: Duration::from_secs(positive(
            "approvals.timeout_secs",
            raw.timeout_secs,
            24 * 60 * 60,
        )?),
        hold: Duration::from_secs(positive("approvals.hold_secs", raw.hold_secs, 300)?),
        allow_self_approval: raw.allow_self_approval.unwrap_or(false),
        public_url: super::notify::public_url(raw.public_url.as_deref(), listen)?,
        link_secret: super::notify::link_secret(raw.link_secret.as_deref())?,
        escalate_after: super::notify::escalate_after(raw.escalate_after_secs)?,
    })
}

/// A stdio server's command: anything but empty. `what` names it in the fix.
pub(super) fn stdio_command(
    key: &dyn Fn(&str) -> String,
    command: &str,
    what: &str,
) -> Result<String, Error> {
    if command.is_empty() {
        return Err(Error::key(
            key("command"),
            format!("is empty; give {what} to run"),
        ));
    }
    Ok(command.to_owned())
}

/// A Streamable HTTP server's URL: http or https.
pub(super) fn http_url(key: &dyn Fn(&str) -> String, url: &str) -> Result<String, Error> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Error::key(
            key("url"),
            format!("{url:?} is not an http(s) URL; write http://HOST:PORT/mcp"),
        ));
    }
    Ok(url.to_owned())
}

/// The headers of an HTTP upstream or interceptor server, names checked.
pub(super) fn headers(
    key: &dyn Fn(&str) -> String,
    raw: BTreeMap<String, String>,
) -> Result<Vec<(String, Secret)>, Error> {
    for header in raw.keys() {
        if http::HeaderName::try_from(header.as_str()).is_err() {
            return Err(Error::key(
                key(&format!("headers.{header}")),
                "is not a valid HTTP header name",
            ));
        }
    }
    Ok(raw.into_iter().map(|(k, v)| (k, Secret(v))).collect())
}

fn upstream(i: usize, raw: RawUpstream) -> Result<UpstreamConfig, Error> {
    let key = |field: &str| format!("upstreams[{i}].{field}");
    let name = raw.name.clone().ok_or_else(|| {
        Error::key(
            key("name"),
            "is missing; name each upstream, such as name = \"bank\"",
        )
    })?;
    if name.is_empty() {
        return Err(Error::key(key("name"), "is empty; name the upstream"));
    }
    let transport = match (&raw.builtin, &raw.command, &raw.url) {
        (Some(builtin), None, None) => match builtin.as_str() {
            "demo" => UpstreamTransport::Demo,
            other => {
                return Err(Error::key(
                    key("builtin"),
                    format!("{other:?} is not a built-in upstream; the only one is \"demo\""),
                ));
            }
        },
        (None, Some(command), None) => UpstreamTransport::Stdio {
            command: stdio_command(&key, command, "the program")?,
            args: raw.args,
            env: raw.env,
        },
        (None, None, Some(url)) => UpstreamTransport::Http {
            url: http_url(&key, url)?,
            headers: headers(&key, raw.headers)?,
        },
        _ => {
            return Err(Error::key(
                format!("upstreams[{i}]"),
                "give exactly one of `command` (a stdio server), `url` (Streamable HTTP) or \
                 `builtin = \"demo\"`",
            ));
        }
    };
    Ok(UpstreamConfig {
        name,
        transport,
        prefix: raw.prefix,
        trust_annotations: raw.trust_annotations.unwrap_or(false),
    })
}

fn tool(name: &str, raw: RawTool) -> Result<ToolSettings, Error> {
    let key = |field: &str| format!("tools.{name}.{field}");
    let tier = raw
        .tier
        .as_deref()
        .map(|t| tier(&key("tier"), t))
        .transpose()?;
    let compensation = raw
        .compensation
        .map(|c| compensation(&key("compensation"), c))
        .transpose()?;
    if compensation.is_some() && tier.is_some_and(|t| t != Tier::Compensable) {
        return Err(Error::key(
            key("compensation"),
            "is set on a tool that is not compensable; set tier = \"compensable\" or drop it",
        ));
    }
    let task = match raw.task.as_deref() {
        None | Some("never") => TaskSupport::Never,
        Some("optional") => TaskSupport::Optional,
        Some("required") => TaskSupport::Required,
        Some(other) => {
            return Err(Error::key(
                key("task"),
                format!("{other:?} is not a choice; use \"never\", \"optional\" or \"required\""),
            ));
        }
    };
    if raw.task_after_ms.is_some() && task == TaskSupport::Never {
        return Err(Error::key(
            key("task_after_ms"),
            "applies only to a tool whose calls may be tasks; set task = \"optional\" or \"required\"",
        ));
    }
    Ok(ToolSettings {
        tier: tier.or(compensation.as_ref().map(|_| Tier::Compensable)),
        requires_approval: raw.requires_approval,
        idempotent: raw.idempotent,
        compensation,
        task,
        task_after: raw.task_after_ms.map(Duration::from_millis),
    })
}

fn compensation(key: &str, raw: RawCompensation) -> Result<Compensation, Error> {
    let tool = raw.tool.filter(|t| !t.is_empty()).ok_or_else(|| {
        Error::key(
            format!("{key}.tool"),
            "is missing; name the tool that undoes this one",
        )
    })?;
    let args = raw.args.unwrap_or_else(|| json!({}));
    Template::check(&args).map_err(|e| Error::key(format!("{key}.args"), e))?;
    Ok(Compensation::Upstream { tool, args })
}

/// An undo step runs with no person asked, so a tool that waits for one (irreversible, or
/// `requires_approval`) can never be a compensation: undo would run it unapproved.
fn compensations_need_no_person(tools: &BTreeMap<String, ToolSettings>) -> Result<(), Error> {
    for (name, settings) in tools {
        let Some(Compensation::Upstream { tool, .. }) = &settings.compensation else {
            continue;
        };
        let Some(undoer) = tools.get(tool) else {
            continue; // classified when it is used; a step refuses one that needs approval
        };
        let needs_person =
            undoer.tier == Some(Tier::Irreversible) || undoer.requires_approval == Some(true);
        if needs_person {
            return Err(Error::key(
                format!("tools.{name}.compensation.tool"),
                format!(
                    "names {tool:?}, which waits for a person's approval (tools.{tool}); an undo \
                     step runs unapproved, so it can never be a compensation. Name a compensable \
                     tool, or undo {name} by hand"
                ),
            ));
        }
    }
    Ok(())
}

/// The demo bank's classification: what a newcomer sees work without writing any configuration.
fn demo_tools() -> BTreeMap<String, ToolSettings> {
    BTreeMap::from([
        (
            "get_balance".to_owned(),
            ToolSettings {
                tier: Some(Tier::ReadOnly),
                ..ToolSettings::default()
            },
        ),
        (
            "transfer".to_owned(),
            ToolSettings {
                tier: Some(Tier::Compensable),
                compensation: Some(Compensation::Upstream {
                    tool: "transfer".into(),
                    args: json!({
                        "from_account": "{{args.to_account}}",
                        "to_account": "{{args.from_account}}",
                        "amount": "{{args.amount}}",
                    }),
                }),
                ..ToolSettings::default()
            },
        ),
        (
            "send_email".to_owned(),
            ToolSettings {
                tier: Some(Tier::Irreversible),
                ..ToolSettings::default()
            },
        ),
    ])
}

/// `[traces]`: an `http(s)://` collector base URL is required once the table is there.
fn traces(raw: super::raw::RawTraces) -> Result<super::TraceSettings, Error> {
    let base = raw.otlp_endpoint.ok_or_else(|| {
        Error::key(
            "traces.otlp_endpoint",
            "missing: name the collector's OTLP/HTTP address, such as http://127.0.0.1:4318",
        )
    })?;
    let parsed = url::Url::parse(&base).ok().filter(|u| {
        matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.query().is_none()
    });
    if parsed.is_none() {
        return Err(Error::key(
            "traces.otlp_endpoint",
            format!("{base:?} is not an http(s) URL; write one such as http://127.0.0.1:4318"),
        ));
    }
    let export_every = Duration::from_millis(raw.export_every_ms.unwrap_or(1000));
    if export_every.is_zero() {
        return Err(Error::key(
            "traces.export_every_ms",
            "must be above 0 (1000 is the default)",
        ));
    }
    Ok(super::TraceSettings {
        endpoint: format!("{}/v1/traces", base.trim_end_matches('/')),
        service_name: raw.service_name.unwrap_or_else(|| "undolog".to_owned()),
        export_every,
    })
}
