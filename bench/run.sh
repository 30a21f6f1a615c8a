#!/usr/bin/env bash
# bench/run.sh: every figure in BENCHMARKS.md, in one run on this machine.
# Needs go, socat and haproxy (Debian: apt-get install socat haproxy).
# Everything listens on 127.0.0.1: the fixed ports are below the ephemeral
# range, and the kproxies compare starts take free ports. Everything
# started here is stopped on exit. Takes about 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

# bash bench/run.sh hostile runs the hostile section alone, which needs
# only go; bash bench/run.sh tls runs the TLS section alone (go, haproxy);
# bash bench/run.sh cluster runs the cluster mode section alone (go);
# bash bench/run.sh plain runs the plaintext shapes and tracing alone
# (go, socat, haproxy).
tools=(go socat haproxy)
[[ ${1:-} == hostile || ${1:-} == cluster ]] && tools=(go)
[[ ${1:-} == tls ]] && tools=(go haproxy)
for tool in "${tools[@]}"; do
	command -v "$tool" >/dev/null || { echo "bench/run.sh: $tool not found; install it (Debian: apt-get install socat haproxy)" >&2; exit 1; }
done

T=${KBENCH_T:-3s}        # duration of one run
ROUNDS=${KBENCH_ROUNDS:-3}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
	[[ -f $work/haproxy.pid ]] && kill "$(cat "$work/haproxy.pid")" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# up HOST PORT: wait until something accepts there, or fail.
up() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench/run.sh: nothing listening on $1:$2 after 10s" >&2
	exit 1
}

# hostile: victims beside a decompression bomb, an oversize storm and
# partial-frame hogs (kbench hostile), through a kproxy with every budget
# set: tracing with links.decompress on (to a null OTLP sink), a 1 MiB
# max_request_bytes rule, and a 256 MiB max_buffered_bytes.
hostile() {
	echo "== hostile clients: victims' p99 and kproxy's RSS under attack (max_buffered_bytes 256 MiB)"
	"$kb" broker --listen 127.0.0.1:29198 >/dev/null &
	pids+=($!)
	"$kb" sink --listen 127.0.0.1:29199 >/dev/null &
	pids+=($!)
	cat >"$work/hostile.yaml" <<YAML
proxy:
  listen: 127.0.0.1:29200
  upstream: 127.0.0.1:29198
  max_buffered_bytes: 268435456
admin:
  listen: ""
log:
  level: error
tracing:
  enabled: true
  endpoint: http://127.0.0.1:29199
  protocol: http/protobuf
  links:
    decompress: true
    child_of_single_record: true
policies:
  rules:
    - name: produce-1mib
      match: {apis: [Produce]}
      limits: {max_request_bytes: 1048576}
      action: reject
YAML
	up 127.0.0.1 29198
	up 127.0.0.1 29199
	"$work/kproxy" run --config "$work/hostile.yaml" &
	local kp=$!
	pids+=($kp)
	up 127.0.0.1 29200
	"$kb" hostile --addr 127.0.0.1:29200 --pid "$kp" -t "$T" --budget 268435456
	kill "$kp"
	wait "$kp" || true
	echo
}

# tls: TLS on both sides of the proxy (load -> proxy -> null broker, every
# hop verified against one CA kbench certs makes), kproxy with tls.listener
# and tls.upstream against HAProxy with ssl on bind and server.
tls() {
	"$kb" certs --dir "$work/tls" >/dev/null
	KBENCH_TLS=$work/tls haproxy -D -p "$work/haproxy-tls.pid" -f bench/haproxy-tls.cfg
	pids+=("$(cat "$work/haproxy-tls.pid")")
	local hp
	hp=$(cat "$work/haproxy-tls.pid")
	tcompare() {
		"$kb" compare --tls --tls-dir "$work/tls" --broker-listen 127.0.0.1:29102 --kproxy-bin "$work/kproxy" \
			--other "haproxy-ssl=127.0.0.1:29105,pid=$hp" -t "$T" --rounds "$ROUNDS" "$@" \
			2>"$work/compare.log" || { cat "$work/compare.log" >&2; exit 1; }
		echo
	}
	echo "== TLS both sides: 1 connection, 1 request at a time (added latency)"
	tcompare -c 1 -d 1 -s 113
	echo "== TLS both sides: 64 connections x 8 in flight, small Produce"
	tcompare -c 64 -d 8 -s 113
	echo "== TLS both sides: 1 MiB Produce, 4 connections x 4 in flight (MB/s)"
	tcompare -c 4 -d 4 -s 1048576
	kill "$hp"
}

