# Errors and cancels in parallel gpusort work, repeated under CPU load
# (issue 30: a worker's error unwound its stack while helper threads
# still read state that lived there; under load the worker sometimes
# died of a segfault and the postmaster restarted every session; one try
# crashed about once in ten, so each case runs many times, in fresh
# sessions, while busy loops keep the CPUs loaded): a parallel btree
# build, a parallel CLUSTER and a sort whose input parallel workers
# load, each in memory and in runs on disk, with and without the leader
# scanning; and the build's workers launched again after its scan to log
# and write its pages, one of them failing (gpusort.index_fault).  An index expression (or a filter) raises an error for rows
# from a given one on, in a worker or in the leader only, and
# statement_timeout cancels the statement at several points (and while
# a worker sleeps in the scan).  Checked: each statement fails with its
# own error (or the timeout), a worker's error comes through the
# leader, no session loses its connection; afterwards the server never
# restarted (an unlogged table keeps its row, a session opened at the
# start is still there, the postmaster's start time, and no "terminated
# by signal" line in its log since the start), no temporary file, no
# parallel worker and no shared memory segment of this server left, the
# failed index does not exist, the failed CLUSTERs left the heap as it
# was (or, where a CLUSTER beat its timeout, as CLUSTER writes it); and
# the same build, CLUSTER and sort then give PostgreSQL's answer.  A
# crash ends the cases early: the test fails, it does not hang.
#
# Run by scripts/test.sh; by hand as test/t/001_shards.pl says.
# GS_PE_REPS (default 5) and GS_PE_CANCEL_REPS (default 2): statements per
# error case and rounds of the four timeouts per cancel case.

use strict;
use warnings;

use IPC::Run;
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
# and restart_after_crash = on, also PostgreSQL's default (the framework
# turns it off): a crash of a parallel worker shows as crash recovery
# (sessions lost, the unlogged table emptied), and the checks that follow
# run on the recovered server instead of waiting for one that stays down
my $node = gpusort_node('errors', $db,
	conf => "wal_level = replica\nrestart_after_crash = on\n");
$node->safe_psql($db, 'CREATE EXTENSION pageinspect');

