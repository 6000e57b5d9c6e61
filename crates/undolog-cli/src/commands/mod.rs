pub(crate) mod demo;
pub(crate) mod demo_bank;
pub(crate) mod keys;
pub(crate) mod serve;
pub(crate) mod signature;
