# What the TAP tests of test/t share: servers on 127.0.0.1 (TCP, a port
# each), every one preloading gpusort, with a database that has the
# extension; psql run the way a shell script runs it (one process, the SQL
# on its standard input, both output streams in one when asked); and a
# count of the shared memory segments a server left in /dev/shm.
package GpuSortNodes;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

our @EXPORT =
  qw(gpusort_node gs_psql gs_psql_start gs_psql_finish gs_bg_query
  gs_count_lines gs_shm_snapshot gs_shm_segments gs_shm_names
  gs_pages_differ_sql);

# SQL whose one row says how two btree indexes' pages compare: "size
# differs", or "N pages differ", comparing every page but its LSN and
# checksum (pageinspect's get_raw_page and page_header)
sub gs_pages_differ_sql
{
	my ($a, $b) = @_;

	return <<"EOSQL";
SELECT CASE WHEN pg_relation_size('$a') <> pg_relation_size('$b') THEN 'size differs'
	ELSE (SELECT count(*) FROM generate_series(0, pg_relation_size('$a') / 8192 - 1) AS b,
			LATERAL (SELECT get_raw_page('$a', b) AS p1, get_raw_page('$b', b) AS p2) r,
			LATERAL page_header(r.p1) h
		  WHERE substr(p1, 11, h.lower - 10) || substr(p1, h.upper + 1) <>
				substr(p2, 11, h.lower - 10) || substr(p2, h.upper + 1))::text || ' pages differ'
	END;
EOSQL
}

# a started node that preloads gpusort, with database $db (UTF8, en_US: text
# sorts under a collation other than C) that has the extension.  Options:
# preload => 0: gpusort not in shared_preload_libraries, and $db without
# the extension (CREATE EXTENSION would warn); conf => lines for
# postgresql.conf.
sub gpusort_node
{
	my ($name, $db, %opts) = @_;
	my $preload = $opts{preload} // 1;

	# at run time: Cluster.pm's INIT block sets these after any module's
	# own code has run
	$PostgreSQL::Test::Cluster::use_tcp = 1;
	$PostgreSQL::Test::Cluster::test_localhost = '127.0.0.1';
	$PostgreSQL::Test::Cluster::test_pghost = '127.0.0.1';
	$ENV{PGHOST} = '127.0.0.1';

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = '" . ($preload ? 'gpusort' : '') . "'\n"
		  . "max_connections = 20\n"
		  . "log_statement = none\n"
		  . ($opts{conf} // ''));
	$node->start;
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING 'UTF8'"
		  . " LOCALE 'en_US.UTF-8'");
	$node->safe_psql($db, 'CREATE EXTENSION gpusort') if $preload;
	return $node;
}

# Run $sql through one psql process (-X -q -A -t, the SQL on its standard
# input, as "psql <<SQL" in a shell: messages without a file:line prefix).
# Returns ($rc, $stdout, $stderr), each output without its last newline;
# in scalar context $stdout.  Options: merge => 1: stderr goes into
# $stdout, in the order psql wrote them (as 2>&1); on_error_stop (default
# 1); appname: application_name; timeout (seconds; the test dies past it).
sub gs_psql
{
	my $job = gs_psql_start(@_);
	return gs_psql_finish($job);
}

