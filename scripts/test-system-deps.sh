#!/usr/bin/env bash
# The system programs the test suite runs against, checked (and installed, when run as root on
# Debian) before `npm test`: beanstalkd 1.12 and gearmand 1.1.20 (the references of the
# differential suites), the stock `gearman` CLI, Perl's Gearman::Client and PHP's pecl gearman
# (real client libraries),
# Chromium with a font (the dashboard's end-to-end tests; Playwright downloads no browser),
# unshare (the full-disk test's tiny tmpfs), the openssl CLI and Python 3 (the TLS tests make their
# certificates with openssl, and connect with openssl s_client and Python's ssl) and PostgreSQL (cluster mode: the tests start a
# throwaway server of their own, so the packaged service is stopped), with pg_auto_failover (the
# database failover test builds a formation of its own: a monitor and two data nodes).
set -euo pipefail

need=()
command -v beanstalkd >/dev/null 2>&1 || need+=(beanstalkd)
command -v gearmand >/dev/null 2>&1 || [ -x /usr/sbin/gearmand ] || need+=(gearman-job-server)
command -v gearman >/dev/null 2>&1 || need+=(gearman-tools)
perl -MGearman::Client -e 1 >/dev/null 2>&1 || need+=(libgearman-client-perl)
php -r 'exit(class_exists("GearmanClient") ? 0 : 1);' >/dev/null 2>&1 || need+=(php-cli php-gearman)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
perl -MIO::Socket::SSL -e 1 >/dev/null 2>&1 || need+=(libio-socket-ssl-perl)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# Debian's package for PostgreSQL 15 (bookworm's); pg_autoctl itself comes with pg-auto-failover-cli.
{ command -v pg_autoctl >/dev/null 2>&1 && ls /usr/lib/postgresql/*/lib/pgautofailover.so >/dev/null 2>&1; } || need+=(postgresql-15-auto-failover)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "The test suite needs these Debian packages, which are not installed:" >&2
    echo "  sudo apt-get install --no-install-recommends ${need[*]}" >&2
    exit 1
  fi
  echo "Installing the test suite's system packages: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The packaged services are not wanted: the tests start their own servers on ephemeral ports.
  if command -v systemctl >/dev/null 2>&1; then
    for unit in beanstalkd gearman-job-server postgresql; do systemctl stop "$unit" >/dev/null 2>&1 || true; done
  fi
fi
