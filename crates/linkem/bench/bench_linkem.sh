#!/usr/bin/env bash
# linkem benchmarks (not tests): added-delay accuracy, forwarding throughput with no
# rate limit (and the kernel's own bridge in the same topology, for the endpoints'
# ceiling), and rate accuracy. Needs root, iproute2, iperf3, ping, ethtool, python3.
#
#   bash crates/linkem/bench/bench_linkem.sh [SECONDS_PER_IPERF_RUN]
#
# Topology: sender ns ── router ns (linkem) ── receiver ns, addresses from RFC 5737's
# documentation range, only inside these namespaces. Every namespace is named
# fl-lktest-b<NN>-* and removed on every exit path (trap), with the processes this
# script started (killed by their own pids).
set -euo pipefail

DUR=${1:-10}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-linkem}
[ "$(id -u)" = 0 ] || { echo "bench_linkem: needs root (network namespaces)"; exit 1; }
for t in ip iperf3 ping ethtool python3 ss; do
  command -v $t >/dev/null || { echo "bench_linkem: $t not installed (apt-get install iproute2 iperf3 iputils-ping ethtool)"; exit 1; }
done
(cd "$ROOT" && cargo build --release -q -p linkem)
LINKEM=$CARGO_TARGET_DIR/release/linkem

