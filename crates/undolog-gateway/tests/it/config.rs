//! Invalid configuration stops start-up with a message that names the key and the fix.

use undolog_gateway::{ConfigSource, GatewayConfig};

fn load(toml: &str) -> Result<GatewayConfig, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("undolog.toml");
    std::fs::write(&file, toml).unwrap();
    GatewayConfig::load(&ConfigSource {
        file: Some(file),
        ..ConfigSource::default()
    })
    .map_err(|e| e.to_string())
}

#[test]
fn each_mistake_names_its_key_and_the_fix() {
    for (toml, key, fix) in [
        ("listen = \"localhost\"", "`listen`", "IP:PORT"),
        (
            "[[notify]]\nurl = \"https://hooks.example.com\"",
            "`notify[0].kind`",
            "\"webhook\", \"slack\" or \"email\"",
        ),
        (
            "[[notify]]\nkind = \"webhook\"\nurl = \"https://hooks.example.com\"",
            "`notify[0].secret`",
            "16 characters or more",
        ),
        (
            "[[notify]]\nkind = \"slack\"\nurl = \"hooks.slack.com/services/x\"",
            "`notify[0].url`",
            "not an http(s) URL",
        ),
        (
            "[[notify]]\nkind = \"slack\"\nurl = \"https://h\"\nto = [\"a@b.c\"]",
            "`notify[0].to`",
            "means nothing to a slack target",
        ),
        (
            "[[notify]]\nkind = \"email\"\nsmtp = \"mail.example.com\"\nfrom = \"a@b.c\"\nto = [\"d@e.f\"]",
            "`notify[0].smtp`",
            "smtp://HOST:PORT",
        ),
        (
            "[[notify]]\nkind = \"email\"\nsmtp = \"smtp://127.0.0.1:25\"\nfrom = \"not an address\"\nto = [\"d@e.f\"]",
            "`notify[0].from`",
            "is not an address",
        ),
        (
            "[[notify]]\nkind = \"email\"\nsmtp = \"smtp://127.0.0.1:25\"\nfrom = \"a@b.c\"\nto = []",
            "`notify[0].to`",
            "list the recipients",
        ),
        (
            "[[notify]]\nkind = \"slack\"\nurl = \"https://h\"\n[[notify]]\nkind = \"slack\"\nname = \"slack-0\"\nurl = \"https://i\"",
            "`notify[1].name`",
            "names another target too",
        ),
        (
            "[[notify]]\nkind = \"slack\"\nname = \"ops mail\"\nurl = \"https://h\"",
            "`notify[0].name`",
            "letters, digits",
        ),
        (
            "[approvals]\nlink_secret = \"short\"",
            "`approvals.link_secret`",
            "openssl rand -hex 32",
        ),
        (
            "[approvals]\npublic_url = \"undolog.example.com\"",
            "`approvals.public_url`",
            "https://undolog.example.com",
        ),
        (
            "[approvals]\nescalate_after_secs = 0",
            "`approvals.escalate_after_secs`",
            "greater than zero",
        ),
        (
            "engine = \"127.0.0.1:50051\"",
            "`engine`",
            "grpc://HOST:PORT",
        ),
        (
            "engine = \"grpc://10.0.0.5\"",
            "`engine`",
            "grpc://HOST:PORT",
        ),
        (
            "engine = \"grpc://10.0.0.5:50051/v1\"",
            "`engine`",
            "nothing after the port",
        ),
        (
            "[metrics]\nlisten = \"9464\"",
            "`metrics.listen`",
            "IP:PORT",
        ),
        (
            "[traces]\nservice_name = \"gw\"",
            "`traces.otlp_endpoint`",
            "http://127.0.0.1:4318",
        ),
        (
            "[traces]\notlp_endpoint = \"127.0.0.1:4318\"",
            "`traces.otlp_endpoint`",
            "not an http(s) URL",
        ),
        (
            "[traces]\notlp_endpoint = \"http://c:4318\"\nexport_every_ms = 0",
            "`traces.export_every_ms`",
            "above 0",
        ),
        (
            "listen_addr = \"127.0.0.1:1\"",
            "listen_addr",
            "unknown field",
        ),
        (
            "[approvals]\nmode = \"wait\"",
            "`approvals.mode`",
            "\"hold\" or \"defer\"",
        ),
        (
            "default_tier = \"safe\"",
            "`default_tier`",
            "read_only, compensable or irreversible",
        ),
        ("store = \"mysql://x\"", "`store`", "sqlite://"),
        (
            "[http]\nallowed_origins = [\"app.example.com\"]",
            "`http.allowed_origins`",
            "with its scheme",
        ),
        (
            "[http]\nallowed_hosts = [\"*\", \"a.test\"]",
            "`http.allowed_hosts`",
            "write it alone",
        ),
        (
            "[http]\nallowed_hosts = []",
            "`http.allowed_hosts`",
            "[\"*\"] to accept any",
        ),
        (
            "[[upstreams]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://y\"",
            "`upstreams[0]`",
            "exactly one of",
        ),
        (
            "[[upstreams]]\ncommand = \"x\"",
            "`upstreams[0].name`",
            "name each upstream",
        ),
        (
            "[[upstreams]]\nname = \"a\"\nurl = \"ftp://y\"",
            "`upstreams[0].url`",
            "http://HOST:PORT/mcp",
        ),
        (
            "[tools.t]\ntier = \"read_only\"\ncompensation = { tool = \"u\" }",
            "`tools.t.compensation`",
            "compensable",
        ),
        (
            "[tools.t]\ncompensation = { tool = \"u\", args = { a = \"{{env.HOME}}\" } }",
            "`tools.t.compensation.args`",
            "args. or result.",
        ),
        (
            "[tools.t]\ncompensation = { tool = \"send\" }\n[tools.send]\ntier = \"irreversible\"",
            "`tools.t.compensation.tool`",
            "can never be a compensation",
        ),
        (
            "[tools.t]\ncompensation = { tool = \"u\" }\n[tools.u]\nrequires_approval = true",
            "`tools.t.compensation.tool`",
            "waits for a person",
        ),
        (
            "[approvals]\nallow_self_approval = \"yes\"",
            "approvals.allow_self_approval",
            "boolean",
        ),
        (
            "[limits]\nheader_timeout_secs = 0",
            "`limits.header_timeout_secs`",
            "greater than zero",
        ),
        (
            "[limits]\nupstream_timeout_secs = 0",
            "`limits.upstream_timeout_secs`",
            "greater than zero",
        ),
        (
            "[limits]\nidentical_call_wait_secs = 0",
            "`limits.identical_call_wait_secs`",
            "greater than zero",
        ),
        (
            "[executor]\nheartbeat_ms = 1000\ndead_after_ms = 2000",
            "`executor.dead_after_ms`",
            "make it at least 3000 ms",
        ),
        (
            "[executor]\nlease_ms = 500",
            "`executor.lease_ms`",
            "make it at least 3000 ms",
        ),
        (
            "[executor]\npeer_silence_ms = 600",
            "`executor.peer_silence_ms`",
            "make it at least 1000 ms",
        ),
        (
            "[executor]\nname = \" \"",
            "`executor.name`",
            "leave it out for the default",
        ),
        ("[executor]\nbeat = 1", "beat", "unknown field"),
        (
            "[tools.t]\ntask = \"sometimes\"",
            "`tools.t.task`",
            "\"never\", \"optional\" or \"required\"",
        ),
        (
            "[tools.t]\ntask_after_ms = 500",
            "`tools.t.task_after_ms`",
            "set task = \"optional\" or \"required\"",
        ),
    ] {
        let error = load(toml).expect_err(toml);
        assert!(
            error.contains(key),
            "{toml}\n→ {error}\n(wanted the key {key})"
        );
        assert!(
            error.contains(fix),
            "{toml}\n→ {error}\n(wanted the fix {fix})"
        );
    }
}

