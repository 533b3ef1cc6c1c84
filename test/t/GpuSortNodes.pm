# What the TAP tests of test/t share: servers on 127.0.0.1 (TCP, a port
# each), every one preloading gpusort, with a database that has the
# extension.
package GpuSortNodes;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(gpusort_node);

# a started node that preloads gpusort, with database $db (UTF8, en_US: text
# sorts under a collation other than C) that has the extension
sub gpusort_node
{
	my ($name, $db) = @_;

	# at run time: Cluster.pm's INIT block sets these after any module's
	# own code has run
	$PostgreSQL::Test::Cluster::use_tcp = 1;
	$PostgreSQL::Test::Cluster::test_localhost = '127.0.0.1';
	$PostgreSQL::Test::Cluster::test_pghost = '127.0.0.1';
	$ENV{PGHOST} = '127.0.0.1';

	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'gpusort'\n"
		  . "max_connections = 20\n"
		  . "log_statement = none\n");
	$node->start;
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING 'UTF8'"
		  . " LOCALE 'en_US.UTF-8'");
	$node->safe_psql($db, 'CREATE EXTENSION gpusort');
	return $node;
}

1;
