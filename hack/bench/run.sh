#!/usr/bin/env bash
# Benchmark revgate beside nginx, haproxy and caddy on loopback, as described
# in the project's peer-bench notes: one Go upstream answering 200 with a
# 64-byte body, each proxy forwarding Host bench.local to it with upstream
# keep-alive and access logs off; wrk -t2 -c64; targets interleaved over
# ROUNDS rounds; medians of rps, p99 and the proxy's own CPU time per request
# (utime+stime of all its processes / requests), for 1 and 1,000 routes
# (/svc0000/../svc0999/, requests to the last), plus idle RSS. A second
# revgate serves the same routes from an IngressRoute with 80/20 weighted
# services and active health checks, to show what those cost.
#
# Environment: ROUNDS (3), DURATION (8s), CONNECTIONS (64), THREADS (2),
# REVGATE_BIN (a prebuilt revgate; default: go build ./cmd/revgate),
# BASELINE_BIN (another revgate binary, e.g. built from main, measured in the
# same rounds as "revgate baseline" to show what a change costs),
# KEEP_WORKDIR=1 keeps the temporary folder.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
ROUTES=1000
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/revgate-bench.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ "${KEEP_WORKDIR:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

log() { printf '%s\n' "$*" >&2; }

install_tools() {
	local missing=()
	command -v nginx >/dev/null || missing+=(nginx)
	command -v haproxy >/dev/null || missing+=(haproxy)
	command -v caddy >/dev/null || missing+=(caddy)
	command -v wrk >/dev/null || missing+=(wrk)
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]}"
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
		# Debian starts the packaged services; they are not wanted here.
		for s in nginx haproxy caddy; do $sudo systemctl stop "$s" 2>/dev/null || $sudo service "$s" stop 2>/dev/null || true; done
	fi
}

build() {
	if [ -n "${REVGATE_BIN:-}" ]; then
		cp "$REVGATE_BIN" "$work/revgate"
	else
		(cd "$top" && go build -o "$work/revgate" ./cmd/revgate)
	fi
	if [ -n "${BASELINE_BIN:-}" ]; then
		cp "$BASELINE_BIN" "$work/revgate-baseline"
	fi
	(cd "$top" && go build -o "$work/upstream" ./hack/bench/upstream)
}

# targets: name, process name prefix and port base of every measured target.
targets() {
	echo "upstream direct|upstream|190"
	echo "revgate|revgate|1910"
	[ -z "${BASELINE_BIN:-}" ] || echo "revgate baseline|revgate-baseline|1912"
	echo "revgate weighted+hc|revgate-weighted|1911"
	echo "nginx|nginx|1920"
	echo "haproxy|haproxy|1930"
	echo "caddy|caddy|1940"
}

# Ports: upstream 19000; per target: <base>1 for 1 route, <base>2 for 1,000.
UP=127.0.0.1:19000

# service_yaml NAME: a Service NAME on port 80 with one ready endpoint, the
# upstream.
service_yaml() {
	cat <<Y
apiVersion: v1
kind: Service
metadata:
  name: $1
  namespace: default
spec:
  ports:
  - port: 80
    targetPort: 19000
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $1-1
  namespace: default
  labels:
    kubernetes.io/service-name: $1
addressType: IPv4
ports:
- port: 19000
endpoints:
- addresses: ["127.0.0.1"]
---
Y
}

