pub(crate) mod admin;
pub(crate) mod demo;
pub(crate) mod demo_bank;
pub(crate) mod keys;
pub(crate) mod remote;
pub(crate) mod serve;
pub(crate) mod signature;
pub(crate) mod table;
