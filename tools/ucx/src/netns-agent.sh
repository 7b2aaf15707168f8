#!/bin/sh
# mpirun's remote shell (--mca plm_rsh_agent): the host is the name of a network
# namespace; the command runs there, as ssh would run it on that host. Every host keeps
# its Open MPI session directory under its own TMPDIR, as a host of its own would in its
# own /tmp: the namespaces share one file system and one host name, and daemons creating
# the same session tree at once fail with "File exists".
host=$1
shift
tmp="${XROCE_MPI_SESSIONS:?}/$host"
mkdir -p "$tmp" || exit 1
exec ip netns exec "$host" env XROCE_NETNS="$host" TMPDIR="$tmp" /bin/sh -c "$*"
