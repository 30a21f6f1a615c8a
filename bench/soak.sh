#!/usr/bin/env bash
# bench/soak.sh: a soak of kproxy at a steady mixed load, sampled every
# 10 s, judged for trends and plotted.
#
#   bash bench/soak.sh                      # 30 minutes
#   SOAK_DURATION=2m bash bench/soak.sh     # a short try
#
# It builds kproxy and kbench, then starts on 127.0.0.1 (ports
# SOAK_PORT..SOAK_PORT+3, default 29300..29303, below the range the
# kernel picks outgoing ports from, so a closed connection cannot hold one):
#   - kbench kfake: franz-go's kfake broker in its own process (real log,
#     real consumer groups), advertising kproxy's address;
#   - kbench sink: a null OTLP/HTTP collector;
#   - kproxy with tracing at sample_ratio 0.01 to the sink, a rate rule
#     that throttles Produce from client id kbench-soak-hot to 20
#     requests/s, and its admin listener on (/metrics, pprof);
#   - kbench soak: 4 producers at 50 records/s (one Produce each), a
#     producer offering 30/s that the rule throttles, 4 fetchers at 50
#     Fetch/s, a consumer group of 3 members that commit every second (one
#     is replaced every minute: leave, join, rebalance), and 100 clients
#     that connect (franz-go opens three connections each, about 300 in
#     all), send Metadata and a Produce, hold for 5-15 s, close, and start
#     over: about 30 connections opened and closed a second. (Every closed
#     connection sits in TIME_WAIT for a minute on a loopback port, so a
#     much faster churn would take many of the ports other programs here
#     listen on.) Every 10 s it writes kproxy's RSS, goroutines, open files
#     and CPU, and the load's p99, rate and errors, to a CSV.
# Then kbench trend fits a least-squares line to each series over the last
# 20 minutes (a short run: its last two thirds) and fails if one grew, and
# gnuplot draws one PNG per series. The load, the broker and the sink run
# under nice (SOAK_NICE, default 10); kproxy does not.
#
# Needs Go and gnuplot (Debian: apt-get install gnuplot-nox). Writes into
# SOAK_OUT (default bench/soak): soak.csv, summary.txt, rss.png,
# goroutines.png, fds.png, p99.png, cpu.png. Stops everything it started.
# SOAK_REPLOT=1 judges and plots SOAK_OUT/soak.csv again without a run.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in go gnuplot; do
	command -v "$tool" >/dev/null || {
		echo "bench/soak.sh: $tool not found; install it (Debian: apt-get install gnuplot-nox; Go from go.dev)" >&2
		exit 1
	}
done

DURATION=${SOAK_DURATION:-30m}
INTERVAL=${SOAK_INTERVAL:-10s}
WINDOW=${SOAK_WINDOW:-20m}
PORT=${SOAK_PORT:-29300}
NICE=${SOAK_NICE:-10}
OUT=${SOAK_OUT:-bench/soak}
BROKER=127.0.0.1:$PORT
PROXY=127.0.0.1:$((PORT + 1))
ADMIN=127.0.0.1:$((PORT + 2))
SINK=127.0.0.1:$((PORT + 3))

work=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# up HOST:PORT LOG: wait until something accepts there, or fail with the
# log of what should have listened. These ports are in Linux's ephemeral
# range, so a closed connection in TIME_WAIT can hold one for a minute:
# "address already in use" means try another SOAK_PORT.
up() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench/soak.sh: nothing listening on $1 after 10s; its log:" >&2
	cat "$2" >&2
	exit 1
}

