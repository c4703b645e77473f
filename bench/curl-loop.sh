# shellcheck shell=bash
# The loop people run instead of nthd, as the AWS documentation gives it: bash, a token first,
# then poll the spot path and power off through logind when it answers; sleep $EVERY s between
# reads. nthd-bench (in-process) and bench/real-idle.sh (booted Debian) both run this file with
# bash, URL and EVERY in the environment.
TOKEN=$(curl -s -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 21600" "$URL/latest/api/token")
while true; do curl -s -f -H "X-aws-ec2-metadata-token: $TOKEN" "$URL/latest/meta-data/spot/instance-action" && dbus-send --system --print-reply --dest=org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager.PowerOff boolean:false && break; sleep "$EVERY"; done
