//! The fixture format of the language-neutral conformance suite (schema/fixture.schema.json).

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
pub(super) struct Manifest {
    pub fixtures: Vec<ManifestEntry>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ManifestEntry {
    pub id: String,
    pub kind: String,
    pub file: String,
    pub requirement: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct Fixture {
    pub id: String,
    pub kind: String,
    pub requirement: String,
    pub interceptors: Vec<FixtureInterceptor>,
    pub steps: Vec<Step>,
    pub volatile: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FixtureInterceptor {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub behavior: String,
    pub events: Vec<String>,
    pub phases: String,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub fail_open: bool,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(super) enum Step {
    List {
        event: Option<String>,
        expect: ResultExpectation,
    },
    Invoke {
        params: Value,
        expect: InvokeExpectation,
    },
    Apply {
        event: String,
        phase: String,
        payload: Value,
        context: Option<ApplyContext>,
        expect: DecisionExpectation,
    },
}

#[derive(Debug, Deserialize)]
pub(super) struct ResultExpectation {
    pub canonical: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum InvokeExpectation {
    Error {
        #[serde(rename = "errorCode")]
        error_code: i32,
    },
    Result(ResultExpectation),
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApplyContext {
    pub session_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct DecisionExpectation {
    pub decision: String,
    #[serde(default)]
    pub final_payload_canonical: Option<String>,
    #[serde(default)]
    pub forbids: Vec<String>,
    #[serde(default)]
    pub requires: Vec<String>,
}
