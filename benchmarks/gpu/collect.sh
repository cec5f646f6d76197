#!/usr/bin/env bash
# A prepared spread of GPU trials (<= 10 minutes on one GPU); --dry-run lists it with predicted costs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec python "$here/collect.py" "$@"