{
	my $reps = $ENV{GS_PE_REPS} // 5;
	my $cancel_reps = $ENV{GS_PE_CANCEL_REPS} // 2;
	my $rows = 120000;

	(my $setup = <<'EOSQL') =~ s/\$ROWS/$rows/g;
-- emptied by crash recovery
CREATE UNLOGGED TABLE gs_pe_alive (x int);
INSERT INTO gs_pe_alive VALUES (1);
CHECKPOINT;
-- the key: raises an error (or sleeps) when gs_pe.who asks for it, in the
-- participant it names (the leader: gs_pe.leader is its pid; a worker:
-- any other), for the rows from gs_pe.row on
CREATE FUNCTION gs_pe_key(i int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	who text := current_setting('gs_pe.who', true);
BEGIN
	IF coalesce(who, '') = '' OR i < current_setting('gs_pe.row')::int THEN
		RETURN i;
	END IF;
	IF who = 'leader' AND pg_backend_pid() = current_setting('gs_pe.leader')::int OR
	   who = 'worker' AND pg_backend_pid() <> current_setting('gs_pe.leader')::int THEN
		IF current_setting('gs_pe.what', true) = 'sleep' THEN
			PERFORM pg_sleep(5);
		ELSE
			RAISE EXCEPTION 'gs_pe_key failed on row %', i;
		END IF;
	END IF;
	RETURN i;
END $$;
-- HOT chains and dead tuples, as in sql/index_parallel.sql
CREATE TABLE gs_pe (id int4, a int4, b int8, c text)
	WITH (autovacuum_enabled = off, parallel_workers = 2);
INSERT INTO gs_pe
SELECT i, (i * 7919) % 5003,
	   CASE WHEN i % 89 = 0 THEN NULL ELSE (i::int8 * 2654435761) % 1000003 - 500000 END,
	   'k' || lpad(((i * 31) % 10007)::text, 6, '0') || repeat('y', i % 5)
FROM generate_series(1, $ROWS) AS i;
UPDATE gs_pe SET c = c || 'u' WHERE id % 100 = 0;
DELETE FROM gs_pe WHERE id % 1000 = 999;
CREATE TABLE gs_pe_c WITH (autovacuum_enabled = off, parallel_workers = 2)
	AS SELECT * FROM gs_pe;
UPDATE gs_pe_c SET c = c || 'u' WHERE id % 7 = 0;
DELETE FROM gs_pe_c WHERE id % 13 = 0;
-- a unique key in another order than the heap's (120011 is prime)
CREATE UNIQUE INDEX gs_pe_ck ON gs_pe_c ((gs_pe_key(id) * 7919 % 120011));
VACUUM ANALYZE gs_pe;
VACUUM ANALYZE gs_pe_c;
EOSQL
	$node->safe_psql($db, $setup);

	# the server as it is at the start: its start time, its segments,
	# its log's size, and a session that stays open to the end
	my $start_time =
	  $node->safe_psql($db, 'SELECT pg_postmaster_start_time()');
	my $shm = gs_shm_snapshot($node);
	my $log_size = -s $node->logfile;
	my $hold = $node->background_psql($db, timeout => 60);
	$hold->set_query_timer_restart(1);
	my $held = $hold->query_safe(
		"SELECT pid || ' ' || backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
	);
	my ($hold_pid, $hold_start) = $held =~ /^(\d+) (.+)$/
	  or die "no session held: $held";

	# the statements
	my $parallel = <<'EOSQL';
SET max_parallel_maintenance_workers = 2;
SET max_parallel_workers_per_gather = 2;
SET min_parallel_table_scan_size = 0;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET gpusort.min_rows = 0;
SET gpusort.index_build = on;
SET random_page_cost = 1000000;
SET effective_cache_size = '8kB';
EOSQL
	my %mem = (
		MEM => "SET maintenance_work_mem = '64MB';\nSET work_mem = '1GB';",
		RUNS => "SET maintenance_work_mem = '1MB';\nSET work_mem = '1MB';");
	my $index = 'CREATE INDEX gs_pe_err ON gs_pe (gs_pe_key(id));';
	my $cluster = 'CLUSTER gs_pe_c USING gs_pe_ck;';
	my $sort_q =
	  'SELECT id, b FROM gs_pe WHERE gs_pe_key(id) IS NOT NULL ORDER BY b, id';
	my $sort = "$sort_q OFFSET $rows;";

	# the sorts must load in parallel, in shared memory and in runs
	for my $m ('MEM', 'RUNS')
	{
		my $plan = gs_psql($node, $db,
			"$parallel\n$mem{$m}\nEXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $sort"
		);
		my $want = $m eq 'MEM' ? qr/Shared Memory/ : qr/Disk:/;
		is( gs_count_lines($plan, qr/Workers Launched: 2/) . ' '
			  . gs_count_lines($plan, $want),
			'1 1',
			"the sort's load is parallel, in $m");
	}

	# the heap as it is (its rows where they are), the rows it holds, and
	# whether they lie in the order of gs_pe_ck, as a CLUSTER leaves them
	my $heap =
	  "SELECT md5(string_agg(ctid::text || ':' || id, ',' ORDER BY ctid)) FROM gs_pe_c";
	my $heap_rows =
	  "SELECT md5(string_agg(id::text, ',' ORDER BY id)) FROM gs_pe_c";
	my $heap_clustered =
	  "SELECT (SELECT md5(string_agg(id::text, ',' ORDER BY ctid)) FROM gs_pe_c) =\n"
	  . "\t(SELECT md5(string_agg(id::text, ',' ORDER BY gs_pe_key(id) * 7919 % 120011)) FROM gs_pe_c)";
	my $heap_before = $node->safe_psql($db, $heap);
	my $rows_before = $node->safe_psql($db, $heap_rows);

	my $lost = 0;
	my $lost_pattern =
	  qr/connection to server was lost|server closed the connection|terminated abnormally|crash of another server process|recovery mode|not yet accepting|psql exited/;

	# $n statements, up to $per_session a session; every session's output
	my $sessions = sub {
		my ($setup, $stmt, $n, $per_session) = @_;
		my $all = '';
		while ($n > 0)
		{
			my $k = $n < $per_session ? $n : $per_session;
			$n -= $k;
			my $sql =
			    "SELECT set_config('gs_pe.leader', pg_backend_pid()::text, false) IS NULL;\n"
			  . "$parallel\n$setup\n"
			  . "$stmt\n" x $k;
			my ($rc, $out) = gs_psql($node, $db, $sql,
				merge => 1,
				on_error_stop => 0);
			$all .= "$out\n";
			if ($rc != 0)
			{
				$all .= "psql exited $rc\n";
				last;
			}
		}
		return $all;
	};
	my $check_lost = sub {
		my ($name, $out) = @_;
		return 0 unless $out =~ $lost_pattern;
		$lost = 1;
		my %l = map { $_ => 1 } grep { /$lost_pattern/ } split /\n/, $out;
		is(join(' ', sort keys %l), '', "$name: no session lost its connection");
		return 1;
	};

	# each statement fails with gs_pe_key's error, through a parallel
	# worker when $who is one.  With $some, a statement may also succeed:
	# a worker with the leader scanning too may find the scan over when it
	# starts (late, under load); every error must still be the worker's.
	my $error_case = sub {
		my ($name, $stmt, $setup, $n, $who, $some, $err) = @_;
		$err //= qr/gs_pe_key failed on row [0-9]*/;
		return if $lost;
		my $out = $sessions->(
			"$setup\nSET gs_pe.who = '$who';\nSET gs_pe.what = 'error';",
			$stmt, $n, 5);
		return if $check_lost->($name, $out);
		# a worker's error comes with "parallel worker" in its context (its
		# last line, or its only one)
		my $ctx = gs_count_lines($out, qr/^(?:CONTEXT:  )?parallel worker$/);
		my $errs = gs_count_lines($out, qr/^ERROR:  $err$/);
		my $all = gs_count_lines($out, qr/^ERROR/);
		$ctx = $errs - $ctx if $who eq 'leader';
		if ($some)
		{
			is( "$ctx from the $who, $all in all",
				"$errs from the $who, $errs in all",
				"$name, $n times: the error ($errs times), from the $who");
		}
		else
		{
			is( "$errs errors, $ctx from the $who, $all in all",
				"$n errors, $n from the $who, $n in all",
				"$name, $n times: the error, from the $who");
		}
	};

	# statement_timeout at several points, $cancel_reps rounds (two a
	# session); the statement is canceled, or it ends (an index made is
	# dropped)
	my $cancel_case = sub {
		my ($name, $stmt, $setup, $who) = @_;
		return if $lost;
		my $block = '';
		for my $ms (20, 60, 150, 400)
		{
			$block .= "SET statement_timeout = $ms;\n$stmt\n"
			  . "RESET statement_timeout;\nDROP INDEX IF EXISTS gs_pe_err;\n";
		}
		my $out = $sessions->(
			"$setup\nSET client_min_messages = warning;\n"
			  . "SET gs_pe.who = '"
			  . ($who // '') . "';\n"
			  . "SET gs_pe.what = 'sleep';\nSET gs_pe.row = 30000;",
			$block, $cancel_reps, 2);
		return if $check_lost->($name, $out);
		my $canceled = gs_count_lines($out,
			qr/^ERROR:  canceling statement due to statement timeout$/);
		my @other = grep {
			/^ERROR/ && !/canceling statement due to statement timeout/
		} split /\n/, $out;
		is(join("\n", @other), '',
			"$name, canceled $canceled times of "
			  . (4 * $cancel_reps)
			  . ': no other error');
	};

	# the busy loops: both CPUs (or more) taken while the cases run
	my $ncpu = `nproc` + 0;
	my @busy = map { IPC::Run::start([ 'sh', '-c', 'while :; do :; done' ]) }
	  1 .. ($ncpu < 2 ? 2 : $ncpu);
	my $t0 = time;

	for my $m ('MEM', 'RUNS')
	{
		for my $lp ('off', 'on')
		{
			my $setup = "$mem{$m}\nSET parallel_leader_participation = $lp;";
			my $tag = "($m, leader participation $lp)";
			# with the leader scanning too, a participant must read a row
			# from gs_pe.row on: the row is an early one
			my ($row, $irow) = $lp eq 'on' ? (10000, 10000) : (60000, 100000);
			# the crash of issue 30: a worker's error in an in-memory build
			my $n = ($m eq 'MEM' && $lp eq 'off') ? 5 * $reps : $reps;
			my $some = $lp eq 'on';
			$error_case->(
				"CREATE INDEX $tag, an error in a worker", $index,
				"$setup\nSET gs_pe.row = $irow;", $n, 'worker', $some);
			$error_case->(
				"CLUSTER $tag, an error in a worker", $cluster,
				"$setup\nSET gs_pe.row = $row;", $reps, 'worker', $some);
			$error_case->(
				"sort $tag, an error in a worker", $sort,
				"$setup\nSET gs_pe.row = $row;", $reps, 'worker', $some);
			if ($lp eq 'on')
			{
				$error_case->(
					"CREATE INDEX $tag, an error in the leader", $index,
					"$setup\nSET gs_pe.row = $row;", $reps, 'leader');
				$error_case->(
					"CLUSTER $tag, an error in the leader", $cluster,
					"$setup\nSET gs_pe.row = $row;", $reps, 'leader');
				$error_case->(
					"sort $tag, an error in the leader", $sort,
					"$setup\nSET gs_pe.row = $row;", $reps, 'leader');
			}
		}
		my $setup = $mem{$m};
		# the workers, launched again after the scan to log and write the
		# pages: one of them fails (and the leader waits for them)
		$error_case->(
			"CREATE INDEX ($m), an error in a worker writing pages", $index,
			"$setup\nSET gs_pe.row = 1000000000;\n"
			  . "SET gpusort.index_fault = 'error_in_writer';",
			$reps, 'worker', 0, qr/gpusort: index page writer failed/);
		$cancel_case->("CREATE INDEX ($m): statement_timeout", $index, $setup);
		$cancel_case->("CLUSTER ($m): statement_timeout", $cluster, $setup);
		$cancel_case->("sort ($m): statement_timeout", $sort, $setup);
		$cancel_case->(
			"CREATE INDEX ($m): statement_timeout, a worker asleep",
			$index, $setup, 'worker');
	}
	note('cases: ' . (time - $t0) . ' s under load');
	$_->kill_kill for @busy;

	# ---- afterwards ----
	# a crash: wait for the end of recovery (bounded), then check
	$node->poll_query_until($db, 'SELECT true');
	my $still = eval { $hold->query("SELECT 'still here'") } // '';
	is($still, 'still here',
		'the session opened at the start is still connected');
	is( $node->safe_psql(
			$db,
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $hold_pid AND backend_start = '$hold_start'"
		),
		1,
		'the same session, seen by another');
	is($node->safe_psql($db, 'SELECT count(*) FROM gs_pe_alive'),
		1, 'the unlogged table kept its row (no crash recovery)');
	is($node->safe_psql($db, 'SELECT pg_postmaster_start_time()'),
		$start_time, 'the postmaster did not restart');
	my $log = slurp_file($node->logfile);
	my @killed =
	  grep { /terminated by signal|terminated by exception|was terminated/ }
	  split /\n/, substr($log, $log_size);
	is(join("\n", @killed[ 0 .. ($#killed < 2 ? $#killed : 2) ]),
		'', "the server's log has no process terminated by a signal");
	is( scalar gs_psql(
			$node, $db, <<'EOSQL'),
DO $$ BEGIN FOR i IN 1 .. 100 LOOP
	PERFORM pg_stat_clear_snapshot();
	EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'parallel worker');
	PERFORM pg_sleep(0.05); END LOOP; END $$;
SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker';
EOSQL
		0,
		'no parallel worker left');
	is($node->safe_psql($db, 'SELECT count(*) FROM pg_ls_tmpdir()'),
		0, 'no temporary file left');
	usleep(300_000);
	is(gs_shm_segments($shm), 0,
		'no shared memory segment of this server left');

	# the failed statements changed nothing, and the same ones give
	# PostgreSQL's answer now
	my $pages = gs_pages_differ_sql('gs_pe_err', 'gs_pe_pg');
	my (undef, $res) = gs_psql(
		$node, $db, <<"EOSQL", merge => 1);
$parallel
$mem{MEM}
SELECT to_regclass('gs_pe_err') IS NULL AS no_index;
SELECT (($heap) = '$heap_before' OR ($heap_clustered)) AND
	($heap_rows) = '$rows_before' AS heap_unchanged_or_clustered;
SET parallel_leader_participation = off;
SET gpusort.log_index_builds = on;
SET client_min_messages = log;
$index
RESET client_min_messages;
SET gpusort.index_build = off;
CREATE INDEX gs_pe_pg ON gs_pe (gs_pe_key(id));
$pages
DROP INDEX gs_pe_err, gs_pe_pg;
SET gpusort.index_build = on;
SET maintenance_work_mem = '1MB';
SET client_min_messages = log;
$cluster
RESET client_min_messages;
SET gpusort.enabled = off;
SELECT ($heap_clustered) AND ($heap_rows) = '$rows_before' AS clustered;
SET gpusort.enabled = on;
SET parallel_leader_participation = on;
SELECT md5(string_agg(id || '/' || b, ',')) FROM ($sort_q) s \\gset gs_
SET gpusort.enabled = off;
SELECT md5(string_agg(id || '/' || b, ',')) = :'gs_md5' AS same_sort FROM ($sort_q) s;
EOSQL
	my @lines;
	for (split /\n/, $res)
	{
		s/^(LOG:  (index|table) "[a-z_]*" (built|sorted) by gpusort)( \([^)]*\))?( with [0-9]+ parallel workers?)?.*$/$1 . ($5 \/\/ '')/e;
		push @lines, $_ unless /^LOG:  index "gs_pe_ck"/;
	}
	is( join("\n", @lines),
		join("\n",
			't', 't',
			'LOG:  index "gs_pe_err" built by gpusort with 2 parallel workers',
			'0 pages differ',
			'LOG:  table "gs_pe_c" sorted by gpusort with 2 parallel workers',
			't', 't'),
		"afterwards: no index left, heap unchanged; index, CLUSTER, sort as PostgreSQL's"
	);

	eval { $hold->quit };
	$node->safe_psql($db,
		'DROP TABLE gs_pe, gs_pe_c, gs_pe_alive; DROP FUNCTION gs_pe_key(int)');
}

$node->stop;
done_testing();
