# Waits and cancels in gpusort's sorts, on one server:
#   - while a sort waits for its own threads (runs written in the
#     background, the final merge's streams), pg_stat_activity shows the
#     wait: type Extension, named GpuSortThreads on PostgreSQL 17 and later
#     (plain "Extension" before).  One session sorts 1M rows at work_mem
#     1MB, several times over; another samples the first's wait event about
#     every millisecond until it has seen one of gpusort's (bounded: 20 s);
#   - a parallel in-memory sort's shared memory after cancels
#     (src/runs/shm_reap.c: the leader hands the workers' segments to a thread
#     that frees their pages after the detach, at the sort's end and on an
#     abort).  Sorts canceled at several points of the load (at top level
#     and inside a PL/pgSQL exception block, a subtransaction's abort), and
#     sorts that finish, leave the backend holding no descriptor of a
#     shared memory segment, no segment of this server more in /dev/shm
#     than before (another server's parallel queries don't count), and no
#     parallel worker; the backend's next sort gives PostgreSQL's answer.
#     Canceled external sorts leave no descriptor of their run file and no
#     file.
#
# Run by scripts/test.sh; by hand as test/t/001_shards.pl says.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use GpuSortNodes;

my $db = 'gs';
# wal_level = replica, PostgreSQL's default: every build writes WAL (under
# the framework's minimal, a CREATE INDEX writes none)
my $node = gpusort_node('cancels', $db, conf => "wal_level = replica\n");

# ---- a sort's wait event ----
{
	$node->safe_psql(
		$db, <<'EOSQL');
CREATE TABLE gs_we (k int8, pad text) WITH (autovacuum_enabled = off);
INSERT INTO gs_we SELECT (i::int8 * 2654435761) % 1000003, md5(i::text)
	FROM generate_series(1, 1000000) AS i;
VACUUM ANALYZE gs_we;
EOSQL
	my $major = $node->safe_psql($db,
		"SELECT current_setting('server_version_num')::int / 10000");
	my $want = $major >= 17 ? 'GpuSortThreads' : 'Extension';

	# the sorting session: application_name tells the sampler which it is
	my $sorter = gs_psql_start(
		$node, $db, <<'EOSQL', appname => 'gs_we_sort', on_error_stop => 0);
SET work_mem = '1MB';
SET max_parallel_workers_per_gather = 0;
SET gpusort.min_rows = 0;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k, pad OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k DESC, pad OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY pad COLLATE "C" OFFSET 1) s;
SELECT count(*) FROM (SELECT * FROM gs_we ORDER BY k, pad OFFSET 1) s;
EOSQL
	my (undef, $out) = gs_psql(
		$node, $db, <<'EOSQL', merge => 1);
DO $$
DECLARE
	t0 timestamptz := clock_timestamp();
	ev text;
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT wait_event_type || ':' || wait_event INTO ev
		FROM pg_stat_activity
		WHERE application_name = 'gs_we_sort' AND state = 'active'
		  AND wait_event_type = 'Extension'
		LIMIT 1;
		EXIT WHEN ev IS NOT NULL OR clock_timestamp() - t0 > interval '20 s';
		PERFORM pg_sleep(0.001);
	END LOOP;
	RAISE NOTICE 'seen: %', coalesce(ev, 'nothing');
END
$$;
EOSQL
	my ($seen) = $out =~ /^NOTICE:  seen: (.*)$/m;
	$node->safe_psql($db,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'gs_we_sort'"
	);
	gs_psql_finish($sorter);
	is($seen, "Extension:$want",
		'a sort waiting for its threads shows its wait event');
	$node->safe_psql($db, 'DROP TABLE gs_we');
}

