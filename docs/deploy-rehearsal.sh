#!/bin/bash
# The rehearsal of docs/deploy.md: its commands, run on one machine in private mount, UTS and network
# namespaces standing in for head and node1..node4. "## scaffold" lines stand in for separate
# machines; every other command is the guide's. Run as root on a machine with MariaDB (root, no
# password, on /run/mysqld/mysqld.sock), unshare, socat, openssl, sqlite3, mysqldump and users alice
# and bob: `docs/deploy-rehearsal.sh [DIR]` (default /tmp/shoal-rehearsal). It prints REHEARSAL DONE.
set -euxo pipefail
if [ -z "${SHOAL_REHEARSAL_DIR:-}" ]; then  ## scaffold: a clone and a wheel house, then the namespaces
  W=$(realpath -m "${1:-/tmp/shoal-rehearsal}"); repo=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$W"; rm -rf "$W/shoal" "$W/wheels"; git clone -q "$repo" "$W/shoal"
  [ -x "$W/build/bin/pip" ] || /usr/bin/python3 -m venv "$W/build"
  "$W/build/bin/pip" wheel -q -w "$W/wheels" "$W/shoal"
  exec env SHOAL_REHEARSAL_DIR="$W" unshare --mount --uts --net --fork --propagation private "$0"
fi
W=$SHOAL_REHEARSAL_DIR
install -d -m 1777 $W/out
## scaffold: private /etc /opt /var /run (overlays), a private network 10.0.0.0/24, MariaDB bridged in
mkdir -p $W/mysqld; mount --bind /run/mysqld $W/mysqld
for d in etc opt var run; do rm -rf $W/up/$d $W/wk/$d; mkdir -p $W/up/$d $W/wk/$d
  mount -t overlay overlay -o lowerdir=/$d,upperdir=$W/up/$d,workdir=$W/wk/$d /$d; done
mount --bind $W/mysqld /run/mysqld   # the host's MariaDB socket, not its overlay copy
hostname head
ip link set lo up; ip addr add 10.0.0.1/24 dev lo
socat TCP-LISTEN:3306,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/mysqld/mysqld.sock & SOCAT=$!
rm -rf /etc/slurm; mkdir /etc/slurm   # the real Slurm's files are not ours
printf '10.0.0.1 head\n10.0.0.11 node1\n10.0.0.12 node2\n10.0.0.13 node3\n10.0.0.14 node4\n' >> /etc/hosts
export -n SLURM_CONF PYTHONPATH SHOAL_TEST_NET || true
unset SLURM_CONF PYTHONPATH SHOAL_TEST_NET VIRTUAL_ENV
cd $W  # holds ./shoal (a clone) and ./wheels (pip wheel -w wheels ./shoal, made where there is network)

# 1. install
/usr/bin/python3 -m venv /opt/shoal
/opt/shoal/bin/pip install -q --no-index --find-links ./wheels shoal
for c in sbatch srun salloc squeue sinfo scontrol scancel sacct sacctmgr sshare sprio sreport shoal; do
  ln -sf /opt/shoal/bin/$c /usr/local/bin/$c; done
ls -l /opt/shoal/bin/python3
# 2. users, directories
getent passwd slurm >/dev/null || useradd --system --user-group --home-dir /var/lib/slurm --shell /usr/sbin/nologin slurm
install -d -m 0755 /etc/slurm
install -d -o slurm -g slurm -m 0755 /var/log/shoal
install -d -o slurm -g slurm -m 0700 /var/spool/shoal/ctld
# 3. the key
(umask 077; openssl rand -hex 32 > /etc/slurm/shoal.key)
chown slurm:slurm /etc/slurm/shoal.key
ls -l /etc/slurm/shoal.key
# 4. configuration
cp shoal/etc/slurm.conf shoal/etc/gres.conf shoal/etc/topology.conf shoal/etc/cgroup.conf /etc/slurm/
## scaffold: the nodes here are this one machine: its CPUs and memory, no GPUs, no cgroups (shared host)
sed -i -e 's/^NodeName=DEFAULT .*/NodeName=DEFAULT CPUs=2 RealMemory=1000 State=UNKNOWN/' \
       -e 's/^DefMemPerCPU=.*/DefMemPerCPU=100/' -e 's/^AccountingStorageTRES=.*//' /etc/slurm/slurm.conf
