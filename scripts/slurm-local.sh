#!/usr/bin/env bash
# slurm-local.sh -- a single-node, localhost-only Slurm 22.05 cluster for the console's Slurm backend
# (development, tests, CI). Debian 12 packages, no systemd, no cgroups; four fake accelerator types as typed GRES.
#
#   sudo scripts/slurm-local.sh start               # install the packages if missing, write configs, start daemons
#   sudo scripts/slurm-local.sh stop [--keep-jobs]   # cancel jobs (unless --keep-jobs), stop what `start` started
#   sudo scripts/slurm-local.sh restart-controller   # stop and start slurmctld only (running jobs survive);
#                                                    # also stop-controller / start-controller, for tests
#   sudo scripts/slurm-local.sh status               # daemons, node, partitions, jobs
#   sudo scripts/slurm-local.sh env                  # the SLURM_* variables the console needs (eval "$(… env)")
#   sudo scripts/slurm-local.sh purge                # stop, then wipe state, spool, fake devices, logs and configs
#
# Every daemon listens on 127.0.0.1 or a unix socket. GRES: Name=gpu Type=a800|ascend910b|mlu370|z100, 8 each, on
# global indexes a800 0-7, ascend910b 8-15, mlu370 16-23, z100 24-31 (the console's gres_offsets). Partitions:
# nvidia and xinchuang (on-demand, never preempted) and spot (PriorityTier=1, preempted jobs are requeued).
# slurmrestd refuses to run as root: it runs as the system user `slurmrestd` with rest_auth/jwt on
# 127.0.0.1:$RESTD_PORT. $JOB_USER (created here) owns the console's root for instances and is the user the console
# talks to slurmrestd as. Each owner's jobs run as their own account, gpucloud-u<owner id>, which the console creates
# when it runs as root (SLURM_JOB_UID_BASE: uid and gid are the base + the owner's id).
#
# Idempotent: a second `start` skips what is running. It never uses pkill or killall: `stop` signals exactly the
# PIDs `start` recorded in /run/slurm-local, after checking /proc/PID/exe.
set -euo pipefail

RESTD_PORT=${RESTD_PORT:-6820}
JOB_USER=${SLURM_JOB_USER:-gpucloud}
JOB_USER_TEMPLATE=${SLURM_JOB_USER_TEMPLATE-gpucloud-u\{owner\}}
JOB_UID_BASE=${SLURM_JOB_UID_BASE:-1500000000}
GPUCLOUD_ROOT=${SLURM_ROOT:-/var/lib/gpucloud}
PIDDIR=/run/slurm-local
LOGDIR=/var/log/slurm
STATEDIR=/var/lib/slurm/slurmctld
SPOOLDIR=/var/lib/slurm/slurmd
FAKEDEV=/var/lib/slurm/fakegpu
JWT_KEY=$STATEDIR/jwt_hs256.key

log() { echo "[slurm-local $(date +%T)] $*"; }
die() { echo "slurm-local: $*" >&2; exit 1; }

# alive PIDFILE EXE: the pid file names a live process running EXE. Debian installs /usr/sbin/slurmd as an
# alternatives link to slurmd-wlm, so both sides are resolved before comparing.
alive() {
  local pf=$1 exe=$2 pid
  [ -s "$pf" ] || return 1
  pid=$(cat "$pf")
  [ -d "/proc/$pid" ] && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$exe")" ]
}