write_configs() {
	local n
	for n in 1 $ROUTES; do
		local d="$work/revgate-$n"
		mkdir -p "$d"
		{
			cat <<Y
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: revgate
spec:
  controller: revgate.io/ingress-controller
---
Y
			service_yaml up
			cat <<Y
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bench
  namespace: default
spec:
  ingressClassName: revgate
  rules:
  - host: bench.local
    http:
      paths:
Y
			if [ "$n" = 1 ]; then
				printf '      - path: /\n        pathType: Prefix\n        backend: {service: {name: up, port: {number: 80}}}\n'
			else
				for i in $(seq 0 $((n - 1))); do
					printf '      - path: /svc%04d/\n        pathType: Prefix\n        backend: {service: {name: up, port: {number: 80}}}\n' "$i"
				done
			fi
		} >"$d/bench.yaml"
	done

	# revgate with an IngressRoute whose routes split traffic 80/20 over two
	# Services (both on the upstream) with an active health check each second:
	# the cost of weights and health checking beside the plain Ingress route.
	for n in 1 $ROUTES; do
		local d="$work/revgate-weighted-$n"
		mkdir -p "$d"
		{
			service_yaml up-a
			service_yaml up-b
			cat <<Y
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata:
  name: bench
  namespace: default
spec:
  virtualhost:
    fqdn: bench.local
  healthCheck:
    path: /
    intervalSeconds: 1
  routes:
Y
			local paths=/
			[ "$n" = 1 ] || paths=$(for i in $(seq 0 $((n - 1))); do printf '/svc%04d ' "$i"; done)
			for p in $paths; do
				printf '  - match: %s\n    services:\n    - {name: up-a, port: 80, weight: 80}\n    - {name: up-b, port: 80, weight: 20}\n' "$p"
			done
		} >"$d/bench.yaml"
	done

	# nginx
	for n in 1 $ROUTES; do
		local port=1920$([ "$n" = 1 ] && echo 1 || echo 2) d="$work/nginx-$n"
		mkdir -p "$d"
		{
			cat <<N
worker_processes 2;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $d/body; proxy_temp_path $d/proxy; fastcgi_temp_path $d/fcgi;
  uwsgi_temp_path $d/uwsgi; scgi_temp_path $d/scgi;
  upstream up { server $UP; keepalive 64; }
  server {
    listen 127.0.0.1:$port;
    server_name bench.local;
N
			if [ "$n" = 1 ]; then
				echo '    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }'
			else
				for i in $(seq 0 $((n - 1))); do
					printf '    location /svc%04d/ { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }\n' "$i"
				done
			fi
			echo '  }'
			echo '}'
		} >"$d/nginx.conf"
	done

	# haproxy: 1,000 routes as a map (the fast way; acl lines are ~10x slower)
	for n in 1 $ROUTES; do
		local port=1930$([ "$n" = 1 ] && echo 1 || echo 2) d="$work/haproxy-$n"
		mkdir -p "$d"
		: >"$d/routes.map"
		if [ "$n" != 1 ]; then
			for i in $(seq 0 $((n - 1))); do printf '/svc%04d/ up\n' "$i" >>"$d/routes.map"; done
		fi
		{
			cat <<H
global
  nbthread 2
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend f
  bind 127.0.0.1:$port
H
			if [ "$n" = 1 ]; then
				echo '  default_backend up'
			else
				echo "  use_backend %[path,map_beg($d/routes.map)]"
			fi
			echo 'backend up'
			echo "  server s1 $UP"
		} >"$d/haproxy.cfg"
	done

	# caddy
	for n in 1 $ROUTES; do
		local port=1940$([ "$n" = 1 ] && echo 1 || echo 2) d="$work/caddy-$n"
		mkdir -p "$d"
		local rp="reverse_proxy $UP {
    transport http {
      keepalive_idle_conns_per_host 256
    }
  }"
		{
			printf '{\n  admin off\n  auto_https off\n}\nhttp://bench.local:%s {\n' "$port"
			if [ "$n" = 1 ]; then
				printf '  %s\n' "$rp"
			else
				for i in $(seq 0 $((n - 1))); do
					printf '  handle /svc%04d/* {\n    %s\n  }\n' "$i" "$rp"
				done
			fi
			echo '}'
		} >"$d/Caddyfile"
	done
}

start() { # name command...
	local name=$1
	shift
	"$@" >"$work/$name.out" 2>&1 &
	pids+=($!)
	echo $! >"$work/$name.pid"
}

