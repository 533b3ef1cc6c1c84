--
-- keys_text_libc: text under a libc collation other than C ("en_US").  PostgreSQL
-- does not trust strxfrm() for these, so a leading text key of this kind
-- stays PostgreSQL's Sort, and a later one is tie-broken with the
-- collation's comparator.  A machine without the en_US locale skips the
-- file (expected/04b_libc_1.out).  Uses gs_text from 04_text.
--
LOAD 'gpusort';
SET gpusort.min_rows = 0;
SET work_mem = '4MB';
SELECT NOT EXISTS (SELECT 1 FROM pg_collation
				   WHERE collname = 'en_US' AND collencoding IN (-1, 6)) AS skip_test \gset
\if :skip_test
\quit
\endif

SELECT id, t FROM gs_text WHERE id < 100 ORDER BY t COLLATE "en_US" DESC, id;
-- leading: a plain Sort
EXPLAIN (COSTS OFF) SELECT id, t FROM gs_text ORDER BY t COLLATE "en_US", id;
SELECT * FROM gs_check_dirs('gs_text', 't COLLATE "en_US"');
SELECT * FROM gs_check('SELECT t FROM gs_text ORDER BY t COLLATE "en_US" NULLS FIRST');
-- after an encoded column: the prefix is encoded, the rest is tie-broken
EXPLAIN (COSTS OFF) SELECT length(t) AS l, t FROM gs_text ORDER BY length(t), t COLLATE "en_US";
SELECT * FROM gs_check('SELECT length(t) AS l, t FROM gs_text ORDER BY length(t), t COLLATE "en_US"');
SELECT * FROM gs_check('SELECT t IS NULL AS n, t, id FROM gs_text ORDER BY t IS NULL, t COLLATE "en_US" DESC, id');
SELECT * FROM gs_check('SELECT id % 3 AS m, t FROM gs_text ORDER BY id % 3 DESC, t COLLATE "en_US" NULLS FIRST, id');
SELECT id % 2 AS m, t FROM gs_text WHERE id < 40 ORDER BY id % 2, t COLLATE "en_US", id;
-- the same over spilled runs
SET work_mem = '64kB';
SELECT * FROM gs_check('SELECT length(t) AS l, t, id FROM gs_text ORDER BY length(t) DESC, t COLLATE "en_US", id');
SET work_mem = '4MB';
-- bpchar and varchar under en_US
SELECT * FROM gs_check('SELECT c, id FROM gs_chars ORDER BY c IS NULL, c COLLATE "en_US" DESC, id');
SELECT * FROM gs_check('SELECT v, id FROM gs_chars ORDER BY v IS NULL, v COLLATE "en_US", id');
