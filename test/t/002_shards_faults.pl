# Faults while parallel workers read a table's postgres_fdw shards.  The
# coordinator's table "t" is hash-partitioned into foreign tables on shard1
# and shard2; with parallel_setup_cost = 0 an ORDER BY over it is a GpuSort
# over a GpuSortLoad whose Parallel Append gives each shard to one
# participant (the backend or its worker), each through a connection of its
# own, and sorts in runs written to temporary files (work_mem = 64kB).
#
# Each shard's foreign table is a view whose rows pass through a gate: from
# id $gate_from on, every $gate_every-th row takes a shared advisory lock.
# While the test holds that lock exclusively (a psql session on the shard),
# the shard's scan stops there, mid-load, until the lock is released or the
# query is canceled; so "mid-load" is a state the test waits for, not a
# timing.  Checked:
#   - statement_timeout cancels a load stopped at both gates: the timeout's
#     error, and afterwards the coordinator still up, no temporary files, no
#     parallel worker, no shard session still busy (the remote queries were
#     canceled: otherwise they would wait at the gate for good), and the
#     next query right;
#   - a shard stopped (immediate) mid-load, once the worker's shard and once
#     the backend's: postgres_fdw's error, the coordinator not restarted,
#     nothing left behind as above, the other shard's query canceled, and
#     the query right again once the shard is back.
#
# Run by scripts/test.sh; by hand as test/t/001_shards.pl says.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use GpuSortNodes;
use Time::HiRes qw(usleep);

my $nrows = 20000;
my $gate_from = 12000;    # each shard sends about 6000 rows first
my $gate_every = 500;
my $lock_key = 4242;
my $db = 'gs';
my $wait_s = $PostgreSQL::Test::Utils::timeout_default // 180;

my $coord = gpusort_node('coordinator', $db);
my $shard1 = gpusort_node('shard1', $db);
my $shard2 = gpusort_node('shard2', $db);
my %shard_name = ($shard1->name => 'shard1', $shard2->name => 'shard2');

my $columns = 'id int8 NOT NULL, k int8, s text';
for my $shard ([ 1, $shard1 ], [ 2, $shard2 ])
{
	my ($i, $node) = @$shard;
	$node->safe_psql(
		$db, <<"EOSQL");
CREATE TABLE t_s$i ($columns);
CREATE FUNCTION gate(i int8) RETURNS bool LANGUAGE plpgsql AS \$\$
BEGIN
	IF i >= $gate_from AND i % $gate_every = 0 THEN
		PERFORM pg_advisory_lock_shared($lock_key);
		PERFORM pg_advisory_unlock_shared($lock_key);
	END IF;
	RETURN true;
END
\$\$;
CREATE VIEW v_s$i AS SELECT * FROM t_s$i WHERE gate(id);
EOSQL
}

my $setup = "CREATE EXTENSION postgres_fdw;\n";
for my $shard ([ 1, $shard1 ], [ 2, $shard2 ])
{
	my ($i, $node) = @$shard;
	my $port = $node->port;
	$setup .=
	    "CREATE SERVER shard$i FOREIGN DATA WRAPPER postgres_fdw"
	  . " OPTIONS (host '127.0.0.1', port '$port', dbname '$db',"
	  . " batch_size '1000');\n"
	  . "CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;\n";
}
$setup .= <<"EOSQL";
CREATE TABLE t ($columns) PARTITION BY HASH (id);
CREATE FOREIGN TABLE t_s1 PARTITION OF t
	FOR VALUES WITH (MODULUS 2, REMAINDER 0)
	SERVER shard1 OPTIONS (table_name 'v_s1');
CREATE FOREIGN TABLE t_s2 PARTITION OF t
	FOR VALUES WITH (MODULUS 2, REMAINDER 1)
	SERVER shard2 OPTIONS (table_name 'v_s2');
CREATE TABLE ref ($columns);
INSERT INTO ref SELECT i, (i * 7919) % 5000, 'r' || (i % 100)
	FROM generate_series(1, $nrows) i;
