#!/bin/sh
# FastNetMon notify script for ribkeeper.
#
# FastNetMon (community edition, notify_script_path in fastnetmon.conf;
# Advanced with notify_script_format = text) runs it as
#
#     ribkeeper-notify.sh IP DIRECTION PPS ACTION
#
# with ACTION ban, unban or attack_details, and the attack details on stdin
# for ban and attack_details. It turns
#
#     ban     -> a FlowSpec rule "match destination IP/32 then discard"
#                (or an RTBH route "route IP/32 then blackhole"), with a TTL
#     unban   -> withdrawal of that rule
#
# Repeated bans are idempotent: ribkeeper keys rules by their match, so a
# second ban of the same IP updates the same rule (and restarts its TTL)
# instead of adding another. A lost unban is harmless: the TTL withdraws the
# rule anyway. The legacy argument order "ban IP" (FastNetMon Advanced JSON
# mode) is accepted too.
#
# Settings (environment, or /etc/default/ribkeeper-fastnetmon):
#   RIBKEEPER_SOCKET   control socket (default /run/ribkeeper/ribkeeper.sock)
#   RIBKEEPER_URL      use the TCP API instead, e.g. https://127.0.0.1:8443
#   RIBKEEPER_TOKEN    bearer token (role write) for RIBKEEPER_URL
#   RIBKEEPER_CACERT   CA file for an HTTPS RIBKEEPER_URL with a private CA
#   RIBKEEPER_MODE     flowspec (default) or blackhole
#   RIBKEEPER_ACTION   FlowSpec action (default "discard"; e.g. "rate-limit 125000")
#   RIBKEEPER_MATCH    extra FlowSpec match components, e.g. "protocol udp"
#   RIBKEEPER_TTL      rule lifetime (default 1h); FastNetMon's ban_time should be shorter
#   RIBKEEPER_LOG      where to log (default: syslog via logger, else stderr)
set -u

DEFAULTS=${RIBKEEPER_DEFAULTS:-/etc/default/ribkeeper-fastnetmon}
[ -r "$DEFAULTS" ] && . "$DEFAULTS"

SOCKET=${RIBKEEPER_SOCKET:-/run/ribkeeper/ribkeeper.sock}
URL=${RIBKEEPER_URL:-}
TOKEN=${RIBKEEPER_TOKEN:-}
CACERT=${RIBKEEPER_CACERT:-}
MODE=${RIBKEEPER_MODE:-flowspec}
ACTION=${RIBKEEPER_ACTION:-discard}
EXTRA=${RIBKEEPER_MATCH:-}
TTL=${RIBKEEPER_TTL:-1h}

log() {
	if [ -n "${RIBKEEPER_LOG:-}" ]; then
		printf '%s ribkeeper-notify: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$RIBKEEPER_LOG"
	elif command -v logger >/dev/null 2>&1; then
		logger -t ribkeeper-notify -- "$*"
	else
		printf 'ribkeeper-notify: %s\n' "$*" >&2
	fi
}

# For ban and attack_details FastNetMon writes the details to stdin and
# waits for the script to read them: drain stdin, whatever happens next.
# (For unban it sends nothing; reading could block.)
drain() {
	case ${ACT:-} in
	ban | attack_details) [ -t 0 ] || cat >/dev/null 2>&1 ;;
	esac
}

if [ "$#" -ge 2 ] && { [ "$1" = ban ] || [ "$1" = unban ]; }; then
	IP=$2 DIRECTION=${3:-} PPS=${4:-} ACT=$1
elif [ "$#" -ge 4 ]; then
	IP=$1 DIRECTION=$2 PPS=$3 ACT=$4
else
	ACT=${4:-}
	drain
	log "usage: $0 IP DIRECTION PPS ban|unban|attack_details"
	exit 2
fi

# Only an address may reach the rule text: no spaces, no JSON quoting.
case $IP in
*[!0-9a-fA-F.:]* | "")
	drain
	log "refusing $ACT: $IP is not an IP address"
	exit 2
	;;
*:*) LEN=128 ;;
*) LEN=32 ;;
esac

case $MODE in
flowspec) TEXT="match destination $IP/$LEN${EXTRA:+ $EXTRA} then $ACTION" ;;
blackhole) TEXT="route $IP/$LEN then blackhole" ;;
*)
	drain
	log "RIBKEEPER_MODE=$MODE is neither flowspec nor blackhole"
	exit 2
	;;
esac

# api METHOD PATH BODY: prints the response body; fails on HTTP errors.
api() {
	if [ -n "$URL" ]; then
		set -- -X "$1" "$URL$2" --data-binary "$3"
		[ -n "$TOKEN" ] && set -- -H "Authorization: Bearer $TOKEN" "$@"
		[ -n "$CACERT" ] && set -- --cacert "$CACERT" "$@"
	else
		set -- --unix-socket "$SOCKET" -X "$1" "http://ribkeeper$2" --data-binary "$3"
	fi
	curl -sS --fail-with-body --max-time 15 -H 'Content-Type: application/json' "$@"
}

# json_str escapes a value for a JSON string.
json_str() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | tr -d '\n\r\t'; }

case $ACT in
ban)
	drain
	reason="fastnetmon: $DIRECTION attack on $IP at $PPS pps"
	body="{\"text\": \"$(json_str "$TEXT")\", \"ttl\": \"$(json_str "$TTL")\", \"reason\": \"$(json_str "$reason")\"}"
	if out=$(api POST /v1/rules "$body" 2>&1); then
		log "ban $IP: $TEXT (ttl $TTL): $(printf '%s' "$out" | grep -o '"id":[0-9]*' | head -n1)"
		exit 0
	fi
	log "ban $IP failed: $out"
	exit 1
	;;
unban)
	body="{\"text\": \"$(json_str "$TEXT")\"}"
	if out=$(api POST /v1/rules/withdraw "$body" 2>&1); then
		log "unban $IP: withdrew $(printf '%s' "$out" | grep -o '"id":[0-9]*' | wc -l | tr -d ' ') rule(s) matching $TEXT"
		exit 0
	fi
	log "unban $IP failed: $out"
	exit 1
	;;
attack_details)
	drain
	exit 0
	;;
*)
	drain
	log "unknown action $ACT for $IP; ignored"
	exit 0
	;;
esac
