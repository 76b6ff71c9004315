// The htsim side of `bench/bench_engine.py --htsim BIN` (issue 15): N TCP (htsim's
// NewReno TcpSrc) flows over one drop-tail bottleneck of `buf` x BDP, the RTT split
// between a forward and a reverse pipe, starts uniform in [0, 10 ms]. No access
// queues unless the 6th argument is 1: htsim at its fastest (3.0 events per
// bottleneck packet), the harder comparison for fairlab, which models access links.
//
// htsim is not part of fairlab and is never vendored; build it separately:
//   git clone https://github.com/Broadcom/csg-htsim /tmp/htsim && cd /tmp/htsim/sim
//   make -j2 libhtsim.a          # the project's own flags: -O3
//   g++ -O3 -std=c++11 -I. -o /tmp/htsim_dumbbell /path/to/fairlab/bench/htsim_dumbbell.cpp libhtsim.a
// Usage: htsim_dumbbell FLOWS MBITPS RTT_MS BUFFER_BDPS SECONDS [ACCESS]
// Prints one JSON line: flows, wall_s, events, bottleneck_packets, peak_rss_kib.
#include "config.h"
#include <chrono>
#include <iostream>
#include <cstdlib>
#include "network.h"
#include "pipe.h"
#include "eventlist.h"
#include "tcp.h"
#include "queue.h"
using namespace std;
int main(int argc, char **argv) {
    int n = atoi(argv[1]); double mbps = atof(argv[2]); double rtt_ms = atof(argv[3]); double buf = atof(argv[4]); double secs = atof(argv[5]);
    bool access = argc > 6 && atoi(argv[6]);  // per-flow access queue at 10x (off: htsim at its fastest)
    EventList eventlist; eventlist.setEndtime(timeFromSec(secs));
    srand(1);
    Packet::set_packet_size(1500);
    linkspeed_bps rate = speedFromMbps((uint64_t)mbps);
    uint64_t bdp_pkts = (uint64_t)(mbps * 1e6 / 8 * rtt_ms / 1e3 / 1500 * buf + 0.5);
    Queue bneck(rate, memFromPkt(bdp_pkts), eventlist, NULL);
    // args: flows Mbit/s RTT-ms buffer-in-BDPs seconds
    Pipe fwd(timeFromMs(rtt_ms / 2), eventlist), rev(timeFromMs(rtt_ms / 2), eventlist);
    TcpRtxTimerScanner scanner(timeFromMs(10), eventlist);
    vector<TcpSrc*> srcs;
    for (int i = 0; i < n; i++) {
        TcpSrc* src = new TcpSrc(NULL, NULL, eventlist);
        TcpSink* snk = new TcpSink();
        scanner.registerTcp(*src);
        route_t* out = new route_t();
        if (access) out->push_back(new Queue(rate * 10, memFromPkt(10000), eventlist, NULL));
        out->push_back(&bneck); out->push_back(&fwd); out->push_back(snk);
        route_t* in = new route_t();
        in->push_back(&rev); in->push_back(src);
        src->connect(*out, *in, *snk, drand() * timeFromMs(10));
        srcs.push_back(src);
    }
    auto t0 = chrono::steady_clock::now();
    uint64_t events = 0;
    while (eventlist.doNextEvent()) { events++; }
    double wall = chrono::duration<double>(chrono::steady_clock::now() - t0).count();
    uint64_t sent = 0;
    for (auto s : srcs) sent += s->_packets_sent / s->_mss;  // counted in bytes
    uint64_t pkts = sent - bneck.num_drops();
    // Peak RSS as the process itself sees it (VmHWM, KiB).
    long hwm = 0;
    if (FILE* f = fopen("/proc/self/status", "r")) {
        char line[256];
        while (fgets(line, sizeof line, f)) if (sscanf(line, "VmHWM: %ld", &hwm) == 1) break;
        fclose(f);
    }
    printf("{\"flows\": %d, \"wall_s\": %.4f, \"events\": %lu, \"bottleneck_packets\": %lu, \"peak_rss_kib\": %ld}\n", n, wall, events, pkts, hwm);
}