wait_for() { # wait_for SECONDS DESCRIPTION CMD...
  local t=$1 what=$2
  shift 2
  for _ in $(seq 1 $((t * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  die "timed out waiting for $what"
}

need_root() { [ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"; }

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmrestd >/dev/null && command -v munged >/dev/null \
     && [ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so ]; then
    return 0
  fi
  log "installing Debian packages (slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge)"
  # slurm-wlm-jwt-plugin is only a Recommends of slurm-wlm: with --no-install-recommends it must be named.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
         slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge >/dev/null; }
}

prepare() {
  # NoCtldInAddrAny/NoInAddrAny bind to what `hostname` resolves to; it must be loopback.
  local hip
  hip=$(getent ahostsv4 "$(hostname)" | awk 'NR==1{print $1}')
  case "$hip" in
    127.*) ;;
    *) die "hostname '$(hostname)' resolves to '${hip:-nothing}', not 127.x: add '127.0.1.1 $(hostname)' to /etc/hosts" ;;
  esac
  id slurm >/dev/null 2>&1 || die "user slurm missing (it comes with slurm-wlm-basic-plugins)"
  id slurmrestd >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin slurmrestd
  id "$JOB_USER" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$JOB_USER"
  install -d -m 0755 "$PIDDIR" /etc/slurm "$SPOOLDIR" "$FAKEDEV"
  install -d -m 0755 -o slurm -g slurm "$STATEDIR" "$LOGDIR" /run/slurm
  install -d -m 0755 -o munge -g munge /run/munge /var/log/munge /var/lib/munge
  install -d -m 2775 -o "$JOB_USER" -g "$JOB_USER" "$GPUCLOUD_ROOT"
  if [ ! -s /etc/munge/munge.key ]; then
    install -d -m 0700 -o munge -g munge /etc/munge
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0600 /etc/munge/munge.key
  fi
  if [ ! -s "$JWT_KEY" ]; then
    log "creating the JWT HS256 key $JWT_KEY"
    dd if=/dev/urandom of="$JWT_KEY" bs=32 count=1 status=none
  fi
  chown slurm:slurm "$JWT_KEY"
  chmod 0600 "$JWT_KEY"
  # gres/gpu drops File-less GPUs and rejects regular files, so each fake card is a harmless char device (1,3).
  for n in $(seq 0 31); do
    [ -c "$FAKEDEV/accel$n" ] || { rm -f "$FAKEDEV/accel$n"; mknod -m 0666 "$FAKEDEV/accel$n" c 1 3; }
  done
}

write_config() {
  cat >/etc/slurm/slurm.conf.new <<'EOF'
# /etc/slurm/slurm.conf -- single-node, localhost-only "GPU cloud" cluster (written by scripts/slurm-local.sh)
ClusterName=localgpu
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
# Without both, slurmctld listens on 0.0.0.0:6817.
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# JWT as the alternative: slurmrestd rest_auth/jwt and `scontrol token` need it.
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/var/lib/slurm/slurmctld/jwt_hs256.key
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
# batch_sched_delay=0: allocate at the next 1 s tick (default 3 s); bf_interval=5: small jobs pass a blocked one soon.
SchedulerParameters=batch_sched_delay=0,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ReturnToService=2
# Fake CPUs and memory on a small machine, enough for every card to be rented at the catalogue's sizing (12 vCPUs
# and 96 GB per card, 32 cards): accept the configured counts instead of draining the node.
SlurmdParameters=config_overrides
KillWait=30
MinJobAge=300
# Preemption without slurmdbd: the partition's PriorityTier decides; spot jobs are requeued.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
SlurmctldParameters=preempt_send_user_signal
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=384 Boards=1 SocketsPerBoard=2 CoresPerSocket=192 ThreadsPerCore=1 RealMemory=3145728 Gres=gpu:a800:8,gpu:ascend910b:8,gpu:mlu370:8,gpu:z100:8 State=UNKNOWN
PartitionName=nvidia    Nodes=localhost Default=YES MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
PartitionName=xinchuang Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
# GraceTime=0: a preempted spot job gets SIGTERM at once and KillWait (30 s) to checkpoint before SIGKILL.
PartitionName=spot      Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=1  PreemptMode=REQUEUE GraceTime=0
EOF
  cat >/etc/slurm/gres.conf.new <<'EOF'
# /etc/slurm/gres.conf -- fake accelerators (written by scripts/slurm-local.sh). Name=gpu needs File= in 22.05.
NodeName=localhost Name=gpu Type=a800       File=/var/lib/slurm/fakegpu/accel[0-7]
NodeName=localhost Name=gpu Type=ascend910b File=/var/lib/slurm/fakegpu/accel[8-15]
NodeName=localhost Name=gpu Type=mlu370     File=/var/lib/slurm/fakegpu/accel[16-23]
NodeName=localhost Name=gpu Type=z100       File=/var/lib/slurm/fakegpu/accel[24-31]
EOF
  local f
  for f in slurm.conf gres.conf; do
    if cmp -s "/etc/slurm/$f.new" "/etc/slurm/$f"; then
      rm -f "/etc/slurm/$f.new"
    else
      log "writing /etc/slurm/$f"
      CONFIG_CHANGED=1
      mv "/etc/slurm/$f.new" "/etc/slurm/$f"
      chmod 0644 "/etc/slurm/$f"
    fi
  done
}

start_munged() {
  if alive "$PIDDIR/munged.pid" /usr/sbin/munged; then return 0; fi
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "using a munged this script did not start"
    return 0
  fi
  log "starting munged"
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged
  wait_for 10 munged test -s /run/munge/munged.pid
  cp /run/munge/munged.pid "$PIDDIR/munged.pid"
  wait_for 10 "a munge round trip" bash -c 'munge -n | unmunge'
}

start_slurmctld() {
  if alive "$PIDDIR/slurmctld.pid" /usr/sbin/slurmctld; then return 0; fi
  alive /run/slurm/slurmctld.pid /usr/sbin/slurmctld && die "a slurmctld this script did not start is running; stop it first"
  log "starting slurmctld"
  rm -f /run/slurm/slurmctld.pid
  /usr/sbin/slurmctld
  wait_for 15 "the slurmctld pid file" test -s /run/slurm/slurmctld.pid
  cp /run/slurm/slurmctld.pid "$PIDDIR/slurmctld.pid"
  wait_for 30 "slurmctld to answer" scontrol ping
}

start_slurmd() {
  if alive "$PIDDIR/slurmd.pid" /usr/sbin/slurmd; then return 0; fi
  alive /run/slurm/slurmd.pid /usr/sbin/slurmd && die "a slurmd this script did not start is running; stop it first"
  log "starting slurmd -N localhost"
  rm -f /run/slurm/slurmd.pid
  /usr/sbin/slurmd -N localhost
  wait_for 15 "the slurmd pid file" test -s /run/slurm/slurmd.pid
  cp /run/slurm/slurmd.pid "$PIDDIR/slurmd.pid"
}

resume_node() {
  local st
  wait_for 60 "node localhost to register" bash -c \
    's=$(sinfo -h -n localhost -o %T | head -1); [ -n "$s" ] && [ "$s" != unknown ] && [ "${s%\*}" = "$s" ]' || true
  st=$(sinfo -h -n localhost -o %T | head -1)
  case "$st" in
    *drain* | *down* | *inval* | *fail*)
      # A drain saved in the controller's state outlives the fix that caused it.
      log "node state '$st': resuming"
      scontrol update nodename=localhost state=resume || true
      ;;
  esac
}

