# Helpers for /fairlab/run.sh (sourced by /init). Every tool is called by its full
# path: busybox's sh would otherwise run its own `ip`/`tc` applets.
IP=/usr/sbin/ip
TC=/usr/sbin/tc
ETHTOOL=/usr/sbin/ethtool
IPERF3=/usr/bin/iperf3
DCCPGEN=/usr/bin/fairlab-dccpgen

# The first failure ends the run: its sentence goes to error.txt and the host
# reports it; later steps are skipped.
fl_fail() {
  [ -f $RES/error.txt ] || echo "$*" > $RES/error.txt
  exit 1
}

# Monotonic guest time in ns (CLOCK_MONOTONIC, which under -icount is virtual time).
fl_now() {
  sed -n 's/^now at \([0-9]*\) nsecs$/\1/p;3q' /proc/timer_list
}

# Sleep until monotonic time $1 (ns); returns at once if it has passed.
fl_sleep_until() {
  _now=$(fl_now)
  _d=$(($1 - _now))
  [ $_d -le 0 ] && return 0
  sleep "$((_d / 1000000000)).$(printf %09d $((_d % 1000000000)))"
}

fl_ns() {
  _ns=$1; shift
  $IP netns exec "$_ns" "$@"
}

# Load modules in the given order; a module that does not load is an error (a run
# that silently lacks a module is a different experiment).
fl_load_modules() {
  for m in $(cat /fairlab/modules); do
    out=$(insmod /lib/modules/$m.ko 2>&1) || fl_fail "module $m did not load: $out"
  done
}

fl_boot_checks() {
  (
    fl_load_modules
    # High-resolution timers: without them the guest ticks every 4 ms (HZ 250) and
    # paced senders such as BBR collapse (docs/vm.md).
    grep -q 'hres_active.*: 1' /proc/timer_list \
      || fl_fail "the guest kernel runs without high-resolution timers (hres_active 0 in /proc/timer_list); QEMU needs -cpu ...,+arat"
    cat /proc/modules > $RES/modules.txt
    uname -r > $RES/uname.txt
    cat /sys/devices/system/clocksource/clocksource0/current_clocksource > $RES/clocksource.txt
    cat /proc/cmdline > $RES/cmdline.txt
  ) || true
}

# Sample the bottleneck's qdisc counters at t0 + k*interval until told to stop.
# usage: fl_sampler NS DEV T0_NS INTERVAL_NS COUNT
fl_sampler() {
  _k=1
  while [ $_k -le $5 ]; do
    fl_sleep_until $(($3 + _k * $4))
    [ -f $RES/stop-sampler ] && break
    echo "T $(fl_now)" >> $RES/qdisc-samples.txt
    fl_ns $1 $TC -s -j qdisc show dev $2 >> $RES/qdisc-samples.txt
    echo >> $RES/qdisc-samples.txt
    _k=$((_k + 1))
  done
}

# Start one client at monotonic time $2 (ns) and stamp its launch in launch-$1.
# usage: fl_launch K T_NS NS ARGV...
fl_launch() {
  _k=$1; _t=$2; _ns=$3; shift 3
  (
    fl_sleep_until $_t
    echo "$(fl_now)" > $RES/launch-$_k
    exec $IP netns exec "$_ns" "$@"
  ) > $RES/client-$_k.out 2> $RES/client-$_k.err &
  echo $! > $RES/client-$_k.pid
}

