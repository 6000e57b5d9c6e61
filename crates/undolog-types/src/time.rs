use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC: the one time representation in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn now() -> Timestamp {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }

    pub fn as_millis(self) -> i64 {
        self.0
    }

    #[must_use]
    pub fn plus(self, duration: Duration) -> Timestamp {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }
}

/// RFC 3339 in UTC with milliseconds (`2026-12-01T07:32:16.123Z`), for messages and logs.
impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (days, millis) = (self.0.div_euclid(86_400_000), self.0.rem_euclid(86_400_000));
        let (year, month, day) = civil_from_days(days);
        let (h, m, s, ms) = (
            millis / 3_600_000,
            millis / 60_000 % 60,
            millis / 1_000 % 60,
            millis % 1_000,
        );
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z"
        )
    }
}

/// Year, month and day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn timestamps_print_as_rfc_3339_utc() {
        for (millis, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_796_110_336_123, "2026-12-01T07:32:16.123Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(Timestamp(millis).to_string(), text, "{millis}");
        }
    }
}