: > /etc/slurm/gres.conf; rm /etc/slurm/cgroup.conf
# 5. accounting (the database and its user renamed: the MariaDB may be shared)
DB=${SHOAL_REHEARSAL_DB:-rehearsal_acct_db} DBUSER=${SHOAL_REHEARSAL_DB:-rehearsal}_user
mysql -e "DROP DATABASE IF EXISTS $DB; DROP USER IF EXISTS '$DBUSER'@'localhost'"
mysql -e "CREATE DATABASE $DB; CREATE USER '$DBUSER'@'localhost' IDENTIFIED BY 'rehearsal-pass'; GRANT ALL ON $DB.* TO '$DBUSER'@'localhost'"
install -o slurm -g slurm -m 0600 shoal/etc/slurmdbd.conf /etc/slurm/slurmdbd.conf
sed -i -e "s/^StorageUser=.*/StorageUser=$DBUSER/" -e "s/^StoragePass=.*/StoragePass=rehearsal-pass/" \
       -e "s/^StorageLoc=.*/StorageLoc=$DB/" /etc/slurm/slurmdbd.conf
# 6. start, as the units do (no systemd in here): User=slurm for dbd and ctld, root for agentd and noded
install -d -o slurm -g slurm /run/shoal-ctld /run/shoal-dbd   ## scaffold: the units' RuntimeDirectory=
cd /
runuser -u slurm -- /opt/shoal/bin/shoal-dbd -D > $W/dbd.err 2>&1 & DBD=$!
sleep 4
runuser -u slurm -- /opt/shoal/bin/shoal-ctld -D > $W/ctld.err 2>&1 & CTLD=$!
mkdir -p /run/shoal
/opt/shoal/bin/shoal-agentd -D > $W/agentd.err 2>&1 & AGENTD=$!
## scaffold: node1..4, each its own hostname, address and /run (one machine here)
for i in 1 2 3 4; do ip addr add 10.0.0.1$i/24 dev lo 2>/dev/null || true
  unshare --mount --uts --propagation private bash -c "hostname node$i; mount -t tmpfs tmpfs /run/shoal
    exec /opt/shoal/bin/shoal-noded -D" > $W/noded$i.err 2>&1 &
  echo $! > $W/noded$i.pid; done
sleep 8
# 7. accounts, first checks
sacctmgr -i add cluster shoal
sacctmgr -i add account research Description=research Organization=lab
sacctmgr -i add user alice,bob Account=research DefaultAccount=research
sinfo
su alice -c 'cd /tmp && srun -N4 hostname | sort'
su alice -c "cd $W/out && sbatch -N2 --wrap 'srun hostname' && sleep 4 && sacct -X -o JobID,User,Account,State,NodeList"
su alice -c 'cd /tmp && srun -w node1 sacct -X -n -o JobID,State'   # sacct on a compute node
ls -l /run/shoal-ctld /run/shoal-dbd
stat -c '%U %a %n' /var/spool/shoal/ctld /etc/slurm/shoal.key /etc/slurm/slurmdbd.conf
ps -o user,pid,args -p $CTLD,$DBD --ppid $CTLD,$DBD | cat
# 8. upgrade: a running job survives node1's noded restart
JOB=$(su alice -c "cd $W/out && sbatch --parsable -w node1 -o %j.out --wrap 'sleep 15; echo survived'")
sleep 3; squeue
(cd $W && /opt/shoal/bin/pip install -q --no-index --find-links ./wheels --force-reinstall --no-deps shoal)
kill -TERM $(cat $W/noded1.pid); sleep 2; grep "stopped; running jobs continue" $W/noded1.err
unshare --mount --uts --propagation private bash -c "hostname node1; mount -t tmpfs tmpfs /run/shoal
    exec /opt/shoal/bin/shoal-noded -D" >> $W/noded1.err 2>&1 & echo $! > $W/noded1.pid
sleep 16; sacct -X -j $JOB -o JobID,State,ExitCode; grep -x survived $W/out/$JOB.out
# 9. backups
install -d -m 0700 /var/backups/shoal
sqlite3 /var/spool/shoal/ctld/ctld_state.db ".backup /var/backups/shoal/ctld_state.db"
cp -p /etc/slurm/shoal.key /etc/slurm/*.conf /var/backups/shoal/
mysqldump --single-transaction $DB > /var/backups/shoal/slurm_acct_db.sql
ls -l /var/backups/shoal
## scaffold: stop everything
for i in 1 2 3 4; do kill -TERM $(cat $W/noded$i.pid); done
kill -TERM $AGENTD $CTLD $DBD; wait $AGENTD $CTLD $DBD || true
mysql -e "DROP DATABASE IF EXISTS $DB; DROP USER IF EXISTS '$DBUSER'@'localhost'"
kill $SOCAT
sleep 2; ps -eo pid,args | grep /opt/shoal | grep -v grep || true
echo REHEARSAL DONE
