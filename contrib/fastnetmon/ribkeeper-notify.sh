#!/bin/sh
# FastNetMon notify script for ribkeeper: a thin forwarder.
#
# FastNetMon (community edition: notify_script_path in fastnetmon.conf)
# runs it as
#
#     ribkeeper-notify.sh IP DIRECTION PPS ACTION
#
# with ACTION ban, unban or attack_details, and the attack details on stdin
# for ban and attack_details. It forwards each call, unchanged, as a signal
# to a [[source]] of kind "fastnetmon" of ribkeeper:
#
#     POST /v1/signals/SOURCE  {"ip", "direction", "pps", "action", "details"}
#
# ribkeeper turns ban into a "start" signal, attack_details into "ongoing"
# and unban into "end"; its playbooks decide which rule follows (see the
# README, "Detectors"). `ribkeeper signals` shows what arrived.
#
# Settings (environment, or /etc/default/ribkeeper-fastnetmon):
#   RIBKEEPER_URL          the TCP API, e.g. http://127.0.0.1:8080; without
#                          it, the control socket RIBKEEPER_SOCKET
#                          (default /run/ribkeeper/ribkeeper.sock)
#   RIBKEEPER_SOURCE       name of the [[source]] (default fastnetmon)
#   RIBKEEPER_SECRET_FILE  file holding the source's secret (or
#                          RIBKEEPER_SECRET, the secret itself)
#   RIBKEEPER_CACERT       CA file for an HTTPS RIBKEEPER_URL with a private CA
#   RIBKEEPER_LOG          where to log (default: syslog via logger, else stderr)
set -u

DEFAULTS=${RIBKEEPER_DEFAULTS:-/etc/default/ribkeeper-fastnetmon}
[ -r "$DEFAULTS" ] && . "$DEFAULTS"

URL=${RIBKEEPER_URL:-}
SOCKET=${RIBKEEPER_SOCKET:-/run/ribkeeper/ribkeeper.sock}
SOURCE=${RIBKEEPER_SOURCE:-fastnetmon}
CACERT=${RIBKEEPER_CACERT:-}
SECRET=${RIBKEEPER_SECRET:-}
if [ -z "$SECRET" ] && [ -n "${RIBKEEPER_SECRET_FILE:-}" ]; then
	SECRET=$(tr -d ' \t\r\n' <"$RIBKEEPER_SECRET_FILE")
fi

log() {
	if [ -n "${RIBKEEPER_LOG:-}" ]; then
		printf '%s ribkeeper-notify: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$RIBKEEPER_LOG"
	elif command -v logger >/dev/null 2>&1; then
		logger -t ribkeeper-notify -- "$*"
	else
		printf 'ribkeeper-notify: %s\n' "$*" >&2
	fi
}

IP=${1:-} DIRECTION=${2:-} PPS=${3:-} ACT=${4:-}
# The argument order "ban IP" (FastNetMon Advanced's JSON mode) too.
if [ "$#" -eq 2 ] && { [ "$1" = ban ] || [ "$1" = unban ]; }; then
	IP=$2 DIRECTION=incoming PPS=0 ACT=$1
fi

# For ban and attack_details FastNetMon writes the details to stdin and
# waits for them to be read; for unban it writes nothing (reading could
# block). Read at most 16 KiB, as a JSON string: control characters
# dropped, backslashes and quotes escaped, lines joined with \n.
DETAILS=
case $ACT in
ban | attack_details)
	if [ ! -t 0 ]; then
		DETAILS=$(head -c 16384 | tr -d '\000-\011\013-\037\177' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' | awk '{printf "%s\\n", $0}')
		cat >/dev/null 2>&1 # the rest, if any
	fi
	;;
esac

# Only values of their expected shape reach the JSON; ribkeeper checks them
# again.
case $IP in *[!0-9a-fA-F.:]* | "") log "refusing $ACT: $IP is not an IP address"; exit 2 ;; esac
case $PPS in *[!0-9]* | "") PPS=0 ;; esac
case $DIRECTION in *[!a-z_]*) DIRECTION=unknown ;; esac
case $ACT in
ban | unban | attack_details) ;;
*) log "usage: $0 IP DIRECTION PPS ban|unban|attack_details (got action '$ACT')"; exit 2 ;;
esac
if [ -z "$SECRET" ]; then
	log "no secret: set RIBKEEPER_SECRET_FILE to a file with the secret of [[source]] $SOURCE"
	exit 2
fi

body=$(mktemp) || exit 1
trap 'rm -f "$body"' EXIT
printf '{"ip": "%s", "direction": "%s", "pps": %s, "action": "%s", "details": "%s"}' \
	"$IP" "$DIRECTION" "$PPS" "$ACT" "$DETAILS" >"$body"

if [ -n "$URL" ]; then
	set -- "$URL/v1/signals/$SOURCE"
	[ -n "$CACERT" ] && set -- --cacert "$CACERT" "$@"
else
	set -- --unix-socket "$SOCKET" "http://ribkeeper/v1/signals/$SOURCE"
fi
# The secret goes through stdin (a header file), not the command line.
if out=$(printf 'Authorization: Bearer %s\n' "$SECRET" |
	curl -sS --fail-with-body --max-time 15 -H @- -H 'Content-Type: application/json' --data-binary @"$body" "$@" 2>&1); then
	log "$ACT $IP ($DIRECTION, $PPS pps): forwarded to source $SOURCE"
	exit 0
fi
log "$ACT $IP failed: $out"
exit 1
