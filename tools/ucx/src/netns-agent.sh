#!/bin/sh
# mpirun's remote shell (--mca plm_rsh_agent): the host is the name of a network
# namespace; the command runs there, as ssh would run it on that host.
host=$1
shift
exec ip netns exec "$host" env XROCE_NETNS="$host" /bin/sh -c "$*"