# cluster: a kproxy in cluster mode (one node port, for the null broker's
# node id) beside the single-broker one, loaded through its node port in
# the same rounds. Produce v10 and Fetch v16 are the first versions whose
# responses can carry KIP-951 NodeEndpoints, so the address rewriter walks
# every one. Many short rounds: the ratio sought is near 100%, and compare
# prints the per-round median with its 95% confidence interval, which
# needs many rounds to be narrower than the 5% being judged.
cluster() {
	local rounds=${KBENCH_CLUSTER_ROUNDS:-31}
	ccompare() {
		"$kb" compare --cluster --broker-listen 127.0.0.1:29112 --kproxy-bin "$work/kproxy" -t "${KBENCH_CLUSTER_T:-1s}" --rounds "$rounds" "$@" \
			2>"$work/compare.log" || { cat "$work/compare.log" >&2; exit 1; }
		echo
	}
	echo "== cluster mode: 64 connections x 8 in flight, small Produce v10"
	ccompare -c 64 -d 8 -s 113
	echo "== cluster mode: 1 connection x 64 in flight, small Produce v10"
	ccompare -c 1 -d 64 -s 113
	echo "== cluster mode: 1 MiB Produce v10, 4 connections x 4 in flight"
	ccompare -c 4 -d 4 -s 1048576
	echo "== cluster mode: 64 connections x 8 in flight, Fetch v16 of 113 bytes of records"
	ccompare --api fetch -c 64 -d 8 -s 113
	echo "== cluster mode: 1 connection x 64 in flight, Fetch v16 of 113 bytes of records"
	ccompare --api fetch -c 1 -d 64 -s 113
	echo "== cluster mode: Fetch v16 of 1 MiB of records, 4 connections x 4 in flight"
	ccompare --api fetch -c 4 -d 4 -s 1048576
	echo "== cluster mode: what the address rewriter costs per response (go test -bench ./cluster/)"
	go test -run XXX -bench . -benchmem ./cluster/ | grep -E '^(Benchmark|ok)'
	echo
}