# soak starts the broker, the sink and kproxy, runs the load, judges the
# CSV and writes the summary; status is 1 if the load or the trend failed.
soak() {
	nice -n "$NICE" "$work/kbench" kfake --listen "$BROKER" --advertise "$PROXY" --topic kbench-soak --partitions 8 >"$work/kfake.log" 2>&1 &
	pids+=($!)
	nice -n "$NICE" "$work/kbench" sink --listen "$SINK" >"$work/sink.log" 2>&1 &
	pids+=($!)
	cat >"$work/kproxy.yaml" <<-YAML
	proxy:
	  listen: $PROXY
	  upstream: $BROKER
	admin:
	  listen: $ADMIN
	  pprof: true
	log:
	  level: warn
	tracing:
	  enabled: true
	  endpoint: http://$SINK
	  protocol: http/protobuf
	  sample_ratio: 0.01
	policies:
	  rules:
	    - name: soak-hot-producer
	      match: {apis: [Produce], client_id: kbench-soak-hot}
	      limits: {requests_per_second: 20}
	      action: throttle
	YAML
	up "$BROKER" "$work/kfake.log"
	up "$SINK" "$work/sink.log"
	"$work/kproxy" run --config "$work/kproxy.yaml" 2>"$work/kproxy.log" &
	kp=$!
	pids+=($kp)
	up "$PROXY" "$work/kproxy.log"
	up "$ADMIN" "$work/kproxy.log"

	echo "== soak: $DURATION through kproxy (pid $kp) at $PROXY; samples every $INTERVAL to $OUT/soak.csv"
	nice -n "$NICE" "$work/kbench" soak --bootstrap "$PROXY" --topic kbench-soak --partitions 8 \
		-t "$DURATION" --interval "$INTERVAL" --pid "$kp" --admin "$ADMIN" --csv "$OUT/soak.csv" \
		| tee "$work/soak.out" || status=1

	# kproxy's own view of the run, for the summary: the rule's throttles and
	# the spans it exported or dropped.
	curl -sf "http://$ADMIN/metrics" 2>/dev/null | grep -E '^kproxy_(policy_throttled_total|trace_spans_[a-z_]+_total|connections_[a-z_]+|requests_failed_total)' >"$work/metrics.txt" || true

	echo
	echo "== trend over the last $WINDOW (least squares; a series fails if its fitted change passes the limit)"
	"$work/kbench" trend --csv "$OUT/soak.csv" --window "$WINDOW" | tee "$work/trend.out" || status=1

	{
		echo "kproxy soak: $DURATION, $(date -u +%Y-%m-%dT%H:%MZ), built from commit $commit"
		echo
		cat "$work/soak.out" | grep -v '^ *[0-9.]*s  rss' || true
		echo
		cat "$work/trend.out"
		echo
		echo "kproxy metrics at the end:"
		cat "$work/metrics.txt"
	} >"$OUT/summary.txt"
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
go build -o "$work/kbench" ./cmd/kbench
status=0
if [[ ${SOAK_REPLOT:-} == 1 ]]; then
	"$work/kbench" trend --csv "$OUT/soak.csv" --window "$WINDOW" || status=1
else
	go build -o "$work/kproxy" ./cmd/kproxy
	mkdir -p "$OUT"
	soak
fi

# The judged window, as kbench trend chooses it: the last WINDOW, or the
# last two thirds of a run shorter than 1.5 windows (elapsed_s counts from
# the load's start).
seconds() { # 90s, 2m, 1h -> seconds
	case $1 in *h) echo $((${1%h} * 3600)) ;; *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac
}
last=$(awk -F, 'NR > 1 { l = $1 } END { print l + 0 }' "$OUT/soak.csv")
from=$(awk -v l="$last" -v w="$(seconds "$WINDOW")" 'BEGIN { if (l < 1.5 * w) w = l * 2 / 3; print l - w }')

# plot COLUMN FILE TITLE YLABEL [MORE]: one series against minutes, the
# judged window shaded; MORE adds lines under it ("F ... title 'x', ").
plot() {
	gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 900,420 font 'sans,10'
set output '$OUT/$2'
set title '$3 (shaded: the window judged for a trend)'
set xlabel 'minutes'
set ylabel '$4'
set yrange [0:*]
set grid
set key outside bottom center horizontal
set xrange [0:*]
set object 1 rect from $from/60.0, graph 0 to $last/60.0, graph 1 behind fc rgb '#e8e8e8' fs solid 1.0 noborder
F = '$OUT/soak.csv'
plot ${5:-} F every ::1 using (\$1/60):$1 with lines lw 2 lc rgb '#1f5fa8' title '$3'
GP
}
plot 2 rss.png "kproxy RSS" MiB
plot 3 goroutines.png "kproxy goroutines" goroutines
plot 4 fds.png "kproxy open files" fds
plot 5 p99.png "load p99 (produce, fetch, commit)" ms \
	"F every ::1 using (\$1/60):9 with lines lc rgb '#aaaaaa' title 'produce', F every ::1 using (\$1/60):11 with lines lc rgb '#d0a070' title 'fetch', F every ::1 using (\$1/60):12 with lines lc rgb '#90c8a0' title 'commit', "
plot 14 cpu.png "kproxy CPU (% of one core)" "%" \
	"F every ::1 using (\$1/60):(\$15*10) with lines lc rgb '#aaaaaa' title 'machine load average x 10', "

echo
echo "CSV:     $OUT/soak.csv"
echo "summary: $OUT/summary.txt"
echo "plots:   $OUT/rss.png $OUT/goroutines.png $OUT/fds.png $OUT/p99.png $OUT/cpu.png"
exit $status
