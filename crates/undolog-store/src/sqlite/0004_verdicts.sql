-- Interceptor verdicts in a record of their own, version 4.
--
-- What the interceptor chains decided about a call (`{request?, response?}`, SEP-2624
-- `ChainExecutionResult`s) was kept inside the recorded tool result's `_meta`; it is kept apart
-- now, so `result` is what the tool answered and nothing else.

ALTER TABLE effects ADD COLUMN verdicts TEXT;
