# A table sharded over two servers with postgres_fdw, every server with
# gpusort preloaded.  The coordinator holds a hash-partitioned table "t"
# whose partitions are foreign tables on shard1 and shard2, and a local
# table "ref" with the same rows.  Checked:
#   - answers over t with gpusort equal PostgreSQL's own over ref (ORDER BY,
#     a window, a merge join, DISTINCT, LIMIT);
#   - plans: an ORDER BY of every row is one GpuSort over an Append of the
#     shards' scans, which sort nothing remotely; with LIMIT the shards sort
#     (through their own gpusort) and the coordinator merges; with gpusort
#     off the plan is PostgreSQL's;
#   - async_capable servers: Async Foreign Scans under the GpuSort;
#   - parallel reads (parallel_setup_cost = 0): a GpuSortLoad over a
#     Parallel Append of the (synchronous) foreign scans, a worker launched;
#     inside a transaction block (BEGIN, or two statements in one string)
#     the backend reads them ("Load: serial (...)"); a self-join (each server
#     scanned twice) is not read by workers; GROUP BY and a window function
#     are; every answer as above;
#   - a shard that is down: postgres_fdw's error, nothing else harmed, and
#     the same answers once it is back.
# Faults during a parallel read (a timeout, a shard stopped mid-load) are
# 002_shards_faults.pl's.
#
# Run by scripts/test.sh; by hand (not as root: initdb refuses it), with
# the PostgreSQL to test first in PATH and gpusort installed there:
#   lib=$(pg_config --pkglibdir)/pgxs/src/test d=$(mktemp -d)
#   PERL5LIB=$lib/perl PG_REGRESS=$lib/regress/pg_regress TESTDIR=$d \
#   TESTDATADIR=$d/tmp_check TESTLOGDIR=$d/tmp_check/log \
#   prove -v test/t/001_shards.pl
# (the servers and their logs go to $d/tmp_check)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use GpuSortNodes;

my $nrows = 40000;
my $db = 'gs';

my $coord = gpusort_node('coordinator', $db);
my $shard1 = gpusort_node('shard1', $db);
my $shard2 = gpusort_node('shard2', $db);

my $columns = 'id int8 NOT NULL, k int8, g int4, f float8, s text';

# the shards' tables first (no index: the shards' ORDER BY is a sort)
$shard1->safe_psql($db, "CREATE TABLE t_s1 ($columns)");
$shard2->safe_psql($db, "CREATE TABLE t_s2 ($columns)");

# the coordinator: one foreign server per shard, t over them, and ref
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
	SERVER shard1 OPTIONS (table_name 't_s1');
CREATE FOREIGN TABLE t_s2 PARTITION OF t
	FOR VALUES WITH (MODULUS 2, REMAINDER 1)
	SERVER shard2 OPTIONS (table_name 't_s2');
CREATE TABLE ref ($columns);
EOSQL
$coord->safe_psql($db, $setup);

# The rows: NULLs, the int8 extremes, duplicates and an all-equal group,
# float8 NaN, -0 and the infinities, empty and long text (long ones equal
# for 400 bytes), words whose order differs between C and en_US.
$coord->safe_psql(
	$db, <<"EOSQL");
INSERT INTO ref
SELECT i,
	CASE WHEN i % 97 = 0 THEN NULL
		 WHEN i % 101 = 0 THEN 9223372036854775807
		 WHEN i % 103 = 0 THEN -9223372036854775808
		 ELSE (i * 7919) % 5000 - 2500 END,
	CASE WHEN i <= $nrows / 4 THEN 42 ELSE i % 13 END,
	CASE i % 11 WHEN 0 THEN 'NaN'::float8 WHEN 1 THEN '-0'
		 WHEN 2 THEN 'Infinity' WHEN 3 THEN '-Infinity' WHEN 4 THEN NULL
		 WHEN 5 THEN 0 ELSE ((i * 31) % 1000) / 7.0 - 70 END,
	CASE WHEN i % 89 = 0 THEN NULL
		 WHEN i % 83 = 0 THEN ''
		 WHEN i % 79 = 0 THEN repeat('long', 100) || (i % 37)
		 ELSE (ARRAY['apple', 'Apple', 'Äpfel', 'banana', 'Banana', 'zebra',
					 'Zebra', 'éclair', 'eclair', '_under', 'a b', 'ab'])[i % 12 + 1]
			  || (i % 50) END
