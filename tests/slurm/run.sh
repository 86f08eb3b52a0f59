#!/usr/bin/env bash
# Slurm integration test: a real Slurm cluster on this one machine runs
# tinyvmm job arrays through tools/slurm/tinyvmm-array.sbatch.
#
# munged, slurmctld and three slurmd run from Debian's packages with their
# config, keys, state and logs in a temporary directory. Each daemon has its
# own network namespace and hostname (so it does not matter whether Debian's
# slurmd was built for several slurmd per host, and every node reports its
# own host name to the jobs): slurmctld sits on a bridge with 10.99.0.1/24 in
# namespace tvs<pid>-ctl, node tvnI on 10.99.0.1I in tvs<pid>-nI, joined by
# veth pairs created inside those namespaces, so no traffic or interface
# touches the host's network. Everything is stopped and removed on exit,
# also on SIGINT/SIGTERM (within seconds: long waits run in the background
# so the trap runs at once; the daemons have their own sessions, so a Ctrl-C
# reaches only this script, which stops them). The namespaces of a run that
# was SIGKILLed are removed by the next run.
#
# Asserts: every task of an array COMPLETED with exit 0 and left a valid JSON
# result; the tasks ran on more than one node; a drained node gets no task of
# a second array; a guest job exiting 3 leaves its task FAILED with exit code
# 3 (scontrol and the jobcomp/filetxt log); aggregate.py's table and flags.
# 2 to 5 minutes on the nested-KVM dev host (2m10 idle, 4m55 with other
# VMs loading its 2 cores: the warm-up boot alone took 20 to 141 s) for one
# warm-up job, then 8 VMs, 3 at a time; every wait is bounded (the
# warm-up 300 s, each array 150 s, each Slurm query 30 s; a daemon that dies
# ends the test at once), under 12 minutes at worst.
#
# Needs root and /dev/kvm. Inputs (all optional): TINYVMM (binary, default
# ./tinyvmm, built if missing), TINYVMM_GUEST_DIR (default: tools/build-guest.sh),
# TINYVMM_ROOTFS (default: tools/build-rootfs.sh with the agent),
# TINYVMM_SLURM_KEEP=1 keeps the temporary directory.
# Ends with "N passed, M failed"; exit 0 only if nothing failed (or SKIP).

# Conditions given to `check ... eval '...'` are single-quoted on purpose (and
# use variables shellcheck then thinks unused); cleanup runs from a trap.
# shellcheck disable=SC2016,SC2034,SC2001,SC2317
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
nodes=(tvn1 tvn2 tvn3)
pkgs=(munge slurmctld slurmd slurm-client)
ns_prefix=tvs$$
ns_ctl=$ns_prefix-ctl
t_start=$SECONDS
passed=0
failed=0
tmp=
summary=0
namespaces=()
daemons=() daemon_names=()
children=() # the command run_bg runs

