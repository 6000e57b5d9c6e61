-- One index of pending effects, version 15.
--
-- Pending effects were indexed twice: by org and lease expiry (`effects_pending`, for the in-doubt
-- sweep) and by lease holder (`effects_pending_by_holder`, for ending a dead executor's leases).
-- Every new call's effect is pending when it is written, so each paid both index entries. Pending
-- effects are only the calls under way and those in doubt, a handful against the log, so ending a
-- dead executor's leases reads them all through `effects_pending` and keeps those of the dead:
-- the rare statement reads a few more rows, and every call writes one index entry fewer.

DROP INDEX effects_pending_by_holder;