#[test]
fn no_configuration_means_the_demo_bank_on_loopback_with_a_local_file() {
    let config = load("").unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.upstreams.len(), 1);
    assert_eq!(config.upstreams[0].name, "demo");
    assert_eq!(
        config.store,
        undolog_store::StoreUrl::SqliteFile("undolog.db".into())
    );
    let transfer = &config.tools["transfer"];
    assert_eq!(transfer.tier, Some(undolog_types::Tier::Compensable));
    assert!(transfer.compensation.is_some());
    // Faults heal in seconds by default: short renewed leases, a beat a second.
    let executor = &config.executor;
    assert_eq!(executor.name, None, "host name and listen address");
    assert_eq!(executor.lease, std::time::Duration::from_secs(10));
    assert_eq!(executor.heartbeat, std::time::Duration::from_secs(1));
    assert_eq!(executor.dead_after, std::time::Duration::from_secs(5));
    assert_eq!(executor.peer_silence, std::time::Duration::from_secs(6));
    assert_eq!(
        config.limits.identical_call_wait,
        std::time::Duration::from_secs(30)
    );
}

#[test]
fn the_deployment_recipes_gateway_configuration_is_valid() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gateway.toml");
    let config = load(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("deploy/gateway.toml: {e}"));
    assert_eq!(config.metrics_listen, Some("0.0.0.0:9464".parse().unwrap()));
    assert_eq!(
        config.executor.dead_after,
        std::time::Duration::from_secs(5)
    );
}
