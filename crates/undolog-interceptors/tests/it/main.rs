mod chain;
mod conformance;
mod remote_http;