P=fl-lktest-b$(printf %02d $(( $$ % 100 )))
S=$P-s R=$P-r M=$P-m
WORK=$(mktemp -d /tmp/fl-lktest-bench.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in $S $R $M; do ip netns del $ns 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for ns in $S $R $M; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add ${P}sa netns $S type veth peer name ${P}ma netns $M
ip link add ${P}rb netns $R type veth peer name ${P}mb netns $M
ip -n $S addr add 192.0.2.1/24 dev ${P}sa
ip -n $R addr add 192.0.2.2/24 dev ${P}rb
for x in "$S ${P}sa" "$R ${P}rb" "$M ${P}ma" "$M ${P}mb"; do set -- $x; ip -n $1 link set $2 up; done
# Per-packet fidelity: the hosts must hand linkem MTU-sized frames, not 64 KB TSO
# aggregates (linkem forwards those but queues each as one packet).
ip netns exec $S ethtool -K ${P}sa tso off gso off gro off >/dev/null
ip netns exec $R ethtool -K ${P}rb tso off gso off gro off >/dev/null

start_linkem() { # rate_bps|null one_way_ns buffer_bytes
  cat > $WORK/cfg.json <<EOF
{"run_id": "$P", "sender_ports": [{"iface": "${P}ma", "one_way_delay_ns": $2}],
 "receiver_port": {"iface": "${P}mb"}, "rate_bps": $1, "reverse_rate_bps": null,
 "buffer": {"bytes": $3}, "qdisc": "droptail", "params": {}, "seed": 1,
 "sample_interval_ns": 1000000000, "mean_packet_bytes": 1500, "reference_rtt_ns": $(( 2 * $2 ))}
EOF
  ip netns exec $M "$LINKEM" --config $WORK/cfg.json --stats $WORK/stats.jsonl > $WORK/linkem.out 2> $WORK/linkem.err &
  LINKEM_PID=$!
  PIDS+=($LINKEM_PID)
  for _ in $(seq 100); do grep -q ready $WORK/linkem.out 2>/dev/null && return; sleep 0.05; done
  echo "linkem did not start:"; cat $WORK/linkem.err; exit 1
}
stop_linkem() {
  kill -TERM $LINKEM_PID; wait $LINKEM_PID || true
  echo "    $(cat $WORK/linkem.err)"
}

iperf() { # extra iperf3 client args...
  ip netns exec $R iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local spid=$!; PIDS+=($spid); sleep 0.3
  ip netns exec $S iperf3 -c 192.0.2.2 -p 5201 -J "$@" > $WORK/iperf.json 2> $WORK/iperf.err
  wait $spid || true
}
goodput_bps() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' $WORK/iperf.json; }

pct() { python3 - "$@" <<'EOF'
import sys
v = sorted(float(x) for x in open(sys.argv[1]).read().split())
q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
print(f"n={len(v)} min={v[0]:.3f} median={q(0.5):.3f} p99={q(0.99):.3f} max={v[-1]:.3f} ms")
EOF
}

echo "== linkem benchmarks, $(date -u +%FT%TZ) ($(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)) =="

echo "-- 1. delay accuracy: 100 Mbit/s, one-way 25 ms (configured RTT 50 ms), buffer 1 BDP"
start_linkem 100000000 25000000 625000
ip netns exec $S ping -n -c 201 -i 0.01 192.0.2.2 | grep -o 'time=[0-9.]*' | cut -d= -f2 | tail -n +2 > $WORK/ping.txt
echo "    ping (idle link): $(pct $WORK/ping.txt)"
# TCP RTT as the sender's kernel sees it, sampled from ss -ti during a bulk run.
( for _ in $(seq $(( DUR * 4 ))); do ip netns exec $S ss -tin dst 192.0.2.2 2>/dev/null | grep -o 'minrtt:[0-9.]*\| rtt:[0-9.]*' || true; sleep 0.25; done > $WORK/ss.txt ) &
SSPID=$!; PIDS+=($SSPID)
iperf -t $DUR
wait $SSPID || true
grep minrtt $WORK/ss.txt | cut -d: -f2 > $WORK/minrtt.txt || true
grep ' rtt' $WORK/ss.txt | cut -d: -f2 > $WORK/srtt.txt || true
[ -s $WORK/minrtt.txt ] && echo "    TCP minrtt (ss -ti): $(pct $WORK/minrtt.txt)"
[ -s $WORK/srtt.txt ] && echo "    TCP srtt under load (ss -ti, includes queueing): $(pct $WORK/srtt.txt)"
echo "    goodput $(python3 -c "print(f'{$(goodput_bps)/1e6:.2f}')") Mbit/s"
stop_linkem

# Throughput figures are Gbit/s of Ethernet frames, the bits linkem forwards: with
# MTU 1500 a 1448-byte TCP payload (MSS with timestamps) is a 1514-byte frame and a
# 1472-byte UDP payload a 1514-byte frame.
tcp_frames() { python3 -c "print(f'{$(goodput_bps) * 1514 / 1448 / 1e9:.3f}')"; }
cpu_ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
# linkem's own count over the busy 1-s samples from stats line $1 on (all but the
# first and last, which are partly idle): frames = IP bytes + 14-byte Ethernet
# header each.
linkem_gbps() { python3 - $WORK/stats.jsonl $1 <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
d = [(b["t_ns"] - a["t_ns"], 8 * (b["forwarded_bytes"] - a["forwarded_bytes"] + 14 * (b["forwarded_pkts"] - a["forwarded_pkts"]))) for a, b in zip(rows, rows[1:])]
busy = [bits / ns for ns, bits in d if bits > 0][1:-1] or [0.0]
print(f"{sum(busy) / len(busy):.3f}")
EOF2
}
forwarding() { # label: TCP with 1 and 4 flows, then UDP from one sender as fast as it can
  iperf -t $DUR
  echo "    $1 TCP, 1 flow:  $(tcp_frames) Gbit/s of frames (goodput $(python3 -c "print(f'{$(goodput_bps)/1e9:.3f}')"))"
  iperf -t $DUR -P 4
  echo "    $1 TCP, 4 flows: $(tcp_frames) Gbit/s of frames (goodput $(python3 -c "print(f'{$(goodput_bps)/1e9:.3f}')"))"
  UDP_FROM=$(wc -l < $WORK/stats.jsonl 2>/dev/null || echo 0)
  iperf -t $DUR -u -l 1472 -b 0 -w 4M
  python3 - $WORK/iperf.json "$1" <<'EOF2'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
s = e["sum"]
sent = s["bits_per_second"] * 1514 / 1472
got = sent * (1 - s["lost_percent"] / 100)
print(f"    {sys.argv[2]} UDP, 1 sender:  offered {sent/1e9:.3f}, received {got/1e9:.3f} Gbit/s of frames ({s['lost_percent']:.1f} % lost on the way)")
EOF2
}

echo "-- 2. forwarding, no rate limit, one-way 1 ms, 4 MB buffer (Gbit/s of 1514-byte frames)"
start_linkem null 1000000 4000000
T0=$(cpu_ticks $LINKEM_PID); S0=$(date +%s.%N)
forwarding "linkem:"
echo "    linkem: in the UDP run it forwarded $(linkem_gbps $UDP_FROM) Gbit/s of frames (its own stats); linkem CPU over section 2: $(python3 -c "print(f'{($(cpu_ticks $LINKEM_PID) - $T0) / 100 / ($(date +%s.%N) - $S0) * 100:.0f}')") % of one core"
stop_linkem
echo "-- 2b. the same through the kernel's own bridge instead of linkem (same hosts and offloads): the endpoints' ceiling"
ip -n $M link add ${P}br type bridge
for i in ${P}ma ${P}mb; do ip -n $M link set $i master ${P}br; done
ip -n $M link set ${P}br up
forwarding "kernel bridge:"
ip -n $M link del ${P}br

for RATE in 100000000 1000000000; do
  echo "-- 3. rate accuracy: configured $(( RATE / 1000000 )) Mbit/s, one-way 5 ms, buffer 2 BDP"
  start_linkem $RATE 5000000 $(( RATE / 8 * 2 / 100 ))
  iperf -t $DUR -O 2
  G=$(goodput_bps)
  # Each 1448-byte payload (MSS with timestamps) costs a 1514-byte frame on the
  # link linkem emulates (Ethernet header + IPv4 + TCP + timestamps option).
  python3 -c "
r=$RATE; g=$G; wire=g*1514/1448
print(f'    TCP: iperf3 goodput {g/1e6:.2f} Mbit/s -> frames {wire/1e6:.2f} Mbit/s = {100*wire/r:.2f}% of configured (TCP leaves the link idle after losses)')"
  # UDP offered above the rate keeps the link busy: this is the rate limiter itself.
  # 1472-byte datagrams are 1514-byte frames; 4 MB socket buffers so the receiving
  # iperf3 is not what drops.
  iperf -t $DUR -u -l 1472 -b $(( RATE * 12 / 10 )) -w 4M
  python3 - $WORK/iperf.json $RATE <<'EOF2'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
r = int(sys.argv[2])
sent = e.get("sum_sent", e["sum"])
recv = e.get("sum_received", e["sum"])
g = recv["bits_per_second"]
wire = g * 1514 / 1472
print(f"    UDP: offered {sent['bits_per_second']/1e6:.2f} Mbit/s, received {g/1e6:.2f} Mbit/s -> frames {wire/1e6:.2f} Mbit/s = {100*wire/r:.2f}% of configured")
EOF2
  kill -TERM $LINKEM_PID; wait $LINKEM_PID || true
  # linkem's own count over the UDP run's busy seconds: frames = IP bytes + 14-byte
  # Ethernet header each.
  python3 - $WORK/stats.jsonl $RATE <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][:-1]
rate = int(sys.argv[2])
d = [(b["t_ns"] - a["t_ns"], 8 * (b["forwarded_bytes"] - a["forwarded_bytes"] + 14 * (b["forwarded_pkts"] - a["forwarded_pkts"]))) for a, b in zip(rows, rows[1:])]
best = sorted(bits / ns * 1e9 for ns, bits in d)[-3:]
print("    linkem stats, 3 busiest 1-s samples: " + ", ".join(f"{x/1e6:.2f}" for x in best) + f" Mbit/s of frames = {100*best[0]/rate:.2f}..{100*best[-1]/rate:.2f}% of configured")
EOF2
  echo "    $(cat $WORK/linkem.err)"
done
echo "== done (load average: $(cut -d' ' -f1-3 /proc/loadavg)) =="