start_slurmrestd() {
  if alive "$PIDDIR/slurmrestd.pid" /usr/sbin/slurmrestd; then return 0; fi
  log "starting slurmrestd (rest_auth/jwt) on 127.0.0.1:$RESTD_PORT as slurmrestd"
  # setpriv execs without forking, so $! is slurmrestd itself; SLURM_JWT=daemon makes it talk JWT to slurmctld.
  SLURM_JWT=daemon setsid setpriv --reuid=slurmrestd --regid="$(id -g slurmrestd)" --init-groups \
    /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 "127.0.0.1:$RESTD_PORT" \
    </dev/null >>"$LOGDIR/slurmrestd.log" 2>&1 &
  echo $! >"$PIDDIR/slurmrestd.pid"
  wait_for 15 "slurmrestd on port $RESTD_PORT" bash -c "exec 3<>/dev/tcp/127.0.0.1/$RESTD_PORT"
}

# stop_daemon NAME EXE: SIGTERM the recorded pid if it still runs EXE, wait up to 20 s, then SIGKILL that pid.
stop_daemon() {
  local name=$1 exe=$2 pf="$PIDDIR/$1.pid" pid
  [ -s "$pf" ] || return 0
  pid=$(cat "$pf")
  if alive "$pf" "$exe"; then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 200); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then kill -KILL "$pid"; sleep 0.5; fi
  fi
  rm -f "$pf"
}

