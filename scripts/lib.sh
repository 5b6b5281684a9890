# Shared functions for scripts/start and scripts/test. Source it from the repository root:
#   . scripts/lib.sh
# Every function is idempotent and prints one status line (to stderr) when it succeeds.
#
# Knobs (environment variables):
#   PYTHON              interpreter that creates .venv (default: python3)
#   DATABASE_URL        use this database as is; nothing is started or created
#   HITL_PG_PORT        port of the local PostgreSQL to look for / start (default: 5432)
#   HITL_PG_THROWAWAY=1 skip the running server and the system cluster: always use the throwaway
#                       cluster under var/pg (used to test that path)

HITL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HITL_PG_DIR="$HITL_ROOT/var/pg"

_say() { printf '==> %s\n' "$*" >&2; }
_die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# --- Python ---------------------------------------------------------------------------------

ensure_venv() {
    local venv="$HITL_ROOT/.venv" stamp="$HITL_ROOT/.venv/.installed" python="${PYTHON:-python3}"
    if [[ ! -x "$venv/bin/python" ]]; then
        command -v "$python" >/dev/null || _die "$python not found (set PYTHON to a Python >= 3.11)"
        "$python" -m venv "$venv" || _die "could not create $venv"
        _say "venv: created .venv with $("$venv/bin/python" --version 2>&1)"
    fi
    if [[ ! -f "$stamp" || "$HITL_ROOT/pyproject.toml" -nt "$stamp" \
        || "$HITL_ROOT/clients/python/pyproject.toml" -nt "$stamp" ]]; then
        _say "venv: installing the project, its test dependencies and the Python client (pip install -e '.[test]' -e 'clients/python[test]')"
        # Quiet unless it fails: setuptools' editable-install warnings are noise here.
        if ! (cd "$HITL_ROOT" && "$venv/bin/python" -m pip install -q --disable-pip-version-check \
            -e '.[test]' -e 'clients/python[test]') >"$venv/pip-install.log" 2>&1; then
            tail -n 40 "$venv/pip-install.log" >&2
            _die "pip install failed (full log: .venv/pip-install.log)"
        fi
        touch "$stamp"
    fi
    _say "venv: ready (.venv, $("$venv/bin/python" --version 2>&1))"
}

# --- PostgreSQL -----------------------------------------------------------------------------

_port_answers() { # host port
    if command -v pg_isready >/dev/null; then
        pg_isready -q -h "$1" -p "$2" -t 2
    else
        "$(_any_python)" - "$1" "$2" <<'EOF'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
EOF
    fi
}

_any_python() {
    if [[ -x "$HITL_ROOT/.venv/bin/python" ]]; then echo "$HITL_ROOT/.venv/bin/python"; else echo "${PYTHON:-python3}"; fi
}

_port_free() { # port: true if nothing listens on 127.0.0.1:port and we could bind it
    # SO_REUSEADDR as PostgreSQL sets it: connections in TIME_WAIT do not make the port busy.
    "$(_any_python)" - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}

_free_port() {
    "$(_any_python)" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_wait_for_port() { # host port seconds
    local i
    for ((i = 0; i < $3 * 2; i++)); do
        _port_answers "$1" "$2" && return 0
        sleep 0.5
    done
    return 1
}

_pg_bindir() {
    local d
    if command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir 2>/dev/null)/initdb" ]]; then
        pg_config --bindir
        return
    fi
    # The highest installed major version (Debian layout).
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
        [[ -x "$d/initdb" ]] && { echo "$d"; return; }
    done
    command -v initdb >/dev/null && dirname "$(command -v initdb)"
}

