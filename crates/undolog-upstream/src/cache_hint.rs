//! The 2026-07-28 caching hint of a list (`ttlMs`, `cacheScope`), merged over the upstreams a
//! gateway list is made of: the earliest expiry, and public only when every part is public. A
//! part that gave no hint (a 2025-11-25 upstream, one that could not answer) makes the whole
//! list uncacheable, never cacheable by default.

use rmcp::{model::CacheScope, service::MergedList};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    ttl_ms: Option<u64>,
    scope: Option<CacheScope>,
}

impl CacheHint {
    /// Nothing is known: not to be cached.
    pub const UNKNOWN: CacheHint = CacheHint {
        ttl_ms: None,
        scope: None,
    };

    /// The hint of one upstream's list, all its pages merged.
    pub fn of<T>(list: &MergedList<T>) -> CacheHint {
        CacheHint {
            ttl_ms: list.ttl_ms,
            scope: list.cache_scope,
        }
    }

    /// The hint of a list made of `parts` (an empty one has nothing to cache).
    pub fn merged(parts: impl IntoIterator<Item = CacheHint>) -> CacheHint {
        parts
            .into_iter()
            .reduce(|a, b| CacheHint {
                ttl_ms: a.ttl_ms.zip(b.ttl_ms).map(|(a, b)| a.min(b)),
                scope: match (a.scope, b.scope) {
                    (Some(CacheScope::Public), Some(CacheScope::Public)) => {
                        Some(CacheScope::Public)
                    }
                    (None, _) | (_, None) => None,
                    _ => Some(CacheScope::Private),
                },
            })
            .unwrap_or(CacheHint::UNKNOWN)
    }

    /// How long a client may keep the list (0: not at all).
    pub fn ttl_ms(self) -> u64 {
        match self.scope {
            Some(_) => self.ttl_ms.unwrap_or(0),
            None => 0,
        }
    }

    /// Who may share a cached copy (private unless every part said public).
    pub fn scope(self) -> CacheScope {
        match (self.ttl_ms, self.scope) {
            (Some(_), Some(CacheScope::Public)) => CacheScope::Public,
            _ => CacheScope::Private,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(ttl_ms: Option<u64>, scope: Option<CacheScope>) -> CacheHint {
        CacheHint { ttl_ms, scope }
    }

    #[test]
    fn a_merged_hint_is_the_strictest_of_its_parts() {
        use CacheScope::{Private, Public};
        let cases: &[(&[CacheHint], u64, CacheScope)] = &[
            (&[], 0, Private),
            (&[hint(Some(300), Some(Public))], 300, Public),
            (
                &[hint(Some(300), Some(Public)), hint(Some(60), Some(Public))],
                60,
                Public,
            ),
            (
                &[
                    hint(Some(300), Some(Public)),
                    hint(Some(600), Some(Private)),
                ],
                300,
                Private,
            ),
            (
                &[hint(Some(300), Some(Public)), CacheHint::UNKNOWN],
                0,
                Private,
            ),
            (&[hint(None, Some(Public))], 0, Private),
            (&[hint(Some(300), None)], 0, Private),
        ];
        for (parts, ttl, scope) in cases {
            let merged = CacheHint::merged(parts.iter().copied());
            assert_eq!(
                (merged.ttl_ms(), merged.scope()),
                (*ttl, *scope),
                "{parts:?}"
            );
        }
    }
}
