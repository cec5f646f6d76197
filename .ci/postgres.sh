#!/usr/bin/env bash
# Start a throw-away PostgreSQL cluster on 127.0.0.1 for the tests, installing the server from
# Debian's packages when it is missing. Prints the connection URL on stdout.
# Usage: .ci/postgres.sh start DIR [PORT]   |   .ci/postgres.sh stop DIR
set -euo pipefail
cmd=${1:?start|stop}; dir=${2:?data folder}; port=${3:-54329}
find_bin() {
  local b
  b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  echo "$b"
}
if [ "$cmd" = stop ]; then
  bin=$(find_bin); [ -n "$bin" ] && [ -d "$dir/data" ] && runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast stop >&2 || true
  exit 0
fi
bin=$(find_bin)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "installing PostgreSQL from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  bin=$(find_bin)
fi
id postgres >/dev/null 2>&1 || useradd --system --home "$dir" postgres
mkdir -p "$dir"; chown postgres "$dir"; chmod 700 "$dir"
if [ ! -f "$dir/data/PG_VERSION" ]; then
  runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
fi
runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 -c fsync=off" start >&2
for _ in $(seq 1 30); do
  if "$bin/pg_isready" -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then break; fi; sleep 1
done
"$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='advisor_test'" | grep -q 1 \
  || "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres advisor_test
echo "postgresql://postgres@127.0.0.1:$port/advisor_test"