FROM generate_series(1, $nrows) i;
-- through the coordinator: each row goes to its shard
INSERT INTO t SELECT * FROM ref;
ANALYZE ref;
EOSQL
$shard1->safe_psql($db, 'ANALYZE t_s1');
$shard2->safe_psql($db, 'ANALYZE t_s2');
$coord->safe_psql($db, 'ANALYZE t');

is($coord->safe_psql($db, 'SELECT count(*) FROM t'), $nrows, 'rows in t');
ok( $shard1->safe_psql($db, 'SELECT count(*) FROM t_s1') > $nrows / 4
	  && $shard2->safe_psql($db, 'SELECT count(*) FROM t_s2') > $nrows / 4,
	'both shards hold rows');

# Queries over "%s": t on the coordinator with gpusort, against ref with
# PostgreSQL's own sort.  The unique id is the last key: one right answer.
my @queries = (
	[ 'ORDER BY int8', 'SELECT id, k FROM %s ORDER BY k, id' ],
	[
		'ORDER BY DESC NULLS FIRST',
		'SELECT id, k FROM %s ORDER BY k DESC NULLS FIRST, id'
	],
	[
		'ORDER BY three columns',
		'SELECT id, g, k, f FROM %s ORDER BY g, k DESC, f, id'
	],
	[ 'ORDER BY text COLLATE "C"', 'SELECT id, s FROM %s ORDER BY s COLLATE "C", id' ],
	[ 'ORDER BY text (en_US)', 'SELECT id, s FROM %s ORDER BY s DESC, id' ],
	[ 'ORDER BY float8', 'SELECT id, f FROM %s ORDER BY f, id' ],
	[
		'row_number() window',
		'SELECT id, k, row_number() OVER (ORDER BY k, id) FROM %s ORDER BY k, id'
	],
	[
		'window with PARTITION BY',
		'SELECT id, g, row_number() OVER (PARTITION BY g ORDER BY f, id)'
		  . ' FROM %s ORDER BY g, f, id'
	],
	[
		'merge join with ref',
		'SET enable_hashjoin = off; SET enable_nestloop = off;'
		  . ' SELECT a.id, a.k, b.s FROM %s a JOIN ref b ON a.id = b.id'
		  . ' ORDER BY a.id'
	],
	[
		'DISTINCT',
		'SET enable_hashagg = off; SELECT DISTINCT k, g FROM %s ORDER BY k, g'
	],
	[ 'ORDER BY LIMIT 10', 'SELECT id, k FROM %s ORDER BY k DESC, id LIMIT 10' ],
);