# Runs a command as the postgres user when we are root (initdb and postgres refuse root).
_as_pg_owner() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A system cluster (Debian's pg_ctlcluster) configured for this port but not running: start it.
_start_system_cluster() { # port
    command -v pg_lsclusters >/dev/null && command -v pg_ctlcluster >/dev/null || return 1
    local ver name cport status rest
    while read -r ver name cport status rest; do
        [[ "$cport" == "$1" && "$status" != online* ]] || continue
        _say "postgres: starting system cluster $ver/$name on port $1"
        pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start >/dev/null 2>&1 || true
        _wait_for_port 127.0.0.1 "$1" 30 && return 0
    done < <(pg_lsclusters -h 2>/dev/null)
    return 1
}

_throwaway_running() { # bindir; prints the port of the running throwaway cluster under var/pg
    local port
    [[ -f "$HITL_PG_DIR/data/postmaster.pid" ]] || return 1
    _as_pg_owner "$1/pg_ctl" -D "$HITL_PG_DIR/data" status >/dev/null 2>&1 || return 1
    port="$(sed -n 4p "$HITL_PG_DIR/data/postmaster.pid")" # the pid file's 4th line is the port
    _wait_for_port 127.0.0.1 "$port" 10 || _die "the throwaway PostgreSQL in var/pg runs but does not answer on port $port"
    echo "$port"
}

# Creates (once) and starts a cluster under var/pg owned by the postgres user when we are root.
_start_throwaway() { # wanted-port; prints the port it listens on
    local wanted="$1" bindir port sockdir
    bindir="$(_pg_bindir)"
    [[ -n "$bindir" ]] || _die "no PostgreSQL server binaries (initdb, pg_ctl) found; install PostgreSQL or set DATABASE_URL"
    if port="$(_throwaway_running "$bindir")"; then
        echo "$port"
        return 0
    fi
    if [[ $EUID -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || _die "running as root but there is no 'postgres' user to own the throwaway cluster"
    fi
    mkdir -p "$HITL_PG_DIR"
    [[ $EUID -eq 0 ]] && chown postgres: "$HITL_PG_DIR"
    _as_pg_owner test -w "$HITL_PG_DIR" \
        || _die "the postgres user cannot write $HITL_PG_DIR (a parent directory is not reachable); set DATABASE_URL"
    if [[ ! -f "$HITL_PG_DIR/data/PG_VERSION" ]]; then
        _say "postgres: creating a throwaway cluster in var/pg ($("$bindir/initdb" --version))"
        _as_pg_owner "$bindir/initdb" -D "$HITL_PG_DIR/data" -A trust -U postgres -E UTF8 --no-locale \
            >"$HITL_PG_DIR/initdb.log" 2>&1 || _die "initdb failed, see $HITL_PG_DIR/initdb.log"
    fi
    # Unix socket paths are limited to ~107 bytes: fall back to a short directory under /tmp.
    sockdir="$HITL_PG_DIR/run"
    if ((${#sockdir} > 90)); then
        sockdir="/tmp/hitl-pg-$(printf '%s' "$HITL_PG_DIR" | cksum | cut -d' ' -f1)"
    fi
    _as_pg_owner mkdir -p "$sockdir"
    port="$wanted"
    _port_free "$port" || port="$(_free_port)"
    _as_pg_owner "$bindir/pg_ctl" -D "$HITL_PG_DIR/data" -l "$HITL_PG_DIR/server.log" -w -t 60 \
        -o "-p $port -k $sockdir -c listen_addresses=127.0.0.1" start >/dev/null \
        || _die "the throwaway PostgreSQL did not start, see $HITL_PG_DIR/server.log"
    _wait_for_port 127.0.0.1 "$port" 30 || _die "the throwaway PostgreSQL does not answer on port $port"
    _say "postgres: started the throwaway cluster (var/pg) on 127.0.0.1:$port"
    echo "$port"
}

# Stops the throwaway cluster under var/pg if it runs (the data stays for next time).
stop_throwaway_postgres() {
    local bindir
    bindir="$(_pg_bindir)"
    [[ -n "$bindir" && -f "$HITL_PG_DIR/data/postmaster.pid" ]] || return 0
    _as_pg_owner "$bindir/pg_ctl" -D "$HITL_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    _say "postgres: stopped the throwaway cluster (var/pg)"
}

# Runs one SQL statement against database postgres on 127.0.0.1:port; prints the unaligned result.
_pg_sql() { # port sql
    if command -v psql >/dev/null; then
        psql -X -q -h 127.0.0.1 -p "$1" -U postgres -d postgres -tAc "$2"
    else
        "$HITL_ROOT/.venv/bin/python" - "$1" "$2" <<'EOF'
import sys, psycopg
with psycopg.connect(host="127.0.0.1", port=int(sys.argv[1]), user="postgres", dbname="postgres",
                     autocommit=True) as conn:
    cur = conn.execute(sys.argv[2])
    if cur.description:
        for row in cur.fetchall():
            print("|".join(str(v) for v in row))
EOF
    fi
}

_ensure_database() { # port name
    local exists
    exists="$(_pg_sql "$1" "select 1 from pg_database where datname='$2'")" \
        || _die "cannot connect to PostgreSQL on 127.0.0.1:$1 as user postgres"
    if [[ "$exists" != 1 ]]; then
        _pg_sql "$1" "create database \"$2\"" >/dev/null || _die "could not create database $2"
        _say "postgres: created database $2"
    fi
}

# Finds or starts PostgreSQL and exports DATABASE_URL:
#   1. DATABASE_URL already set (environment or .env): used as is;
#   2. a server answering on 127.0.0.1:$HITL_PG_PORT (default 5432);
#   3. the system cluster for that port, started with pg_ctlcluster;
#   4. a throwaway cluster under var/pg (initdb as the postgres user when root), on that port or a free one.
# Then makes sure the database hitl exists.
ensure_postgres() {
    local port="${HITL_PG_PORT:-5432}" how
    if [[ -n "${DATABASE_URL:-}" ]]; then
        _say "postgres: using DATABASE_URL from the environment"
        return 0
    fi
    if [[ -f "$HITL_ROOT/.env" ]] && grep -qE '^[[:space:]]*(export[[:space:]]+)?DATABASE_URL=' "$HITL_ROOT/.env"; then
        _say "postgres: using DATABASE_URL from .env"
        return 0
    fi
    if [[ "${HITL_PG_THROWAWAY:-0}" != 1 ]] && _port_answers 127.0.0.1 "$port"; then
        how="running server"
    elif [[ "${HITL_PG_THROWAWAY:-0}" != 1 ]] && _start_system_cluster "$port"; then
        how="system cluster, started"
    else
        port="$(_start_throwaway "$port")" || exit 1
        how="throwaway cluster in var/pg"
    fi
    _ensure_database "$port" hitl
    export DATABASE_URL="postgres://postgres@127.0.0.1:$port/hitl"
    _say "postgres: $DATABASE_URL ($how)"
}