skip() { echo "SKIP: $*"; exit 0; }
indent() { sed 's/^/    /' <<<"$1"; }
log() { printf '[%3ds] %s\n' $((SECONDS - t_start)) "$*"; }
pass() { passed=$((passed + 1)); log "PASS: $*"; }
fail() { failed=$((failed + 1)); log "FAIL: $*"; }
die() { fail "$*"; exit 1; } # a failure after which nothing else can be tested
check() { # check DESCRIPTION COMMAND...: one assertion
	local what=$1; shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# alive PID: running (a killed child stays a zombie until we reap it). From
# /proc, not ps: procps is not in a minimal Debian.
alive() {
	local st
	read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[[ ${st%% *} != Z ]]
}
# Our processes: the daemons, the long commands of run_bg (the warm-up job
# runs outside the namespaces), then whatever lives in our namespaces:
# slurmstepd, job scripts, sbatch, tinyvmm and its VMs.
our_pids() {
	local ns
	printf '%s\n' "${daemons[@]}" "${children[@]}"
	for ns in "${namespaces[@]}"; do ip netns pids "$ns" 2>/dev/null; done
}
# any_alive: one of our processes still runs
any_alive() {
	local pid
	for pid in $(our_pids); do alive "$pid" && return 0; done
	return 1
}
# run_bg OUT ERR COMMAND...: run COMMAND >OUT 2>ERR (ERR "-": ours) and
# return its status, in the background so that SIGINT/SIGTERM reach our trap
# at once, not when COMMAND ends (bash runs traps between commands; `timeout`
# also moves itself out of the terminal's process group, so Ctrl-C never
# reaches what it runs). The redirections are not on the call of run_bg: the
# trap, and so the cleanup, would run with them.
run_bg() {
	local out=$1 err=$2 rc
	shift 2
	case $err in
	-) "$@" >"$out" & ;;
	"$out") "$@" >"$out" 2>&1 & ;;
	*) "$@" >"$out" 2>"$err" & ;;
	esac
	children=($!)
	wait "$!"
	rc=$?
	children=() # reaped: the pid may be reused
	return "$rc"
}
cleanup() {
	local rc=$? ns pid
	trap - EXIT INT TERM
	trap '' INT TERM # a second Ctrl-C does not cut the cleanup short
	for pid in $(our_pids); do kill "$pid" 2>/dev/null; done
	for _ in $(seq 50); do any_alive || break; sleep 0.1; done
	for pid in $(our_pids); do kill -9 "$pid" 2>/dev/null; done
	# SIGKILL is not instant either: processes that are not our children
	# (slurmstepd and its jobs) must be gone before their namespace and the
	# files they hold are removed.
	for _ in $(seq 50); do any_alive || break; sleep 0.1; done
	for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
	wait 2>/dev/null
	if [[ -n $tmp ]]; then
		if ((failed || rc)); then
			for f in "$tmp"/log/slurm*.log; do
				[[ -f $f ]] && { echo "--- tail of $f"; tail -n 15 "$f"; }
			done
		fi
		if [[ -n ${TINYVMM_SLURM_KEEP:-} ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
	fi
	if ((summary)); then
		log "done in $((SECONDS - t_start)) s"
		echo "$passed passed, $failed failed"
		((failed == 0)) || rc=1
	fi
	exit "$rc"
}

# --- what the host must have --------------------------------------------------
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces, slurmd runs jobs as any user)"
[[ -c /dev/kvm && -r /dev/kvm && -w /dev/kvm ]] || skip "no usable /dev/kvm"
for c in unshare nsenter ip python3 timeout; do
	command -v "$c" >/dev/null || skip "$c not installed"
done
have_slurm() { command -v munged && command -v slurmctld && command -v slurmd && command -v sbatch; } >/dev/null
if ! have_slurm; then
	command -v apt-get >/dev/null || skip "Slurm/munge not installed and no apt-get (need: ${pkgs[*]})"
	log "installing ${pkgs[*]} (tools/deps.sh installs them too)"
	export DEBIAN_FRONTEND=noninteractive
	apt_log=$(mktemp /tmp/tinyvmm-slurm-apt.XXXXXX) || skip "cannot create a temporary file"
	if ! { timeout 300 apt-get update -q && timeout 300 apt-get install -y -q --no-install-recommends "${pkgs[@]}"; } >"$apt_log" 2>&1; then
		tail -n 15 "$apt_log"
		rm -f "$apt_log"
		skip "Slurm/munge missing and apt-get install ${pkgs[*]} failed"
	fi
	rm -f "$apt_log"
	have_slurm || skip "Slurm/munge still missing after apt-get install"
fi
ip netns add "$ns_prefix-probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns del "$ns_prefix-probe"
# The namespaces of an earlier run that was SIGKILLed (its cleanup never ran):
# tvs<pid>-* whose pid is gone. Only daemons of that run can live there.
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(tvs[0-9]\{1,\}-[a-z0-9]\{1,\}\).*/\1/p'); do
	old=${ns%%-*}
	alive "${old#tvs}" && continue
	for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null && log "removed namespace $ns of a killed earlier run"
done
summary=1 # from here on the test ends with its "N passed, M failed" line
trap cleanup EXIT
trap 'log "interrupted (SIGINT): cleaning up"; exit 130' INT
trap 'log "interrupted (SIGTERM): cleaning up"; exit 143' TERM

tmp=$(mktemp -d /tmp/tinyvmm-slurm.XXXXXX)
chmod 755 "$tmp"
mkdir -p "$tmp"/{bin,cache,munge,ctld,spool,log,work/results}
chmod 711 "$tmp/munge"

# --- tinyvmm and its guest ------------------------------------------------------
tinyvmm=${TINYVMM:-$root/tinyvmm}
agent=$root/build/guest/tinyvmm-agent
if [[ -z ${TINYVMM:-} && (! -x $tinyvmm || ! -x $agent) ]]; then
	make -C "$root" -j2 tinyvmm build/guest/tinyvmm-agent >&2 || die "cannot build tinyvmm"
fi
guest=${TINYVMM_GUEST_DIR:-$(bash "$root/tools/build-guest.sh" --print-dir)} || die "cannot build the guest"
rootfs=${TINYVMM_ROOTFS:-$(bash "$root/tools/build-rootfs.sh" --init "$agent" --print-path)} || die "cannot build the rootfs"
kernel=$guest/vmlinux
for f in "$tinyvmm" "$kernel" "$rootfs"; do
	[[ -r $f ]] || die "missing $f"
done
# Our own copy of the binary (a rebuild in the tree mid-test would change the
# program under the jobs) and our own cache for the template snapshot that
# tinyvmm makes on first use (removed with $tmp). One job outside Slurm makes
# it now, not while the first array's tasks wait for it, and fails clearly if
# tinyvmm cannot run a job on this host at all.
cp "$tinyvmm" "$tmp/bin/tinyvmm" || die "cannot copy $tinyvmm"
tinyvmm=$tmp/bin/tinyvmm
export TINYVMM_CACHE=$tmp/cache
log "warm-up: one tinyvmm job outside Slurm"
run_bg "$tmp/log/warm-up.out" "$tmp/log/warm-up.out" \
	timeout 300 "$tinyvmm" run --kernel "$kernel" --rootfs "$rootfs" --timeout 100 -- true
case $? in
0) ;;
124) die "the warm-up job did not end within 300 s (host overloaded?)" ;;
*) die "tinyvmm cannot run a job on this host: $(tail -n 3 "$tmp/log/warm-up.out" | tr '\n' ' ')" ;;
esac

