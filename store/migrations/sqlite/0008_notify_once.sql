-- Nothing to change on SQLite: its change feed polls data_version (the
-- PostgreSQL migration of this number drops a trigger). Kept so that both
-- engines' schemas carry the same versions.
SELECT 1;
