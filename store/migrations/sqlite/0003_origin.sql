-- Where a rule is declared: '' for rules added through the API, or
-- 'config:SITE' for a static rule of that site's configuration ([[rule]]),
-- which only that site's configuration may change or withdraw.
ALTER TABLE rules ADD COLUMN origin TEXT NOT NULL DEFAULT '';