# whole outputs equal; on a difference, the first line that differs
sub same_output
{
	my ($got, $want, $name) = @_;
	return pass($name) if $got eq $want;
	my @g = split /\n/, $got;
	my @w = split /\n/, $want;
	my $i = 0;
	$i++ while $i < @g && $i < @w && $g[$i] eq $w[$i];
	fail($name);
	diag(sprintf("%d lines, want %d; line %d: got '%s', want '%s'",
			scalar @g, scalar @w, $i + 1, $g[$i] // '(none)', $w[$i] // '(none)'));
	return 0;
}

my %want;
for my $q (@queries)
{
	my ($name, $sql) = @$q;
	$want{$name} = $coord->safe_psql($db,
		'SET gpusort.enabled = off; ' . sprintf($sql, 'ref'));
}

sub check_answers
{
	my ($when) = @_;
	for my $q (@queries)
	{
		my ($name, $sql) = @$q;
		same_output($coord->safe_psql($db, sprintf($sql, 't')),
			$want{$name}, "$name$when: t with gpusort equals ref without");
	}
}

check_answers('');

# ---- plans ----
my $order_by = 'SELECT id, k FROM t ORDER BY k, id';
my $explain = 'EXPLAIN (VERBOSE, COSTS OFF) ';

# the Remote SQL lines of a plan
sub remote_sql
{
	my ($plan) = @_;
	return grep { /Remote SQL:/ } split /\n/, $plan;
}

my $plan = $coord->safe_psql($db, $explain . $order_by);
like($plan, qr/^\s*Custom Scan \(GpuSort\)/m, 'ORDER BY: a GpuSort')
  or diag($plan);
like($plan, qr/^\s*->\s+Append/m, 'ORDER BY: over an Append');
unlike($plan, qr/Merge Append/, 'ORDER BY: no Merge Append');
my @remote = remote_sql($plan);
is(scalar @remote, 2, 'ORDER BY: one foreign scan per shard');
is(scalar(grep { /ORDER BY/ } @remote), 0,
	'ORDER BY: the shards are not asked to sort');

$plan = $coord->safe_psql($db,
	'SET gpusort.enabled = off; ' . $explain . $order_by);
like($plan, qr/Merge Append/, 'gpusort off: Merge Append') or diag($plan);
unlike($plan, qr/GpuSort/, 'gpusort off: no GpuSort');

# with LIMIT PostgreSQL's plan stays: each shard sorts, through its own
# gpusort, and the coordinator merges
my $limit = 'SELECT id, k FROM t ORDER BY k, id LIMIT 10';
$plan = $coord->safe_psql($db, $explain . $limit);
like($plan, qr/Merge Append/, 'LIMIT: Merge Append') or diag($plan);
@remote = remote_sql($plan);
is(scalar(grep { /ORDER BY/ } @remote), 2,
	'LIMIT: both shards are asked to sort');

my $sorts = 'SELECT sorts_gpu + sorts_cpu FROM gpusort_stats';
my @before = map { $_->safe_psql($db, $sorts) } ($shard1, $shard2);
same_output($coord->safe_psql($db, $limit),
	$coord->safe_psql($db,
		'SET gpusort.enabled = off; SELECT id, k FROM ref ORDER BY k, id LIMIT 10'),
	'LIMIT: answer');
my @after = map { $_->safe_psql($db, $sorts) } ($shard1, $shard2);
cmp_ok($after[0], '>', $before[0], 'LIMIT: shard1 sorted through gpusort');
cmp_ok($after[1], '>', $before[1], 'LIMIT: shard2 sorted through gpusort');

# ---- asynchronous foreign scans ----
$coord->safe_psql($db,
	    "ALTER SERVER shard1 OPTIONS (ADD async_capable 'true');"
	  . "ALTER SERVER shard2 OPTIONS (ADD async_capable 'true');");
$plan = $coord->safe_psql($db, $explain . $order_by);
like($plan, qr/^\s*Custom Scan \(GpuSort\)/m, 'async: a GpuSort')
  or diag($plan);
is(scalar(() = $plan =~ /Async Foreign Scan/g), 2,
	'async: both shards scanned asynchronously');
check_answers(' (async)');

# ---- parallel workers read the shards ----
# With the setup cost of a parallel plan at 0 (its rows would be too few to
# pay for workers otherwise), the GpuSort's Append of the shards' scans
# becomes a Parallel Append under a GpuSortLoad: a worker and the backend
# each read a whole shard through a connection of their own, synchronously
# (async_capable is still on).  Every session from now on gets the setting.
$coord->safe_psql($db, "ALTER DATABASE $db SET parallel_setup_cost = 0");
my $explain_analyze = 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ';
# a Parallel Append whose subplans are the two shards' (synchronous) scans
my $shards_read_by_workers =
  qr/^\s*->\s+Parallel Append[^\n]*\n(\s*->\s+Foreign Scan on t_s\d t_\d[^\n]*(?:\n|\z)){2}/m;

$plan = $coord->safe_psql($db, 'EXPLAIN (COSTS OFF) ' . $order_by);
like($plan, qr/^\s*Custom Scan \(GpuSort\)/m, 'parallel read: a GpuSort')
  or diag($plan);
like($plan, qr/^\s*->\s+Parallel Custom Scan \(GpuSortLoad\)/m,
	'parallel read: a GpuSortLoad under it');
like(
	$plan,
	$shards_read_by_workers,
	'parallel read: a Parallel Append of the two foreign scans');
unlike($plan, qr/Async Foreign Scan/, 'parallel read: no asynchronous scan');

$plan = $coord->safe_psql($db, $explain_analyze . $order_by);
like($plan, qr/Workers Launched: [1-9]/,
	'parallel read: a worker launched') or diag($plan);
unlike($plan, qr/Load: serial/, 'parallel read: no serial load');

# inside a transaction block the backend reads the shards itself: BEGIN,
# or several statements in one query string (psql's \;)
$plan = $coord->safe_psql($db,
	"BEGIN;\n" . $explain_analyze . $order_by . ";\nCOMMIT;");
like($plan, qr/Load: serial \(inside a transaction block\)/,
	'BEGIN: serial load') or diag($plan);
$plan = $coord->safe_psql($db, 'SELECT 1 \; ' . $explain_analyze . $order_by);
like($plan, qr/Load: serial \(inside a transaction block\)/,
	'one query string of two statements: serial load') or diag($plan);
same_output(
	$coord->safe_psql($db, "BEGIN;\n" . $order_by . ";\nCOMMIT;"),
	$want{ $queries[0][0] },
	'BEGIN: t with gpusort equals ref without');

# a window function: its sort loaded in parallel too (the window function
# is parallel restricted, but the workers evaluate only the foreign scans)
my $window = sprintf($queries[6][1], 't');
$plan = $coord->safe_psql($db, $explain_analyze . $window);
like($plan, $shards_read_by_workers,
	'window: a Parallel Append of the foreign scans') or diag($plan);
like($plan, qr/Workers Launched: [1-9]/, 'window: a worker launched');
same_output($coord->safe_psql($db, $window), $want{ $queries[6][0] },
	'window: t with gpusort equals ref without');

# GROUP BY's sort: loaded in parallel, right
my $group_by = 'SET enable_hashagg = off;'
  . ' SELECT k, count(*), sum(g) FROM %s GROUP BY k ORDER BY k';
$plan = $coord->safe_psql($db,
	'SET enable_hashagg = off; ' . $explain_analyze
	  . 'SELECT k, count(*), sum(g) FROM t GROUP BY k ORDER BY k');
like($plan, $shards_read_by_workers,
	'GROUP BY: a Parallel Append of the foreign scans') or diag($plan);
like($plan, qr/Workers Launched: [1-9]/, 'GROUP BY: a worker launched');
same_output(
	$coord->safe_psql($db, sprintf($group_by, 't')),
	$coord->safe_psql($db,
		'SET gpusort.enabled = off; ' . sprintf($group_by, 'ref')),
	'GROUP BY: t with gpusort equals ref without');

# each server scanned twice: the backend reads them (a worker's connection
# would not be the one the other scan of the same server uses)
my $no_hash = 'SET enable_hashjoin = off; SET enable_nestloop = off; ';
my $self_join =
  'SELECT a.id, a.k, b.s FROM %s a JOIN %s b ON a.id = b.id ORDER BY a.id';
$plan = $coord->safe_psql($db,
	$no_hash . $explain . sprintf($self_join, 't', 't'));
like($plan, qr/GpuSort/, 'self-join: GpuSorts') or diag($plan);
unlike($plan, qr/Parallel Append|GpuSortLoad/, 'self-join: no parallel read');
same_output(
	$coord->safe_psql($db, $no_hash . sprintf($self_join, 't', 't')),
	$coord->safe_psql($db,
		'SET gpusort.enabled = off; ' . $no_hash
		  . sprintf($self_join, 'ref', 'ref')),
	'self-join: t with gpusort equals ref without');

check_answers(' (parallel read)');

# ---- a shard that is down ----
my $started = $coord->safe_psql($db, 'SELECT pg_postmaster_start_time()');
$shard2->stop('fast');
my ($stdout, $stderr);
my $rc = $coord->psql(
	$db, $order_by,
	stdout => \$stdout,
	stderr => \$stderr);
isnt($rc, 0, 'shard down: the query fails');
like($stderr, qr/could not connect to server "shard2"/,
	"shard down: postgres_fdw's error");
is($coord->safe_psql($db, 'SELECT pg_postmaster_start_time()'),
	$started, 'shard down: the coordinator did not restart');
same_output($coord->safe_psql($db, sprintf($queries[0][1], 'ref')),
	$want{ $queries[0][0] }, 'shard down: ref still answers');

$shard2->start;
same_output($coord->safe_psql($db, $order_by),
	$want{ $queries[0][0] }, 'shard back: t answers again');

$coord->stop;
$shard1->stop;
$shard2->stop;
done_testing();