cancel_jobs() {
  local ids
  scontrol ping >/dev/null 2>&1 || return 0
  ids=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
  [ -n "${ids// /}" ] || return 0
  log "cancelling jobs: $ids"
  # shellcheck disable=SC2086
  scancel $ids 2>/dev/null || true
  for _ in $(seq 1 400); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
}

cmd_start() {
  need_root
  # The daemons keep the working directory they start in: a checkout that is deleted later (a CI clone) would
  # leave slurmrestd failing every job submission with "getcwd failed".
  cd /
  install_packages
  prepare
  CONFIG_CHANGED=0
  write_config
  if [ "$CONFIG_CHANGED" = 1 ]; then
    # Daemons this script started earlier still run the old configuration (a node's CPUs and memory are read at
    # start): restart them. Running jobs survive both.
    stop_daemon slurmd /usr/sbin/slurmd
    stop_daemon slurmctld /usr/sbin/slurmctld
  fi
  start_munged
  start_slurmctld
  start_slurmd
  resume_node
  start_slurmrestd
  log "up: $(scontrol ping | tr -s ' ')"
  sinfo -o '%P %a %D %T %G'
}

cmd_stop() {
  need_root
  [ "${1:-}" = "--keep-jobs" ] || cancel_jobs
  stop_daemon slurmrestd /usr/sbin/slurmrestd
  stop_daemon slurmd /usr/sbin/slurmd
  stop_daemon slurmctld /usr/sbin/slurmctld
  stop_daemon munged /usr/sbin/munged
  log "stopped"
}

cmd_stop_controller() {
  need_root
  stop_daemon slurmctld /usr/sbin/slurmctld
}

cmd_start_controller() {
  need_root
  cd /  # as in cmd_start: never keep a checkout as the daemon's working directory
  start_slurmctld
  resume_node
}

cmd_status() {
  local name exe rc=0
  for name in munged slurmctld slurmd slurmrestd; do
    exe=/usr/sbin/$name
    if alive "$PIDDIR/$name.pid" "$exe"; then echo "$name: running (pid $(cat "$PIDDIR/$name.pid"))"
    else echo "$name: not running"; rc=3; fi
  done
  if [ $rc = 0 ]; then
    sinfo -o '%P %a %D %T %G'
    squeue -o '%i %j %u %P %T %r %b'
  fi
  return $rc
}

cmd_env() {
  cat <<EOF
export SLURM_REST_URL=http://127.0.0.1:$RESTD_PORT
export SLURM_JWT_KEY_FILE=$JWT_KEY
export SLURM_USER=$JOB_USER
export SLURM_ROOT=$GPUCLOUD_ROOT
export SLURM_JOB_USER_TEMPLATE='$JOB_USER_TEMPLATE'
export SLURM_JOB_UID_BASE=$JOB_UID_BASE
EOF
}

cmd_purge() {
  need_root
  cmd_stop
  log "wiping state, spool, fake devices, logs and configs"
  rm -rf "$STATEDIR" "$SPOOLDIR" "$FAKEDEV"
  rm -f "$LOGDIR"/*.log /etc/slurm/slurm.conf /etc/slurm/gres.conf
}

case "${1:-}" in
  start) cmd_start ;;
  stop) shift; cmd_stop "$@" ;;
  restart-controller) cmd_stop_controller; cmd_start_controller ;;
  stop-controller) cmd_stop_controller ;;
  start-controller) cmd_start_controller ;;
  status) cmd_status ;;
  env) cmd_env ;;
  purge) cmd_purge ;;
  *) echo "usage: $0 start|stop [--keep-jobs]|restart-controller|stop-controller|start-controller|status|env|purge" >&2
     exit 2 ;;
esac
