-- PostgreSQL's 0009 drops the foreign key of history entries (its check
-- locked the rule for every entry); SQLite's costs a rowid lookup and
-- stays. This file keeps the two engines' versions in step.
SELECT 1;
