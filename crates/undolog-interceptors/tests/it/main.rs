mod bad_input;
mod chain;
mod conformance;
mod remote_http;
mod remote_stdio;