# Wait until every TCP port in $2... is listening in namespace $1 (bounded), read
# from /proc/net/tcp and tcp6 (iperf3 listens on a dual-stack IPv6 socket; state
# 0A = LISTEN; ports in hex). DCCP servers have no such
# table: for them the fixed lead before t0 is the wait.
fl_wait_listening() {
  _ns=$1; shift
  _tries=0
  while :; do
    _have=$(fl_ns $_ns cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "0A" { split($2, a, ":"); print a[2] }')
    _ok=1
    for p in "$@"; do
      _hex=$(printf %04X $p)
      echo "$_have" | grep -q "^$_hex\$" || _ok=0
    done
    [ $_ok = 1 ] && return 0
    _tries=$((_tries + 1))
    [ $_tries -gt 200 ] && fl_fail "the traffic servers were not listening after 2 s (ports $*)"
    sleep 0.01
  done
}

# Mount tracefs (the per-ACK and the queue trace both need it; mounting twice is fine).
fl_tracefs() {
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || [ -d /sys/kernel/tracing/events ] || fl_fail "could not mount tracefs"
}

# Record the senders' TCP state per received segment (the tcp:tcp_probe tracepoint,
# which fires for each segment an established socket receives) on CLOCK_MONOTONIC,
# like fl_now. The filter keeps the senders' side (destination port a traffic
# server's) and whatever FILTER adds: only the first round trip of each connection
# (cwnd at its initial value, ssthresh infinite), which dates each flow's first data
# segment (runner.data_starts). Without a FILTER (--tcp-probe) every ACK is kept,
# in a trace buffer of BUFFER_KB that the host sized for the run.
# usage: fl_trace_start FIRST_PORT LAST_PORT BUFFER_KB [FILTER]
fl_trace_start() {
  _t=/sys/kernel/tracing
  fl_tracefs
  [ -d $_t/events/tcp/tcp_probe ] || fl_fail "the guest kernel has no tcp:tcp_probe tracepoint"
  echo mono > $_t/trace_clock || fl_fail "the guest kernel has no mono trace clock"
  echo $3 > $_t/buffer_size_kb || fl_fail "could not size the trace buffer ($3 KB)"
  _f="dport >= $1 && dport <= $2"
  [ -n "${4:-}" ] && _f="$_f && $4"
  echo "$_f" > $_t/events/tcp/tcp_probe/filter || fl_fail "could not filter tcp_probe"
  echo 1 > $_t/events/tcp/tcp_probe/enable || fl_fail "could not enable tcp_probe"
  echo 1 > $_t/tracing_on
}

# The trace leaves compressed (a million ACKs are ~250 MB of text, more than the
# guest can hold twice); the flows have ended, so this costs no measured time.
fl_trace_stop() {
  _t=/sys/kernel/tracing
  echo 0 > $_t/tracing_on
  cat $_t/per_cpu/cpu0/stats > $RES/tcp_probe-stats.txt
  cat $_t/trace | gzip -n > $RES/tcp_probe.txt.gz
}

# The first iperf3 of a boot costs about a second of virtual time before it
# connects (loading and relocating its libraries; later ones connect within their
# handshakes' round trips). Pay it before t0 with a tiny test on the receiver's
# loopback, so a flow scheduled at t = 0 does not start a second late.
fl_warm_up() {
  fl_ns d $IPERF3 -s -p 5999 -1 > /dev/null 2>&1 &
  _w=$!
  fl_wait_listening d 5999
  fl_ns d $IPERF3 -c 127.0.0.1 -p 5999 -n 1K > /dev/null 2>&1 || fl_fail "the iperf3 warm-up test failed"
  wait $_w
}

# usage: fl_collect_final NAMESPACE... (each one's TCP counters are kept)
fl_collect_final() {
  for _n in "$@"; do
    fl_ns $_n cat /proc/net/snmp /proc/net/netstat > $RES/netstat-$_n.txt 2>&1
  done
  fl_ns r $TC -s -d -j qdisc show > $RES/qdisc-final.json 2>&1
  fl_ns r $TC -s -d -j class show dev rd > $RES/class-final.json 2>&1
  fl_ns s0 /bin/sysctl -a 2>/dev/null | grep '^net\.ipv4\.tcp_' > $RES/sysctl-sender.txt
  fl_ns d /bin/sysctl -a 2>/dev/null | grep '^net\.ipv4\.tcp_' > $RES/sysctl-receiver.txt
  cat /proc/modules > $RES/modules-end.txt
  # Packets a veth handed on but the next namespace's input backlog refused count as
  # the sender veth's tx drops (runner.off_path_drops).
  for _n in "$@" r; do
    fl_ns $_n $IP -j -s link show > $RES/links-$_n.json 2>&1
  done
}

fl_export() {
  echo "$(fl_now)" > $RES/t_end
  cd $RES && tar cf - . | gzip -9 -n > /tmp/res.tar.gz
  _sum=$(sha256sum /tmp/res.tar.gz | cut -d' ' -f1)
  echo "@@FAIRLAB-RESULT-BEGIN"
  base64 /tmp/res.tar.gz
  echo "@@FAIRLAB-RESULT-END $_sum"
}