# --- the cluster ------------------------------------------------------------------
conf=$tmp/slurm.conf
export SLURM_CONF=$conf

# munged: its own key and socket, found by Slurm through AuthInfo.
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
# Each daemon in its own session (setsid, which execs: we are not a group
# leader), so that a Ctrl-C or a signal to our process group reaches only
# us: slurmctld and slurmd would stop on SIGINT and leave the test to run
# into its timeouts. The cleanup stops them.
setsid munged -F --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" \
	--pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
	--seed-file="$tmp/munge/munged.seed" 2>>"$tmp/log/munged.log" &
daemons+=($!) daemon_names+=(munged)

{
	cat <<EOF
ClusterName=tinyvmm-test
SlurmctldHost=tvctl(10.99.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
StateSaveLocation=$tmp/ctld
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
KillWait=10
SlurmdTimeout=60
EOF
	i=0
	for n in "${nodes[@]}"; do
		i=$((i + 1))
		echo "NodeName=$n NodeAddr=10.99.0.1$i CPUs=1 RealMemory=1000 Feature=kvm State=UNKNOWN"
	done
	echo "PartitionName=vm Nodes=ALL Default=YES MaxTime=30 State=UP"
} >"$conf"

# in NS HOSTNAME CMD...: run CMD in network namespace NS with its own hostname
in_ns() {
	local ns=$1 host=$2; shift 2
	# exec: started with &, $! is then the daemon itself (killed and reaped by pid).
	exec setsid nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}
ctl() { nsenter --net="/run/netns/$ns_ctl" timeout 30 "$@"; } # Slurm clients talk to slurmctld there

ip netns add "$ns_ctl" || die "cannot create network namespace $ns_ctl"
namespaces+=("$ns_ctl")
ip -n "$ns_ctl" link set lo up
ip -n "$ns_ctl" link add br0 type bridge
ip -n "$ns_ctl" addr add 10.99.0.1/24 dev br0
ip -n "$ns_ctl" link set br0 up
i=0
for n in "${nodes[@]}"; do
	i=$((i + 1))
	ns=$ns_prefix-n$i
	ip netns add "$ns" || die "cannot create network namespace $ns"
	namespaces+=("$ns")
	ip -n "$ns" link set lo up
	ip -n "$ns_ctl" link add "v$i" type veth peer name eth0 netns "$ns"
	ip -n "$ns_ctl" link set "v$i" master br0 up
	ip -n "$ns" addr add "10.99.0.1$i/24" dev eth0
	ip -n "$ns" link set eth0 up
done

# munged answers before the daemons that need it start.
for _ in $(seq 50); do [[ -S $tmp/munge/munge.sock ]] && break; sleep 0.1; done
munge -n -S "$tmp/munge/munge.sock" | unmunge -S "$tmp/munge/munge.sock" >/dev/null || die "munged does not answer"

in_ns "$ns_ctl" tvctl slurmctld -D -i -f "$conf" >>"$tmp/log/slurmctld.out" 2>&1 &
daemons+=($!) daemon_names+=(slurmctld)
i=0
for n in "${nodes[@]}"; do
	i=$((i + 1))
	mkdir -p "$tmp/spool/$n"
	in_ns "$ns_prefix-n$i" "$n" slurmd -D -N "$n" -f "$conf" >>"$tmp/log/slurmd-$n.out" 2>&1 &
	daemons+=($!) daemon_names+=("slurmd $n")
done

# daemons_ok: munged, slurmctld and every slurmd still run (else nothing
# more can be tested: the callers stop at once, not after their timeouts)
daemons_ok() {
	local i
	for i in "${!daemons[@]}"; do
		alive "${daemons[i]}" || { log "${daemon_names[i]} (pid ${daemons[i]}) died"; return 1; }
	done
}
# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds
wait_for() {
	local limit=$1 what=$2; shift 2
	local end=$((SECONDS + limit))
	until "$@"; do
		daemons_ok || return 1
		((SECONDS < end)) || { log "timed out after ${limit}s waiting for $what"; return 1; }
		sleep 1
	done
}
nodes_idle() { [[ $(ctl sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$') == "${#nodes[@]}" ]]; }
wait_for 30 "three idle nodes" nodes_idle || die "cluster up: $(ctl sinfo -N 2>&1 | tr '\n' ' ')"
log "cluster up: slurmctld + ${#nodes[@]} slurmd ($(ctl sinfo -h -o '%D nodes, features %f, state %t'))"

# --- the array jobs -----------------------------------------------------------------
work=$tmp/work
results=$work/results
# sbatch_array [--wait] RANGE COMMAND...: submit an array of the template as
# the README's quick start does; sets $submitted to the array job id. With --wait (as in
# the quick start) it returns, within 150 s, when all tasks ended, with the
# highest exit code of the tasks (124: still running). sbatch polls with
# growing pauses (up to 32 s), so the test waits for one array itself.
sbatch_array() {
	local wait=()
	[[ $1 == --wait ]] && { wait=(--wait); shift; }
	local rc
	run_bg "$tmp/sbatch.out" - nsenter --net="/run/netns/$ns_ctl" --wd="$work" timeout 150 env TINYVMM="$tinyvmm" \
		TINYVMM_KERNEL="$kernel" TINYVMM_ROOTFS="$rootfs" TINYVMM_RUN_ARGS="--timeout 100 --ttl 140" \
		sbatch "${wait[@]}" --parsable --array="$1" --time=5 "$root/tools/slurm/tinyvmm-array.sbatch" -- "${@:2}"
	rc=$?
	submitted=$(<"$tmp/sbatch.out")
	return "$rc"
}
# No task of the array is pending, running or completing any more.
array_done() { local out; out=$(ctl squeue -h -j "$1" -o %i 2>/dev/null) && [[ -z $out ]]; }
# task_field JOB TASK FIELD: a field of `scontrol show job JOB_TASK`
task_field() { ctl scontrol -o show job "$1_$2" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p" | head -n1; }
# valid_result FILE EXIT_CODE: the job's result is one JSON object with that
# exit code (top level today; under "result" if the format nests it).
valid_result() {
	python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
code = o.get("exit_code", (o.get("result") or {}).get("exit_code")) if isinstance(o, dict) else None
sys.exit(0 if code == int(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null
}

# 1. Four tasks over three one-CPU nodes: each boots a guest and prints its task id.
log "array of 4 tasks: each boots a guest"
sbatch_array 0-3 python3 -c 'import os; print("task", os.environ["SLURM_ARRAY_TASK_ID"])' ||
	die "sbatch of the first array"
job1=$submitted
wait_for 150 "array $job1" array_done "$job1" || ctl squeue
daemons_ok || die "a daemon died while array $job1 ran"
all_ok=1 nodes_seen=()
for t in 0 1 2 3; do
	state=$(task_field "$job1" "$t" JobState) code=$(task_field "$job1" "$t" ExitCode) node=$(task_field "$job1" "$t" BatchHost)
	f=$results/$job1-$t.json
	log "  task $t: $state exit $code on $node"
	[[ $state == COMPLETED && $code == 0:0 ]] || { all_ok=0; log "  task $t: expected COMPLETED 0:0"; }
	if valid_result "$f" 0 && grep -q "task $t" "$f"; then :; else all_ok=0; log "  task $t: bad result $(head -c 300 "$f" 2>&1)"; fi
	# tinyvmm versions that report their host name see the node's (own UTS namespace).
	host=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("host", ""))' "$f" 2>/dev/null)
	[[ -z $host || $host == "$node" ]] || { all_ok=0; log "  task $t: result says host $host, Slurm says $node"; }
	# ... and versions with a batch id default it to ARRAYJOB-TASK.
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("id") or "")' "$f" 2>/dev/null)
	[[ -z $id || $id == "$job1-$t" ]] || { all_ok=0; log "  task $t: result says id $id, expected $job1-$t"; }
	[[ -n $node ]] && nodes_seen+=("$node")
done
check "array $job1: every task COMPLETED with exit 0 and a valid JSON result" test "$all_ok" = 1
distinct=$(printf '%s\n' "${nodes_seen[@]}" | sort -u | wc -l)
check "array $job1: results came from $distinct nodes ($(printf '%s\n' "${nodes_seen[@]}" | sort -u | tr '\n' ' '))" test "$distinct" -gt 1
side_nodes=$(cat "$results/$job1"-*.slurm.json 2>/dev/null | python3 -c 'import json,sys; print(len({json.loads(l)["node"] for l in sys.stdin}))' 2>/dev/null)
check "array $job1: the result records name more than one node" test "${side_nodes:-0}" -gt 1
agg=$(cd "$work" && python3 "$root/tools/slurm/aggregate.py" results 2>&1)
agg_rc=$?
indent "$agg"
check "aggregate.py: array $job1 all ok (exit 0), CSV with 4 rows" \
	eval '((agg_rc == 0)) && [[ $(wc -l <"$results/$job1.csv") == 5 ]] && grep -q "4 tasks, 4 ok" <<<"$agg"'

# 2. Drain tvn1, then a second array whose task 3 exits 3.
ctl scontrol update nodename=tvn1 state=drain reason=tinyvmm-test
check "tvn1 drained" eval '[[ $(ctl sinfo -h -n tvn1 -o %t) == drain ]]'
log "array of 4 tasks, tvn1 drained, task 3's guest job exits 3"
sbatch_array --wait 0-3 python3 -c 'import os,sys; t=os.environ["SLURM_ARRAY_TASK_ID"]; print("task", t); sys.exit(3 if t == "3" else 0)'
rc=$?
job2=$submitted
daemons_ok || die "a daemon died while array ${job2:-2} ran"
[[ -n $job2 ]] || die "sbatch of the second array"
((rc != 124)) || { log "array $job2 still running after 150 s"; ctl squeue; }
check "array $job2: sbatch --wait returned 3 (highest task exit code)" test "$rc" = 3
on_drained=0 ok=1
for t in 0 1 2 3; do
	state=$(task_field "$job2" "$t" JobState) code=$(task_field "$job2" "$t" ExitCode) node=$(task_field "$job2" "$t" BatchHost)
	log "  task $t: $state exit $code on $node"
	[[ $node == tvn1 ]] && on_drained=1
	if ((t < 3)); then
		[[ $state == COMPLETED && $code == 0:0 ]] && valid_result "$results/$job2-$t.json" 0 || ok=0
	fi
done
check "array $job2: the drained node tvn1 got no task" test "$on_drained" = 0
check "array $job2: tasks 0-2 COMPLETED with exit 0 and valid results" test "$ok" = 1
check "array $job2: task 3 FAILED with tinyvmm's exit code 3 (scontrol)" \
	eval '[[ $(task_field "$job2" 3 JobState) == FAILED && $(task_field "$job2" 3 ExitCode) == 3:0 ]]'
check "array $job2: task 3 left a valid JSON result with exit_code 3" valid_result "$results/$job2-3.json" 3
check "jobcomp log: task 3 of $job2 FAILED with exit code 3" \
	eval 'grep "ArrayJobId=$job2 " "$tmp/jobcomp.txt" | grep "ArrayTaskId=3 " | grep -q "JobState=FAILED.*ExitCode=3:0"'
agg=$(cd "$work" && python3 "$root/tools/slurm/aggregate.py" --job "$job2" results 2>&1)
agg_rc=$?
indent "$agg"
check "aggregate.py: array $job2 flags task 3 failed (exit 1)" \
	eval '((agg_rc == 1)) && grep -q "4 tasks, 3 ok, 1 failed" <<<"$agg" && grep -Eq "^$job2 +3 .* failed +3 +3" <<<"$agg"'

# 3. aggregate.py on damaged results: one missing, one not JSON.
mkdir -p "$tmp/damaged"
cp "$results/$job1"-* "$tmp/damaged/"
rm -f "$tmp/damaged/$job1-1.json" "$tmp/damaged/$job1-1.slurm.json"
echo '{"exit_code": 0, "stdout": "cut sh' >"$tmp/damaged/$job1-2.json"
agg=$(python3 "$root/tools/slurm/aggregate.py" "$tmp/damaged" 2>&1)
agg_rc=$?
indent "$agg"
check "aggregate.py: a missing and a truncated result are flagged (exit 1)" \
	eval '((agg_rc == 1)) && grep -q "4 tasks, 2 ok, 0 failed, 0 error, 1 invalid, 1 missing" <<<"$agg"'

exit 0
