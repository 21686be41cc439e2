#!/usr/bin/env bash
# Runs the README's "Sharding a grid" recipe on a real Slurm and checks that
# the merged summary equals an unsharded run's.
#
#   .ci/slurm.sh                      # CI: a private one-node Slurm on this machine (needs root)
#   SLURM_CI_EXISTING=1 WORKDIR=/shared/scratch/kameleon-slurm .ci/slurm.sh
#                                     # the same recipe on the cluster sbatch already talks to
#
# Steps (a failure names the step it happened in and exits non-zero):
#
#  1. install: apt-get install slurmctld slurmd slurm-client munge jq, skipped
#     for packages already installed. Services are not started by the install.
#  2. start: a private munged, slurmctld and slurmd, all as root, configured in
#     a temporary directory ($WORKDIR/slurm): a fresh munge key and socket, a
#     slurm.conf naming this host (CPUs and memory from `slurmd -C`) and the
#     first free ports from 6817 up. Every Slurm command finds it through
#     SLURM_CONF, so the system's /etc/slurm and /etc/munge are not used.
#     Waits until `sinfo` shows the node idle.
#  3. build: the debug xtask binary (`cargo build -p xtask`), or the one in
#     $XTASK.
#  4. sharded run: `sbatch --array=1-$SHARDS --wait` of a batch script running
#     `xtask reproduce $EXPERIMENT --quick --shard-from-env`, each array task
#     writing to its own --out directory; then checks that every task is
#     COMPLETED with exit code 0.
#  5. merge: `xtask merge $EXPERIMENT` of the shards' directories.
#  6. unsharded run: the same experiment, size and seed in one process.
#  7. compare: the two summary.json files must be equal without what depends
#     on the clock (wall times, metrics named `seconds` or `*_per_s` and the
#     claims about time), as the runner's shard tests compare them; in
#     particular every per-chain metric value must be identical.
#
# On exit, successful or not, it cancels its job if it is still queued or
# running, stops the daemons it started (slurmd, slurmctld, munged), and
# removes $WORKDIR unless the run failed or KEEP=1.
#
# Environment:
#   EXPERIMENT  experiment to run (default kamh-banana; `xtask list` shows them)
#   SHARDS      array size N of --array=1-N (default 3)
#   SEED        master seed of both runs (default 1)
#   XTASK       an xtask binary to use instead of building target/debug/xtask;
#               on a cluster it must be readable from the compute nodes
#   WORKDIR     a new or empty directory for the shards, the merged and
#               unsharded results and the Slurm state (default: a new
#               directory under $TMPDIR or /tmp); on a cluster, one every
#               node sees
#   KEEP        1: keep WORKDIR after a successful run
#   JOB_TIMEOUT seconds to wait for the array job (default 900)
#   SLURM_CI_EXISTING  1: use the Slurm that sbatch already reaches (a real
#               cluster) instead of installing and starting one; steps 1, 2
#               and the daemon shutdown are skipped. The array tasks start in
#               this repository and run $XTASK, so both must be on a file
#               system the compute nodes share; the unsharded run is local.
#   SBATCH_ARGS extra sbatch options, split on spaces (e.g. a cluster's
#               "--partition=short --account=myproject")
#
# On a cluster the recipe is steps 3–5 with a release build:
#
#   cargo build --release -p xtask
#   sbatch --array=1-16 --cpus-per-task=4 --wait \
#     --wrap 'target/release/xtask reproduce kamh-banana --shard-from-env --threads 4 --out shards/$SLURM_ARRAY_TASK_ID'
#   target/release/xtask merge kamh-banana shards/*
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

experiment="${EXPERIMENT:-kamh-banana}"
shards="${SHARDS:-3}"
seed="${SEED:-1}"
job_timeout="${JOB_TIMEOUT:-900}"
existing="${SLURM_CI_EXISTING:-0}"
read -r -a sbatch_args <<<"${SBATCH_ARGS:-}"

case "$shards" in '' | *[!0-9]* | 0 | 1)
    echo "slurm-ci: SHARDS must be an integer of at least 2, got '$shards'" >&2
    exit 2
    ;;
esac

step="setup"
say() { echo "slurm-ci [$step]: $*"; }
fail() {
    echo "slurm-ci [$step]: error: $*" >&2
    exit 1
}

