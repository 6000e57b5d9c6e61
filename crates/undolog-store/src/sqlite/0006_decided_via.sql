-- Where each decision was made, version 6: `api` for a direct request (the
-- dashboard and the CLI included), `link:CHANNEL` for a signed link a notification carried.
-- Decisions made before this version say nothing (NULL).

ALTER TABLE approvals ADD COLUMN decided_via TEXT;
