-- Lease tokens, version 7: the digest of the secret an effect's executor was given, which
-- whoever settles the call must present. Effects from before have none, so nobody can settle
-- one that was still running at the upgrade: it ends in doubt, for an operator.
ALTER TABLE effects ADD COLUMN lease_token TEXT;
