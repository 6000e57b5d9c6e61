mod chain;
mod conformance;
mod remote_http;
mod remote_stdio;
