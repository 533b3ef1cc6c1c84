# Server restarts, on one server:
#   - a crash (immediate shutdown) right after btree builds by gpusort:
#     out-of-core builds (maintenance_work_mem = 1MB: runs on disk, merged
#     into the page writer), CREATE INDEX and REINDEX, and in-memory builds
#     (a collated text key, a unique key with INCLUDE), and a parallel
#     build, whose workers logged and wrote its pages.  While the server is
#     down the index files are removed: recovery must write them again from
#     the WAL that gpusort wrote for them (the builds start after a
#     checkpoint, so that recovery replays all of it).  After recovery each
#     index passes amcheck (bt_index_parent_check), each out-of-core one
#     and the parallel one equal PostgreSQL's build of the same index page
#     by page (but LSN, checksum and the free space between the line
#     pointers and the items:
#     recovery restores pages from WAL images that leave it out, zeroed,
#     where a fresh build may leave old bytes), and queries through the
#     indexes answer as a sequential scan does;
#   - gpusort's life cycle, the server started twice more:
#     1. without gpusort in shared_preload_libraries: CREATE EXTENSION warns
#        (with the hint to preload it), and loading the library in the
#        middle of a session (LOAD, a gpusort function) does not make the
#        session's sorts GpuSorts nor its index builds gpusort's;
#     2. preloading gpusort with gpusort.service_memory = 0 (a GPU that
#        can't be used, on any machine): with gpusort.engine = gpu the "not
#        available" WARNING comes once a session, not once per query nor
#        once per parallel worker; and DROP EXTENSION in one session stops
#        a second, already open, session from replacing its sorts (and
#        CREATE EXTENSION brings them back), including a statement it had
#        prepared; and gpusort.cpu_threads defaults to half the cores.
#
# Run by scripts/test.sh; by hand as test/t/001_shards.pl says.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use GpuSortNodes;

my $db = 'gs';
# wal_level = replica, PostgreSQL's default: every build writes WAL (under
# the framework's minimal, a CREATE INDEX writes none)
my $node = gpusort_node('restarts', $db, conf => "wal_level = replica\n");

# ---- a crash right after builds ----
$node->safe_psql(
	$db, <<'EOSQL');
CREATE EXTENSION amcheck;
CREATE EXTENSION pageinspect;
CREATE TABLE gs_crash (id int, a int8, c text) WITH (autovacuum_enabled = off);
INSERT INTO gs_crash SELECT i, (i::int8 * 2654435761) % 1000003, md5((i % 5000)::text)
FROM generate_series(1, 100000) AS i;
DELETE FROM gs_crash WHERE id % 17 = 0;
CREATE TABLE crash (k int8, t text, v int4);
INSERT INTO crash
SELECT (i * 7919) % 200003, md5(i::text), i % 1000
FROM generate_series(1, 200000) AS i;
CHECKPOINT;
EOSQL

# the builds, each committed; the server dies right after the last one
my ($rc, $out) = gs_psql(
	$node, $db, <<'EOSQL', merge => 1);
SET max_parallel_maintenance_workers = 0;
SET maintenance_work_mem = '1MB';
SET gpusort.log_index_builds = on;
SET client_min_messages = log;
CREATE INDEX gs_crash_a ON gs_crash (a);
CREATE UNIQUE INDEX gs_crash_id ON gs_crash (id DESC);
CREATE INDEX gs_crash_c ON gs_crash (c COLLATE "C", a);
REINDEX INDEX gs_crash_id;
EOSQL
is($rc, 0, 'out-of-core builds succeed') or diag($out);
is(scalar(() = $out =~ /built by gpusort \(sorted in runs on disk\)/g),
	4, 'built by gpusort in runs on disk');
($rc, $out) = gs_psql(
	$node, $db, <<'EOSQL', merge => 1);
SET max_parallel_maintenance_workers = 0;
SET client_min_messages = debug2;
CREATE INDEX crash_k ON crash (k);
CREATE INDEX crash_t ON crash (t COLLATE "C");
CREATE UNIQUE INDEX crash_kv ON crash (k, v DESC) INCLUDE (t);
EOSQL
is($rc, 0, 'in-memory builds succeed') or diag($out);
is(scalar(() = $out =~ /built by gpusort/g),
	3, 'three indexes built by gpusort in memory');
# the DEBUG2 line splits the page writer's time (bench/run.sh reads it)
like($out,
	qr/gpusort index "crash_t":.*index pages written in [0-9.]+ ms \(WAL and storage\), synced in [0-9.]+ ms/,
	'the text index build reports its page writes and its sync');
# a parallel build, whose workers log and write its pages (96MB: two
# workers need 32MB each for PostgreSQL to plan them)
($rc, $out) = gs_psql(
	$node, $db, <<'EOSQL', merge => 1);