# A fresh directory: reproduce resumes from the records it finds, so a reused
# one would skip the chains and test nothing.
if [ -n "${WORKDIR:-}" ]; then
    if [ -e "$WORKDIR" ] && [ -n "$(ls -A "$WORKDIR")" ]; then
        echo "slurm-ci: WORKDIR=$WORKDIR is not empty; give a new or empty directory" >&2
        exit 2
    fi
    work="$WORKDIR"
else
    work="$(mktemp -d "${TMPDIR:-/tmp}/kameleon-slurm.XXXXXX")"
fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"
slurm_dir="$work/slurm"
pids=()  # daemons started here, in start order
names=() # their names
job_id=""
sbatch_pid=""
start_time=$SECONDS

# Each daemon's log file, or what it wrote to stderr (the same lines, and
# errors from before it opened the log file) if the log file is empty.
print_logs() {
    local d f
    for d in munged slurmctld slurmd; do
        f="$slurm_dir/log/$d.log"
        [ -s "$f" ] || f="$slurm_dir/log/$d.stderr"
        [ -s "$f" ] || continue
        echo "----- last lines of $f -----" >&2
        tail -n 40 "$f" >&2
    done
}

cleanup() {
    local rc=$?
    set +e
    if [ "$rc" -ne 0 ]; then
        echo "slurm-ci: FAILED in step '$step' (exit $rc); outputs kept in $work" >&2
        case "$step" in start | "sharded run") [ "$existing" = 1 ] || print_logs ;; esac
    fi
    [ -z "$sbatch_pid" ] || kill "$sbatch_pid" 2>/dev/null
    if [ -z "$job_id" ] && [ -s "$work/job_id" ]; then
        job_id="$(head -n 1 "$work/job_id" | cut -d ';' -f 1)"
    fi
    if [ -n "$job_id" ] && [ "$rc" -ne 0 ]; then
        scancel "$job_id" 2>/dev/null
    fi
    if [ "${#pids[@]}" -gt 0 ]; then
        # wait for cancelled tasks to leave before stopping slurmd
        local i
        for i in $(seq 20); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.5
        done
        stop_daemons
    fi
    if [ "$rc" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
# a signal ends the script through its EXIT trap
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Stops the daemons in reverse start order: TERM, then KILL after 10 s.
stop_daemons() {
    local k pid i
    for ((k = ${#pids[@]} - 1; k >= 0; k--)); do
        pid="${pids[k]}"
        kill -TERM "$pid" 2>/dev/null || continue
        for i in $(seq 20); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm-ci: process $pid ignored SIGTERM; killing it" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
    done
    pids=()
    names=()
    echo "slurm-ci: stopped the daemons it started"
}

# ---------------------------------------------------------------------------
install_packages() {
    step="install"
    local pkgs=(slurmctld slurmd slurm-client munge jq) missing=() p
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        say "already installed: ${pkgs[*]}"
        return
    fi
    [ "$(id -u)" -eq 0 ] || fail "installing ${missing[*]} needs root"
    say "apt-get install ${missing[*]}"
    # The packages' maintainer scripts would start the system's munge and
    # Slurm services; a policy-rc.d answering 101 forbids that (Docker images
    # ship one; elsewhere it is put there for the install and removed).
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    local ok=1
    if ! apt-get update -qq >"$work/apt.log" 2>&1 ||
        ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >>"$work/apt.log" 2>&1; then
        ok=0
    fi
    [ "$added_policy" = 0 ] || rm -f "$policy"
    if [ "$ok" = 0 ]; then
        tail -n 30 "$work/apt.log" >&2
        fail "apt-get install ${missing[*]} failed (log: $work/apt.log)"
    fi
}

# The first port p ≥ $1 with p and p+1 both free on localhost.
free_port_pair() {
    local p=$1
    while [ "$p" -lt $(($1 + 200)) ]; do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
            ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
            echo "$p"
            return
        fi
        p=$((p + 2))
    done
    fail "no two free ports between $1 and $(($1 + 200))"
}

# Runs the command $2… in the background with stderr to $slurm_dir/log/$1,
# and remembers its pid for stop_daemons.
start_daemon() {
    local log=$1
    shift
    "$@" 2>"$slurm_dir/log/$log" &
    pids+=($!)
    names+=("$1")
}

# Waits up to $2 seconds for the command $1 (a string for bash -c) to
# succeed; fails at once if a daemon started here has exited.
wait_for() {
    local cond=$1 limit=$2 start=$SECONDS k
    until bash -c "$cond" >/dev/null 2>&1; do
        for k in "${!pids[@]}"; do
            kill -0 "${pids[k]}" 2>/dev/null || fail "${names[k]} exited (see its log below)"
        done
        [ $((SECONDS - start)) -lt "$limit" ] || return 1
        sleep 0.5
    done
}

start_slurm() {
    step="start"
    [ "$(id -u)" -eq 0 ] || fail "a private Slurm runs its daemons as root; run as root"
    local host
    host="$(hostname -s)"
    mkdir -p "$slurm_dir"/{munge,state,spool,log}
    # only root (the daemons, sbatch, the jobs) talks to this munged
    chmod 700 "$slurm_dir/munge"

    # munge: a fresh key and a socket of our own, so a system munged (if any)
    # is neither used nor disturbed. munged refuses root without --force.
    local key="$slurm_dir/munge/munge.key" socket="$slurm_dir/munge/munge.socket"
    if [ ! -s "$key" ]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$key"
        else
            dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
        fi
    fi
    chmod 400 "$key"
    # in the foreground, munged logs to stderr
    start_daemon munged.log munged --foreground --force --key-file="$key" --socket="$socket" \
        --pid-file="$slurm_dir/munge/munged.pid" --seed-file="$slurm_dir/munge/seed"
    wait_for "test -S '$socket'" 20 || fail "munged did not create $socket within 20 s"
    say "munged up (pid ${pids[0]}, socket $socket)"

    # slurm.conf: this host, as `slurmd -C` sees it, as the only node.
    local node ports
    node="$(slurmd -C | head -n 1)"
    case "$node" in NodeName=*) ;; *) fail "unexpected 'slurmd -C' output: $node" ;; esac
    node="NodeName=$host NodeAddr=127.0.0.1 ${node#NodeName=* }"
    ports="$(free_port_pair 6817)"
    export SLURM_CONF="$slurm_dir/slurm.conf"
    cat >"$SLURM_CONF" <<EOF
# written by .ci/slurm.sh: a one-node cluster on this host
ClusterName=kameleon-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ports
SlurmdPort=$((ports + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd.pid
SlurmctldLogFile=$slurm_dir/log/slurmctld.log
SlurmdLogFile=$slurm_dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
MailProg=/bin/true
$node State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    # -D: in the foreground, so that the trap can stop it by its pid
    start_daemon slurmctld.stderr slurmctld -D -i
    wait_for "scontrol ping | grep -q UP" 30 || fail "slurmctld did not answer 'scontrol ping' within 30 s"
    start_daemon slurmd.stderr slurmd -D -N "$host"
    wait_for "sinfo -h -N -n '$host' -o %t | grep -qx idle" 60 ||
        fail "node $host not idle within 60 s (sinfo: $(sinfo -h -N -o '%N %t' 2>&1))"
    say "one-node Slurm up: $(sinfo -h -N -o '%N %c CPUs %t'), ports $ports-$((ports + 1)), SLURM_CONF=$SLURM_CONF"
}

build_xtask() {
    step="build"
    if [ -n "${XTASK:-}" ]; then
        [ -x "$XTASK" ] || fail "XTASK=$XTASK is not an executable"
        xtask="$(cd "$(dirname "$XTASK")" && pwd)/$(basename "$XTASK")"
        say "using $xtask"
        return
    fi
    say "cargo build -p xtask"
    cargo build -p xtask
    xtask="$repo/${CARGO_TARGET_DIR:-target}/debug/xtask"
    [ -x "$xtask" ] || fail "cargo build -p xtask did not produce $xtask"
}

# Every task of job $1: one "task state exit-code" line each.
array_tasks() {
    scontrol -o show job "$1" |
        sed -n 's/.*ArrayTaskId=\([^ ]*\) .* JobState=\([^ ]*\) .* ExitCode=\([^ ]*\) .*/\1 \2 \3/p'
}

run_shards() {
    step="sharded run"
    mkdir -p "$work/shards" "$work/logs"
    local batch="$work/shard.sbatch"
    # Each task reads its shard (i of N) from SLURM_ARRAY_TASK_ID and
    # SLURM_ARRAY_TASK_COUNT and writes into its own directory.
    cat >"$batch" <<EOF
#!/usr/bin/env bash
set -euo pipefail
exec $(printf '%q' "$xtask") reproduce $(printf '%q' "$experiment") --quick --seed $seed \\
  --shard-from-env --threads 1 --out $(printf '%q' "$work/shards")/"\$SLURM_ARRAY_TASK_ID"
EOF
    say "sbatch --array=1-$shards: $experiment --quick --seed $seed --shard-from-env"
    local t0=$SECONDS rc=0
    # in the background, so that a signal reaches the trap without waiting
    # for sbatch --wait to return
    timeout "$job_timeout" sbatch --parsable --wait --array="1-$shards" --cpus-per-task=1 \
        --job-name="kameleon-$experiment" --chdir="$repo" \
        --output="$work/logs/%A_%a.out" "${sbatch_args[@]}" "$batch" >"$work/job_id" &
    sbatch_pid=$!
    wait "$sbatch_pid" || rc=$?
    sbatch_pid=""
    job_id="$(head -n 1 "$work/job_id" | cut -d ';' -f 1)"
    [ -n "$job_id" ] || fail "sbatch printed no job id"
    if [ "$rc" -eq 124 ]; then
        fail "job $job_id not finished within JOB_TIMEOUT=$job_timeout s"
    fi
    say "job $job_id finished in $((SECONDS - t0)) s (sbatch --wait exit $rc)"

    local tasks bad=0 task state code
    tasks="$(array_tasks "$job_id")"
    [ -n "$tasks" ] || fail "'scontrol show job $job_id' lists no array tasks"
    while read -r task state code; do
        say "task $task: $state, exit code $code"
        if [ "$state" != COMPLETED ] || [ "$code" != 0:0 ]; then
            bad=1
            echo "----- $work/logs/${job_id}_$task.out -----" >&2
            head -n 20 "$work/logs/${job_id}_$task.out" >&2 || true
        fi
    done <<<"$tasks"
    [ "$(wc -l <<<"$tasks")" -eq "$shards" ] ||
        fail "job $job_id has $(wc -l <<<"$tasks") tasks, expected $shards"
    [ "$bad" = 0 ] || fail "not every array task of job $job_id succeeded"
    [ "$rc" -eq 0 ] || fail "sbatch --wait exited with $rc"
}

merge_shards() {
    step="merge"
    local dirs=() i
    for i in $(seq "$shards"); do dirs+=("$work/shards/$i"); done
    say "xtask merge $experiment ${dirs[*]}"
    "$xtask" merge "$experiment" "${dirs[@]}" --out "$work/merged"
}

run_single() {
    step="unsharded run"
    say "xtask reproduce $experiment --quick --seed $seed (one process)"
    "$xtask" reproduce "$experiment" --quick --seed "$seed" --out "$work/single" \
        >"$work/logs/single.out" 2>&1 ||
        {
            head -n 20 "$work/logs/single.out" >&2
            fail "the unsharded run failed (log: $work/logs/single.out)"
        }
}

compare() {
    step="compare"
    # What the runner's tests (xtask/src/runner/tests.rs, `timeless`) drop:
    # wall times, clock-dependent metrics and curves, claims about time.
    local filter='
      def clockless: with_entries(select(.key | (endswith("_per_s") or . == "seconds") | not));
      .cells |= map(.wall_time_secs = 0 | .metrics |= clockless
                    | if has("curves") then .curves |= clockless else . end)
      | .claims |= map(select(.claim | (contains("per second") or contains("wall time")) | not))'
    local merged="$work/merged/$experiment/summary.json" single="$work/single/$experiment/summary.json"
    [ -s "$merged" ] || fail "no $merged"
    [ -s "$single" ] || fail "no $single"
    jq -S "$filter" "$merged" >"$work/merged.timeless.json"
    jq -S "$filter" "$single" >"$work/single.timeless.json"
    local values cells
    values="$(jq '[.cells[].metrics[].values | length] | add // 0' "$work/single.timeless.json")"
    cells="$(jq '[.cells[] | select(.status == "done")] | length' "$work/single.timeless.json")"
    [ "$values" -gt 0 ] || fail "the unsharded summary has no per-chain metric values to compare"
    if ! diff -u "$work/single.timeless.json" "$work/merged.timeless.json" >"$work/summary.diff"; then
        head -n 60 "$work/summary.diff" >&2
        fail "merged summary.json differs from the unsharded one (full diff: $work/summary.diff)"
    fi
    say "merged summary.json equals the unsharded one: $cells cells, $values per-chain metric values"
}

if [ "$existing" = 1 ]; then
    command -v sbatch >/dev/null || fail "SLURM_CI_EXISTING=1 but no sbatch on PATH"
    command -v jq >/dev/null || fail "jq is needed to compare the summaries"
else
    install_packages
    start_slurm
fi
build_xtask
run_shards
merge_shards
run_single
compare
step="done"
say "all checks passed in $((SECONDS - start_time)) s"
