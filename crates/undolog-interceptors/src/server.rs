//! The interceptor-server side on rmcp: serve `interceptors/list` and `interceptor/invoke` and
//! advertise `capabilities.extensions["io.modelcontextprotocol/interceptors"]`.

use std::sync::Arc;

use rmcp::model::{
    CustomRequest, CustomResult, ErrorCode, ErrorData, Implementation, JsonObject,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::Error;
use crate::registry::Registry;
use crate::wire::{EXTENSION_ID, InvokeParams, ListParams, METHOD_INVOKE, METHOD_LIST};

/// A ready-made MCP server that offers only interceptors.
///
/// Servers that also offer tools keep their own `ServerHandler` and call
/// [`handle_custom_request`] from `on_custom_request` and [`advertise`] from `get_info`.
#[derive(Debug, Clone)]
pub struct InterceptorServer {
    registry: Arc<Registry>,
    implementation: Implementation,
}

impl InterceptorServer {
    /// Serve the interceptors of `registry` under the given server name.
    pub fn new(registry: Registry, name: impl Into<String>) -> Self {
        InterceptorServer {
            registry: Arc::new(registry),
            implementation: Implementation::new(name, env!("CARGO_PKG_VERSION")),
        }
    }

    /// The interceptors this server offers.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

impl ServerHandler for InterceptorServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        advertise(&mut capabilities, &self.registry);
        ServerConfig::new(capabilities).with_server_info(self.implementation.clone())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        handle_custom_request(&self.registry, request).await
    }
}

/// The capability object: `{supportedEvents: [...]}`, the event patterns the interceptors hook.
pub fn capability(registry: &Registry) -> JsonObject {
    let mut object = JsonObject::new();
    object.insert("supportedEvents".into(), json!(registry.supported_events()));
    object
}

/// Add the interceptors extension to a server's capabilities.
pub fn advertise(capabilities: &mut ServerCapabilities, registry: &Registry) {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(EXTENSION_ID.to_string(), capability(registry));
}

/// Answer `interceptors/list` and `interceptor/invoke`; any other method is "method not found".
pub async fn handle_custom_request(
    registry: &Registry,
    request: CustomRequest,
) -> Result<CustomResult, ErrorData> {
    let CustomRequest { method, params, .. } = request;
    match method.as_str() {
        METHOD_LIST => {
            let params: ListParams = parse(METHOD_LIST, params)?;
            respond(&registry.list(&params))
        }
        METHOD_INVOKE => {
            let params: InvokeParams = parse(METHOD_INVOKE, params)?;
            respond(&registry.invoke(params).await?)
        }
        _ => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "method `{method}` not found; this server offers {METHOD_LIST} and {METHOD_INVOKE}"
            ),
            None,
        )),
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    method: &'static str,
    params: Option<Value>,
) -> Result<T, Error> {
    let value = match params {
        None | Some(Value::Null) => json!({}),
        Some(value) => strip_meta(value),
    };
    serde_json::from_value(value).map_err(|e| Error::InvalidParams {
        method,
        reason: e.to_string(),
    })
}

/// `_meta` belongs to the protocol, not to the params of these methods.
fn strip_meta(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.remove("_meta");
    }
    value
}

fn respond(result: &impl Serialize) -> Result<CustomResult, ErrorData> {
    serde_json::to_value(result)
        .map(CustomResult::new)
        .map_err(|e| {
            ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("could not encode the result: {e}"),
                None,
            )
        })
}