INSERT INTO t SELECT * FROM ref;
ANALYZE ref;
ANALYZE t;
ALTER DATABASE $db SET parallel_setup_cost = 0;
EOSQL
$coord->safe_psql($db, $setup);
$shard1->safe_psql($db, 'ANALYZE t_s1');
$shard2->safe_psql($db, 'ANALYZE t_s2');

my $query = 'SELECT id, k, s FROM t ORDER BY k, id';
my $want = $coord->safe_psql($db,
	'SET gpusort.enabled = off; SELECT id, k, s FROM ref ORDER BY k, id');
is($coord->safe_psql($db, $query), $want, 'no fault: t equals ref');

my $plan = $coord->safe_psql($db,
	"SET work_mem = '64kB'; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $query");
my $parallel_read = like(
	$plan,
	qr/^\s*->\s+Parallel Custom Scan \(GpuSortLoad\)[^\n]*\n(?:.*\n)*?\s*->\s+Parallel Append[^\n]*\n(\s*->\s+Foreign Scan on t_s\d t_\d[^\n]*(?:\n|\z)){2}/m,
	'the shards are read by a GpuSortLoad\'s Parallel Append')
  or diag($plan);
like($plan, qr/Workers Launched: 1/, 'one worker (two shards)');
# without the parallel read the rest only waits for gates never reached
if (!$parallel_read)
{
	$_->stop for ($coord, $shard1, $shard2);
	done_testing();
	exit 1;
}

# ---- helpers ----

# a psql session on node that holds the gate's lock exclusively until
# gate_open
sub gate_close
{
	my ($node) = @_;
	my %g = (in => "SELECT pg_advisory_lock($lock_key), 'locked';\n",
		out => '', err => '');
	my $timer = IPC::Run::timeout($wait_s);
	$g{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($db),
			'-f', '-' ],
		'<', \$g{in}, '>', \$g{out}, '2>', \$g{err}, $timer);
	$g{h}->pump until $g{out} =~ /locked/;
	return \%g;
}

# release the lock (a session whose server died just ends)
sub gate_open
{
	my ($g) = @_;
	$g->{in} .= "SELECT pg_advisory_unlock($lock_key);\n\\q\n";
	eval { $g->{h}->finish; };
	return;
}

# poll a one-value query until it returns $want; false after $wait_s
sub wait_for
{
	my ($node, $sql, $want, $what) = @_;
	my $deadline = time + $wait_s;
	my $got;
	while (1)
	{
		$got = $node->safe_psql($db, $sql);
		return 1 if $got eq $want;
		last if time > $deadline;
		usleep(100_000);
	}
	diag("$what: $got, want $want");
	return 0;
}

# sessions of the shard stopped at the gate, waiting for the lock
my $at_gate =
    "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'"
  . " AND wait_event_type = 'Lock' AND wait_event = 'advisory'";

# other sessions of the shard's database that are not idle: a remote query
# still running, or a remote transaction left open
my $busy =
    "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'"
  . " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
  . " AND state <> 'idle'";

# start $query on the coordinator in the background with these settings,
# each sent as a statement of its own (one string would be a transaction
# block: no workers)
sub start_query
{
	my (@settings) = @_;
	my %q = (in => join('', map { "SET $_;\n" } @settings) . "$query;\n",
		out => '', err => '');
	my $timer = IPC::Run::timeout($wait_s);
	$q{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $coord->connstr($db),
			'-f', '-' ],
		'<', \$q{in}, '>', \$q{out}, '2>', \$q{err}, $timer);
	return \%q;
}

# wait until each shard's scan stops at its gate (true), or the query ends
# first (false)
sub wait_at_gates
{
	my ($q) = @_;
	my $deadline = time + $wait_s;
	while (time <= $deadline)
	{
		return 1
		  if $shard1->safe_psql($db, $at_gate) >= 1
		  && $shard2->safe_psql($db, $at_gate) >= 1;
		$q->{h}->pump_nb;
		return 0 unless $q->{h}->pumpable;
		usleep(100_000);
	}
	return 0;
}