ALTER TABLE crash SET (parallel_workers = 2);
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '96MB';
SET client_min_messages = debug2;
CREATE INDEX crash_p ON crash (t COLLATE "C", k);
EOSQL
is($rc, 0, 'a parallel build succeeds') or diag($out);
like(
	$out,
	qr/gpusort index "crash_p":.*; [0-9]+ pages, [0-9]+ logged by 2 workers/,
	'its workers logged its pages');

my @files = split / /, $node->safe_psql($db,
	"SELECT string_agg(pg_relation_filepath(i), ' ') FROM unnest("
	  . "'{gs_crash_a,gs_crash_id,gs_crash_c,crash_k,crash_t,crash_kv,crash_p}'::regclass[]) AS i"
);
$node->stop('immediate');
for my $f (@files)
{
	ok(-f $node->data_dir . "/$f", "index file $f exists");
	unlink($node->data_dir . "/$f");
}
$node->start;

for my $idx (qw(gs_crash_a gs_crash_id gs_crash_c crash_p))
{
	my $pages = gs_pages_differ_sql($idx, "${idx}_pg");
	my ($rc, $res) = gs_psql(
		$node, $db, <<"EOSQL", merge => 1);
SET gpusort.index_build = off;
SELECT bt_index_parent_check('$idx', true, true);
SELECT regexp_replace(pg_get_indexdef('$idx'::regclass), ' INDEX \\S+ ON ', ' INDEX ${idx}_pg ON ') \\gexec
$pages
DROP INDEX ${idx}_pg;
EOSQL
	is($res, "\n0 pages differ", "$idx after recovery: amcheck, pages");
}

my $res = $node->safe_psql(
	$db, <<'EOSQL');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT md5(string_agg(a::text, ',' ORDER BY a)) FROM (SELECT a FROM gs_crash WHERE a < 300000 ORDER BY a) s;
SELECT md5(string_agg(id::text, ',')) FROM (SELECT id FROM gs_crash ORDER BY id DESC) s;
RESET enable_seqscan;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SET gpusort.enabled = off;
SELECT md5(string_agg(a::text, ',' ORDER BY a)) FROM (SELECT a FROM gs_crash WHERE a < 300000 ORDER BY a) s;
SELECT md5(string_agg(id::text, ',')) FROM (SELECT id FROM gs_crash ORDER BY id DESC) s;
EOSQL
my @l = split /\n/, $res;
is(scalar(@l), 4, 'four digests');
is("$l[0]\n$l[1]", "$l[2]\n$l[3]",
	"queries through the out-of-core indexes equal the sequential scan's");

# the in-memory builds: amcheck, and each query through the indexes
# (sequential scans off) equals the sequential scan's (gpusort off)
$node->safe_psql(
	$db, <<'EOSQL');
CREATE FUNCTION same(q text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE h1 text; h2 text;
BEGIN
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_bitmapscan = off;
	EXECUTE format('SELECT md5(string_agg(x::text, '','')) FROM (%s) x', q) INTO h1;
	SET LOCAL enable_seqscan = on;
	SET LOCAL enable_indexscan = off;
	SET LOCAL enable_indexonlyscan = off;
	SET LOCAL gpusort.enabled = off;
	EXECUTE format('SELECT md5(string_agg(x::text, '','')) FROM (%s) x', q) INTO h2;
	IF h1 IS NULL OR h1 <> h2 THEN
		RAISE EXCEPTION 'results differ for %', q;
	END IF;
END $$;
EOSQL
($rc, $out) = gs_psql(
	$node, $db, <<'EOSQL', merge => 1);
SELECT bt_index_parent_check(c, true, true)
FROM unnest('{crash_k,crash_t,crash_kv}'::regclass[]) AS c;
SELECT same('SELECT k FROM crash ORDER BY k');
SELECT same('SELECT t FROM crash WHERE t > ''8'' ORDER BY t COLLATE "C" DESC');
SELECT same('SELECT k, v, t FROM crash WHERE k < 5000 ORDER BY k, v DESC');
EOSQL
is($rc, 0,
	"in-memory builds after recovery: amcheck, queries equal the sequential scan's"
) or diag($out);
$node->safe_psql($db, 'DROP TABLE gs_crash, crash; DROP FUNCTION same(text)');

# ---- life cycle 1: not preloaded ----
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->restart;
$node->safe_psql('postgres', 'CREATE DATABASE lc; CREATE DATABASE lc2');
(undef, $out) = gs_psql($node, 'lc', 'CREATE EXTENSION gpusort', merge => 1);
is(scalar(() = $out =~ /^WARNING:  gpusort is not in shared_preload_libraries/mg),
	1, 'CREATE EXTENSION without preloading warns');
is( scalar(
		() = $out =~
		  /^HINT:  Add gpusort to shared_preload_libraries and restart the server\./mg
	),
	1,
	'... with the hint to preload it');
$node->safe_psql('lc',
	"CREATE TABLE t AS SELECT g AS id, (g * 7919) % 100003 AS k FROM generate_series(1, 50000) g;\n"
	  . "ANALYZE t");
my $plan_sql =
  "SET gpusort.min_rows = 0;\nEXPLAIN (COSTS OFF) SELECT * FROM t ORDER BY k;";
my $count = \&gs_count_lines;
is($count->(scalar gs_psql($node, 'lc', $plan_sql), qr/GpuSort/),
	0, 'no GpuSort before a load');
is($count->(scalar gs_psql($node, 'lc', "LOAD 'gpusort';\n$plan_sql"), qr/GpuSort/),
	0, "no GpuSort after LOAD 'gpusort' in the session");
is( $count->(
		scalar gs_psql($node, 'lc',
			"SELECT count(*) FROM gpusort_info();\n$plan_sql"),
		qr/GpuSort/),
	0,
	'no GpuSort after a gpusort function loaded the library');
(undef, $out) = gs_psql(
	$node, 'lc', <<'EOSQL', merge => 1);
SET client_min_messages = log;
SET gpusort.log_index_builds = on;
LOAD 'gpusort';
CREATE INDEX ti ON t (k);
DROP INDEX ti;
EOSQL
is($count->($out, qr/built by gpusort/), 0, 'no index built by gpusort either');
(undef, $out) = gs_psql($node, 'lc2', 'CREATE EXTENSION gpusort', merge => 1);
is($count->($out, qr/^WARNING:  gpusort is not in shared_preload_libraries/),
	1, 'CREATE EXTENSION in a second database warns there too');

# ---- life cycle 2: preloaded, the GPU unusable (no service pool) ----
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries',
	"'gpusort'");
