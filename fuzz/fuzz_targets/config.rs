#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    undolog_fuzz::config(data);
});