# the query's psql: its exit status and stderr
sub finish_query
{
	my ($q) = @_;
	eval { $q->{h}->finish; };
	return ($q->{h}->result(0) // -1, $q->{err});
}

# nothing left behind on the coordinator (temporary files, workers) nor
# busy on the shards that are up
sub nothing_left
{
	my ($what, @shards) = @_;
	ok( wait_for(
			$coord,
			"SELECT count(*) FROM pg_stat_activity"
			  . " WHERE backend_type = 'parallel worker'",
			0, "$what: parallel workers"),
		"$what: no parallel worker left");
	ok(wait_for($coord, 'SELECT count(*) FROM pg_ls_tmpdir()', 0,
			"$what: temporary files"),
		"$what: no temporary file left");
	for my $shard (@shards)
	{
		my $name = $shard_name{ $shard->name };
		ok(wait_for($shard, $busy, 0, "$what: $name busy sessions"),
			"$what: no session left busy on $name");
	}
	return;
}

my $started = $coord->safe_psql($db, 'SELECT pg_postmaster_start_time()');

# ---- statement_timeout mid-load ----
# The timeout has to fire after both scans reached their gates: on a
# machine too slow for that, try again with a longer one.
my ($rc, $stderr, $reached);
for my $timeout_s (4, 15, 60)
{
	my @gates = map { gate_close($_) } ($shard1, $shard2);
	my $q = start_query("work_mem = '64kB'",
		"statement_timeout = '${timeout_s}s'");
	$reached = wait_at_gates($q);
	my $tmp_files =
	  $reached ? $coord->safe_psql($db, 'SELECT count(*) FROM pg_ls_tmpdir()') : 0;
	($rc, $stderr) = finish_query($q);
	if ($reached)
	{
		# the gates still closed: a remote query not canceled would wait
		cmp_ok($tmp_files, '>', 0,
			'timeout: runs in temporary files while the load waits');
		isnt($rc, 0, 'timeout: the query fails');
		like($stderr, qr/canceling statement due to statement timeout/,
			"timeout: statement_timeout's error")
		  or diag($stderr);
		nothing_left('timeout', $shard1, $shard2);
	}
	gate_open($_) for @gates;
	last if $reached;
	diag("the load did not reach the gates within ${timeout_s}s: $stderr");
	wait_for($_, $busy, 0, 'after a try') for ($shard1, $shard2);
}
ok($reached, 'timeout: the scans were canceled at their gates');
is($coord->safe_psql($db, 'SELECT pg_postmaster_start_time()'),
	$started, 'timeout: the coordinator did not restart');
is($coord->safe_psql($db, $query), $want, 'after the timeout: t equals ref');

# ---- a shard stopped mid-load ----
# Parallel Append gives the backend the last shard (shard2) and the worker
# the first: stopping each in turn fails once the worker's read, once the
# backend's.
for my $down ($shard1, $shard2)
{
	my $name = $shard_name{ $down->name };
	my ($up) = grep { $_ != $down } ($shard1, $shard2);
	my @gates = map { gate_close($_) } ($shard1, $shard2);
	my $q = start_query("work_mem = '64kB'");
	ok(wait_at_gates($q), "$name stopped: the load reached the gates")
	  or diag($q->{err});
	$down->stop('immediate');
	($rc, $stderr) = finish_query($q);
	isnt($rc, 0, "$name stopped: the query fails");
	like(
		$stderr,
		qr/server closed the connection|could not receive data|connection.*(lost|terminat)/i,
		"$name stopped: postgres_fdw's error") or diag($stderr);
	is($coord->safe_psql($db, 'SELECT pg_postmaster_start_time()'),
		$started, "$name stopped: the coordinator did not restart");
	nothing_left("$name stopped", $up);
	gate_open($_) for @gates;
	$down->start;
	is($coord->safe_psql($db, $query), $want, "$name back: t equals ref");
}

$coord->stop;
$shard1->stop;
$shard2->stop;
done_testing();