start_all() {
	start upstream "$work/upstream" -addr "$UP"
	for n in 1 $ROUTES; do
		local s=$([ "$n" = 1 ] && echo 1 || echo 2)
		start "revgate-$n" "$work/revgate" proxy --config-dir "$work/revgate-$n" --termination-log "" \
			--http-addr "127.0.0.1:1910$s" --https-addr "" --admin-addr "127.0.0.1:1915$s"
		start "revgate-weighted-$n" "$work/revgate" proxy --config-dir "$work/revgate-weighted-$n" --termination-log "" \
			--http-addr "127.0.0.1:1911$s" --https-addr "" --admin-addr "127.0.0.1:1916$s"
		if [ -n "${BASELINE_BIN:-}" ]; then
			start "revgate-baseline-$n" "$work/revgate-baseline" proxy --config-dir "$work/revgate-$n" --termination-log "" \
				--http-addr "127.0.0.1:1912$s" --https-addr "" --admin-addr "127.0.0.1:1917$s"
		fi
		start "nginx-$n" nginx -c "$work/nginx-$n/nginx.conf"
		start "haproxy-$n" haproxy -f "$work/haproxy-$n/haproxy.cfg"
		XDG_DATA_HOME="$work/caddy-$n" XDG_CONFIG_HOME="$work/caddy-$n" \
			start "caddy-$n" caddy run --config "$work/caddy-$n/Caddyfile" --adapter caddyfile
	done
	local t waits=(upstream:19000)
	while IFS='|' read -r _ proc base; do
		[ "$proc" = upstream ] || waits+=("$proc-1:${base}1" "$proc-$ROUTES:${base}2")
	done < <(targets)
	for t in "${waits[@]}"; do
		local port=${t##*:} ok=0
		for _ in $(seq 100); do
			if curl -fs -o /dev/null -H 'Host: bench.local' "http://127.0.0.1:$port/svc0999/x"; then ok=1; break; fi
			sleep 0.1
		done
		[ $ok = 1 ] || { log "${t%%:*} does not answer on $port:"; cat "$work/${t%%:*}.out" >&2; exit 1; }
	done
}

# pids_of name: the process and its children (nginx workers).
pids_of() {
	local p
	p=$(cat "$work/$1.pid")
	echo "$p" $(pgrep -P "$p" || true)
}

cpu_ticks() { # name → utime+stime of its processes, in clock ticks
	local total=0 p
	for p in $(pids_of "$1"); do
		[ -r "/proc/$p/stat" ] || continue
		total=$((total + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
	done
	echo "$total"
}

rss_mb() { # name → summed VmRSS in MB
	local total=0 p
	for p in $(pids_of "$1"); do
		total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	awk -v k="$total" 'BEGIN {printf "%.0f", k / 1024}'
}

HZ=$(getconf CLK_TCK)

measure() { # round target routes port procname
	local round=$1 target=$2 n=$3 port=$4 proc=$5
	local before after out reqs rps p99
	before=$(cpu_ticks "$proc")
	out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H 'Host: bench.local' "http://127.0.0.1:$port/svc0999/x")
	after=$(cpu_ticks "$proc")
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' <<<"$out")
	if grep -q 'Non-2xx' <<<"$out"; then log "warning: $target/$n: $(grep Non-2xx <<<"$out")"; fi
	local cpu
	cpu=$(awk -v t=$((after - before)) -v hz="$HZ" -v r="$reqs" 'BEGIN {printf "%.1f", t / hz * 1e6 / r}')
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$n" "$rps" "$p99" "$cpu" >>"$work/results.tsv"
	log "round $round $target routes=$n: $rps rps, p99 ${p99}ms, ${cpu}µs CPU/request"
}

main() {
	install_tools
	build
	write_configs
	start_all
	sleep 2
	declare -A rss
	local name proc base
	while IFS='|' read -r name proc base; do
		if [ "$proc" = upstream ]; then rss[$proc]=$(rss_mb upstream); else rss[$proc]=$(rss_mb "$proc-1"); fi
	done < <(targets)
	: >"$work/results.tsv"
	for round in $(seq "$ROUNDS"); do
		for n in 1 $ROUTES; do
			local s=$([ "$n" = 1 ] && echo 1 || echo 2)
			while IFS='|' read -r name proc base; do
				if [ "$proc" = upstream ]; then
					measure "$round" "$name" "$n" 19000 upstream
				else
					measure "$round" "$name" "$n" "$base$s" "$proc-$n"
				fi
			done < <(targets)
		done
	done
	report
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2] + a[NR/2+1]) / 2}'; }

col() { # target routes column → median
	awk -F'\t' -v t="$1" -v n="$2" -v c="$3" '$2 == t && $3 == n {print $c}' "$work/results.tsv" | median
}

report() {
	echo
	echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS interleaved rounds, medians; CPU = the target's own utime+stime per request"
	echo
	echo "| target | rps 1 route | p99 ms 1 route | rps $ROUTES routes | p99 ms $ROUTES routes | CPU µs/request (1 / $ROUTES routes) | RSS MB idle |"
	echo "|---|---|---|---|---|---|---|"
	local t key base
	while IFS='|' read -r t key base; do
		printf '| %s | %.1fk | %s | %.1fk | %s | %s / %s | %s |\n' "$t" \
			"$(awk -v v="$(col "$t" 1 4)" 'BEGIN {print v / 1000}')" "$(col "$t" 1 5)" \
			"$(awk -v v="$(col "$t" $ROUTES 4)" 'BEGIN {print v / 1000}')" "$(col "$t" $ROUTES 5)" \
			"$(col "$t" 1 6)" "$(col "$t" $ROUTES 6)" "${rss[$key]}"
	done < <(targets)
	echo
	local pairs=(revgate:nginx revgate:caddy "revgate weighted+hc:revgate")
	[ -z "${BASELINE_BIN:-}" ] || pairs+=("revgate:revgate baseline" "revgate baseline:nginx")
	for n in 1 $ROUTES; do
		# Ratios per round, then the median, as the machine's speed drifts.
		local pair
		for pair in "${pairs[@]}"; do
			local mine=${pair%%:*} peer=${pair#*:} r
			r=$(awk -F'\t' -v n="$n" -v m="$mine" -v p="$peer" '$3 == n && $2 == m {g[$1]=$6} $3 == n && $2 == p {q[$1]=$6}
				END {for (k in g) if (q[k] > 0) print g[k] / q[k]}' "$work/results.tsv" | median)
			printf 'CPU per request %s/%s, %s routes: %.2fx (median of per-round ratios)\n' "$mine" "$peer" "$n" "$r"
		done
	done
	echo
	echo "raw results: round, target, routes, rps, p99 ms, CPU µs/request"
	sed 's/^/    /' "$work/results.tsv"
}

main "$@"