$node->append_conf('postgresql.conf', "gpusort.service_memory = 0\n");
$node->restart;
is($count->(scalar gs_psql($node, 'lc', $plan_sql), qr/Custom Scan \(GpuSort\)/),
	1, 'preloaded: GpuSort');
(undef, $out) = gs_psql($node, 'lc',
	"DROP EXTENSION gpusort;\nCREATE EXTENSION gpusort;", merge => 1);
is($count->($out, qr/WARNING/), 0, 'preloaded: CREATE EXTENSION does not warn');

# the default of gpusort.cpu_threads: half the cores the server may run on
# (nproc counts the same ones), at least 4
my $cores = `nproc`;
chomp $cores;
my $want = int($cores / 2) < 4 ? 4 : int($cores / 2);
$want = 64 if $want > 64;
is( $node->safe_psql('lc',
		"SELECT boot_val || ' ' || setting FROM pg_settings WHERE name = 'gpusort.cpu_threads'"),
	"$want $want",
	"gpusort.cpu_threads defaults to half of the $cores cores, at least 4");

# three sorts in one session, each with parallel workers loading the input
(undef, $out) = gs_psql(
	$node, 'lc', <<'EOSQL', merge => 1);
SET gpusort.min_rows = 0;
SET gpusort.engine = gpu;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*) FROM (SELECT * FROM t ORDER BY k) s;
SELECT count(*) FROM (SELECT * FROM t ORDER BY k DESC) s;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM t ORDER BY k, id;
EOSQL
is($count->($out, qr/^WARNING:  gpusort GPU engine is not available/),
	1, 'GPU not available: one WARNING in a session of three sorts');
is($count->($out, qr/GpuSort Fallback: gpusort.service_memory is 0/),
	1, '... and EXPLAIN still says why');
is($count->($out, qr/Workers Launched: [1-9]/),
	1, '... the sorts had parallel workers');

# DROP EXTENSION in another session: an open session stops replacing sorts
my $s2 = $node->background_psql('lc');
$s2->query_safe(
	"SET gpusort.min_rows = 0;\nPREPARE p AS SELECT * FROM t ORDER BY k;\n"
	  . "EXPLAIN (COSTS OFF) EXECUTE p;");
# EXPLAIN of a query and of the prepared statement: GpuSorts in them
my $s2_plans = sub {
	return $count->(
		scalar $s2->query_safe(
			"EXPLAIN (COSTS OFF) SELECT * FROM t ORDER BY k DESC;\n"
			  . "EXPLAIN (COSTS OFF) EXECUTE p;"),
		qr/Custom Scan \(GpuSort\)/);
};
is($s2_plans->(), 2, 'session 2 with the extension: both sorts GpuSorts');
$node->safe_psql('lc', 'DROP EXTENSION gpusort');
is($s2_plans->(), 0,
	'session 2 after session 1 dropped the extension: no GpuSort');
$node->safe_psql('lc', 'CREATE EXTENSION gpusort');
is($s2_plans->(), 2,
	'session 2 after session 1 created it again: GpuSorts');
$s2->quit;

$node->stop;
done_testing();