# ---- shared memory and run files after canceled loads ----
{
	$node->safe_psql(
		$db, <<'EOSQL');
CREATE TABLE gs_lcs (id int, k int8, pad text)
	WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gs_lcs SELECT i, (i::int8 * 7919) % 1000003, md5(i::text)
	FROM generate_series(1, 600000) AS i;
VACUUM (FREEZE, ANALYZE) gs_lcs;
CREATE FUNCTION gs_lcs_caught(q text) RETURNS text
LANGUAGE plpgsql AS $fn$
BEGIN
	EXECUTE q;
	RETURN 'finished';
EXCEPTION WHEN query_canceled THEN
	RETURN 'canceled';
END
$fn$;
EOSQL
	my $parallel = <<'EOSQL';
SET gpusort.min_rows = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EOSQL
	my $settings = "$parallel\nSET work_mem = '1GB';";
	my $q = 'SELECT * FROM gs_lcs ORDER BY k, id OFFSET 600000';

	# the sort must be a parallel in-memory load, or this tests nothing
	my $plan = gs_psql($node, $db,
		"$settings\nEXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q;");
	is(gs_count_lines($plan, qr/Shared Memory/),
		1, 'the sort loads in parallel, in shared memory');

	my $shm = gs_shm_snapshot($node);

	# a backend's descriptors: (those whose target matches, all)
	my $fds = sub {
		my ($pid, $re) = @_;
		opendir(my $dh, "/proc/$pid/fd") or return (0, 0);
		my @fd = grep { !/^\./ } readdir($dh);
		closedir($dh);
		my $n = grep { (readlink("/proc/$pid/fd/$_") // '') =~ $re } @fd;
		return ($n, scalar @fd);
	};
	# statements in one session, their output and errors gathered
	my $run = sub {
		my ($s, @stmts) = @_;
		my ($out, $err) = ('', '');
		for my $stmt (@stmts)
		{
			my ($o, $e) = gs_bg_query($s, $stmt);
			$out .= "$o\n";
			$err .= $e;
		}
		return ($out, $err);
	};
	my $other_errors = sub {
		my ($err) = @_;
		return scalar grep {
			/ERROR/ && !/canceling statement due to statement timeout/
		} split /\n/, $err;
	};

	# one session: canceled and finished sorts, then its descriptors
	my $s = $node->background_psql($db, on_error_stop => 0);
	gs_bg_query($s, $settings);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my ($shm_before, $all_before) = $fds->($pid, qr{^/dev/shm/});
	my ($out, $err) = $run->(
		$s,
		"SET statement_timeout = 30;\n$q;",
		"SET statement_timeout = 80;\n$q;",
		"SET statement_timeout = 200;\n$q;",
		"SET statement_timeout = 500;\n$q;",
		'RESET statement_timeout;',
		"SELECT gs_lcs_caught('SET LOCAL statement_timeout = 60; $q');",
		"SELECT gs_lcs_caught('SET LOCAL statement_timeout = 250; $q');",
		"SELECT gs_lcs_caught('$q');",
		"$q;",
		'SELECT pg_sleep(0.5);');
	my ($shm_after, $all_after) = $fds->($pid, qr{^/dev/shm/});
	$out .= $s->query_safe(
		"SELECT 'workers ' || count(*) FROM pg_stat_activity WHERE leader_pid = $pid"
	);
	$s->quit;
	ok($all_before > 0 && $all_after > 0,
		'the session ran and its descriptors were read');
	is($shm_after, $shm_before,
		'no descriptor of a shared memory segment is left open');
	is(gs_count_lines($out, qr/^workers 0$/), 1, 'no parallel worker is left');
	is(gs_count_lines($out, qr/^(canceled|finished)$/),
		3, 'the sorts inside exception blocks came back');
	is($other_errors->($err), 0, 'no error other than the cancels')
	  or diag($err);
	usleep(500_000);
	is(gs_shm_segments($shm), 0,
		'no shared memory segment of this server is left in /dev/shm');

	# the backend's next sorts give PostgreSQL's answer
	(my $q0 = $q) =~ s/OFFSET 600000/OFFSET 0/;
	my $digest = "SELECT md5(string_agg(format('%s/%s', id, k), ',' ORDER BY ord))
	FROM (SELECT *, row_number() OVER () AS ord FROM ($q0) s) o";
	my $got = $node->safe_psql(
		$db, <<"EOSQL");
$settings
SET statement_timeout = 100;
DO \$\$ BEGIN PERFORM gs_lcs_caught('SELECT count(*) FROM ($q) s'); END \$\$;
RESET statement_timeout;
$digest;
SET gpusort.enabled = off;
$digest;
EOSQL
	my %lines = map { $_ => 1 } split /\n/, $got;
	is(scalar(keys %lines), 1, "a sort after a cancel gives PostgreSQL's rows");

	# external sorts (a run file, striped over several files): canceled
	# ones, at top level and in exception blocks, must leave no descriptor
	# of the files (closed on a thread, after their unlink: spill.c) and no
	# file
	my $ext = "$parallel\nSET work_mem = '1MB';";
	$plan = gs_psql($node, $db,
		"$ext\nEXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $q;");
	is(gs_count_lines($plan, qr/Disk:/), 1, 'the sort writes runs to a file');
	$s = $node->background_psql($db, on_error_stop => 0);
	gs_bg_query($s, $ext);
	$pid = $s->query_safe('SELECT pg_backend_pid()');
	($out, $err) = $run->(
		$s,
		"SET statement_timeout = 150;\n$q;",
		"SET statement_timeout = 400;\n$q;",
		'RESET statement_timeout;',
		"SELECT gs_lcs_caught('SET LOCAL statement_timeout = 100; $q');",
		"SELECT gs_lcs_caught('SET LOCAL statement_timeout = 300; $q');",
		'SELECT pg_sleep(0.5);');
	my ($tmp_fds, $all) = $fds->($pid, qr/pgsql_tmp/);
	$out .= $s->query_safe(
		"SELECT 'tmp-files ' || count(*) FROM pg_ls_tmpdir() WHERE name LIKE '%gpusort%'"
	);
	$s->quit;
	ok($all > 0, "the external sorts' session ran");
	is($tmp_fds, 0, 'no descriptor of a run file is left open');
	is(gs_count_lines($out, qr/^tmp-files 0$/), 1, 'no run file is left');
	is($other_errors->($err), 0,
		'no error in the external sorts other than the cancels')
	  or diag($err);
	$node->safe_psql($db,
		'DROP TABLE gs_lcs; DROP FUNCTION gs_lcs_caught(text)');
}

$node->stop;
done_testing();