# gs_psql's psql, started and left running; gs_psql_finish($job) waits for
# it and returns what gs_psql returns.  Its input and output are files, not
# pipes that the test would have to pump: jobs run at the same time while
# the test waits for one of them, or does something else.
sub gs_psql_start
{
	my ($node, $db, $sql, %opts) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	my $job = { dir => $dir };
	my $conn = $node->connstr($db);
	$conn .= " application_name=$opts{appname}" if defined $opts{appname};
	my @cmd = (
		$node->installed_command('psql'), '-X', '-q', '-A', '-t',
		'-v', 'ON_ERROR_STOP=' . ($opts{on_error_stop} // 1),
		'-d', $conn);
	open(my $fh, '>', "$dir/in.sql") or die "$dir/in.sql: $!";
	print $fh $sql;
	close($fh);
	my @redirect =
	    $opts{merge}
	  ? ('>&', "$dir/out")
	  : ('>', "$dir/out", '2>', "$dir/err");
	$job->{h} = IPC::Run::start(\@cmd, '<', "$dir/in.sql", @redirect,
		IPC::Run::timeout(
			$opts{timeout} // $PostgreSQL::Test::Utils::timeout_default));
	return $job;
}

sub gs_psql_finish
{
	my ($job) = @_;
	$job->{h}->finish;
	my $rc = $job->{h}->result(0) // -1;
	my $out = slurp_file("$job->{dir}/out");
	my $err = -e "$job->{dir}/err" ? slurp_file("$job->{dir}/err") : '';
	chomp $out;
	chomp $err;
	return wantarray ? ($rc, $out, $err) : $out;
}

# A query in a session of $node->background_psql: returns ($stdout,
# $stderr) of this query alone (the session's stderr is emptied after it,
# which BackgroundPsql does not do on every version).
sub gs_bg_query
{
	my ($session, $sql) = @_;
	my $out = $session->query($sql);
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return ($out, $err);
}

# the lines of $text that match $re (grep -c)
sub gs_count_lines
{
	my ($text, $re) = @_;
	return scalar grep { $_ =~ $re } split /\n/, $text;
}

# Shared memory segments of the node under test, and of no other server
# on the machine: a count of all of /dev/shm/PostgreSQL.* changes whenever
# another cluster runs a parallel query.
#
# gs_shm_snapshot notes the node's postmaster and the segments that exist
# now.  gs_shm_segments then counts the segments that are the node's and
# new: a segment
#  - that was not there at the snapshot (names are random 32-bit numbers),
#  - whose file belongs to the postmaster's operating system user,
#  - that no process other than the postmaster and its children (backends,
#    parallel and background workers) holds, mapped (/proc/PID/maps) or
#    open (/proc/PID/fd): a segment of ours is held by our processes, or by
#    none when it was left behind, which is what the tests look for, while
#    another server's is held by its processes from shm_open to the last
#    detach,
#  - and is so at two looks 0.2 s apart: another server's segment is held
#    by nobody only for an instant, between its last detach and its unlink.
sub gs_shm_snapshot
{
	my ($node) = @_;
	my $pidfile = slurp_file($node->data_dir . '/postmaster.pid');
	my ($pm) = $pidfile =~ /^(\d+)/ or die "no postmaster.pid";
	return { pm => $pm, before => { map { $_ => 1 } _shm_list() } };
}

sub gs_shm_segments
{
	return scalar gs_shm_names(@_);
}

# the names of the segments that gs_shm_segments counts.  Options:
# unheld => 1: only those that no process at all maps or holds open, the
# server's own included (after a crash and restart, the server's new
# segments are held by its postmaster, while what the crash left behind is
# held by nobody)
sub gs_shm_names
{
	my ($snap, %opts) = @_;
	my $pm = $snap->{pm};
	my $owner = (stat("/proc/$pm"))[4];
	die "no postmaster $pm" unless defined $owner;
	my @looks;
	for my $look (1, 2)
	{
		usleep(200_000) if $look == 2;
		my %foreign = map { $_ => 1 } _shm_foreign($pm, $opts{unheld});
		push @looks,
		  {
			map { $_ => 1 }
			  grep {
				     !$snap->{before}{$_}
				  && !$foreign{$_}
				  && ((stat("/dev/shm/$_"))[4] // -1) == $owner
			  } _shm_list()
		  };
	}
	my @names = sort grep { $looks[1]{$_} } keys %{ $looks[0] };
	return wantarray ? @names : scalar @names;
}

sub _shm_list
{
	opendir(my $dh, '/dev/shm') or return ();
	my @names = grep { /^PostgreSQL\.\d+$/ } readdir($dh);
	closedir($dh);
	return @names;
}

# the segments that a process not of the postmaster $pm maps or has open;
# with $all, that any process maps or has open
sub _shm_foreign
{
	my ($pm, $all) = @_;
	my %held;
	opendir(my $proc, '/proc') or return ();
	for my $pid (grep { /^\d+$/ } readdir($proc))
	{
		if (!$all)
		{
			next if $pid == $pm;
			open(my $fh, '<', "/proc/$pid/stat") or next;
			my $stat = <$fh>;
			close($fh);
			# after the command name (which may hold ") "): state, ppid
			next unless defined $stat && $stat =~ /\) \S+ (\d+) [^)]*$/;
			next if $1 == $pm;
		}
		if (open(my $maps, '<', "/proc/$pid/maps"))
		{
			while (<$maps>)
			{
				$held{$1} = 1 if m{/dev/shm/(PostgreSQL\.\d+)};
			}
			close($maps);
		}
		if (opendir(my $fds, "/proc/$pid/fd"))
		{
			for my $fd (readdir($fds))
			{
				my $link = readlink("/proc/$pid/fd/$fd") // next;
				$held{$1} = 1 if $link =~ m{^/dev/shm/(PostgreSQL\.\d+)};
			}
			closedir($fds);
		}
	}
	closedir($proc);
	return keys %held;
}

1;