# plain: the plaintext shapes against HAProxy and socat, and tracing.
plain() {
	# L4 proxies in front of the null broker compare starts on 127.0.0.1:29092.
	socat TCP-LISTEN:29094,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:29092 2>"$work/socat.log" &
	pids+=($!)
	haproxy -D -p "$work/haproxy.pid" -f bench/haproxy.cfg
	up 127.0.0.1 29094
	up 127.0.0.1 29095
	others=(--other socat=127.0.0.1:29094 --other "haproxy=127.0.0.1:29095,pid=$(cat "$work/haproxy.pid")")
	# compare prints its table; its progress lines and the kproxies' logs go to
	# a file that is shown if it fails.
	compare() {
		"$kb" compare --broker-listen 127.0.0.1:29092 --kproxy-bin "$work/kproxy" -t "$T" --rounds "$ROUNDS" "$@" \
			2>"$work/compare.log" || { cat "$work/compare.log" >&2; exit 1; }
		echo
	}

	echo "== 64 connections x 8 in flight, small Produce (throughput, CPU per request)"
	compare "${others[@]}" -c 64 -d 8 -s 113
	echo "== 1 connection, 1 request at a time (added latency)"
	compare "${others[@]}" -c 1 -d 1 -s 113
	echo "== 1 connection x 64 in flight"
	compare "${others[@]}" -c 1 -d 64 -s 113
	echo "== 1 MiB Produce, 4 connections x 4 in flight (MB/s)"
	compare "${others[@]}" -c 4 -d 4 -s 1048576
	echo "== tracing every request (OTLP/HTTP to a null sink), 64 x 8"
	compare --traced --trace-ratio 1 -c 64 -d 8 -s 113
	echo "== tracing 1 request in 100, 64 x 8"
	compare --traced --trace-ratio 0.01 -c 64 -d 8 -s 113
	echo "== tracing 1 request in 20, 64 x 8"
	compare --traced --trace-ratio 0.05 -c 64 -d 8 -s 113
	echo "== tracing 1 request in 20 with propagation.inject (sampled produces get a traceparent), 64 x 8"
	compare --traced --trace-ratio 0.05 --inject -c 64 -d 8 -s 113
	echo "== tracing every request at a fixed offered load: 50,000 req/s over 64 connections"
	compare --traced --trace-ratio 1 --rate 50000 -c 64 -d 8 -s 113
}

go build -o "$work/kproxy" ./cmd/kproxy
go build -o "$work/kbench" ./cmd/kbench
kb=$work/kbench
case ${1:-} in
hostile)
	hostile
	exit 0
	;;
tls)
	echo "haproxy $(haproxy -v | head -1 | cut -d' ' -f3), $(go version | cut -d' ' -f3)"
	tls
	exit 0
	;;
plain)
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(go version | cut -d' ' -f3)"
	plain
	exit 0
	;;
cluster)
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(go version | cut -d' ' -f3)"
	cluster
	exit 0
	;;
esac

echo "== machine"
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(uname -sr); $(go version | cut -d' ' -f3)"
echo "haproxy $(haproxy -v | head -1 | cut -d' ' -f3), socat $(socat -V | grep -m1 'socat version' | cut -d' ' -f3)"
echo

plain

echo "== idle connections: resident memory"
# One process may hold 20,000 files here, and kproxy holds two per client.
"$kb" broker --listen 127.0.0.1:29192 >/dev/null &
pids+=($!)
up 127.0.0.1 29192
"$work/kproxy" run --listen 127.0.0.1:29193 --upstream 127.0.0.1:29192 --admin 127.0.0.1:0 --log-level warn &
kp=$!
pids+=($kp)
up 127.0.0.1 29193
"$kb" idle --addr 127.0.0.1:29193 --pid "$kp" -n "${KBENCH_IDLE:-9900}" --hold 5s
kill "$kp"
wait "$kp" || true
echo

echo "== one client flooding an upstream that stopped reading (max_unread_bytes 8 MiB)"
"$kb" stall --listen 127.0.0.1:29196 >/dev/null &
pids+=($!)
cat >"$work/flood.yaml" <<YAML
proxy:
  listen: 127.0.0.1:29197
  upstream: 127.0.0.1:29196
  max_unread_bytes: 8388608
framing:
  max_request_bytes: 1048576
  max_response_bytes: 1048576
admin:
  listen: ""
log:
  level: error
YAML
up 127.0.0.1 29196
"$work/kproxy" run --config "$work/flood.yaml" &
kp=$!
pids+=($kp)
up 127.0.0.1 29197
"$kb" flood --addr 127.0.0.1:29197 --pid "$kp" -s 16384 -t 10s
"$kb" flood --addr 127.0.0.1:29197 --pid "$kp" -s 16384 -t 10s --acks0
echo

hostile
tls
cluster

echo "== relay benchmarks (allocations per relayed request/response)"
go test -run XXX -bench 'Relay|ParseRequestHeader|PushPop' -benchmem ./proxy/ ./framing/ ./correlate/ | grep -E '^(Benchmark|ok)'
