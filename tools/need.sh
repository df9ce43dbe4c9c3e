#!/bin/sh
# need.sh TARGET CHECK:PACKAGE ... - makes sure the Debian packages a make target needs are there.
#
# CHECK is an absolute path that must exist or a command that must be on PATH; an empty CHECK
# (":pkg") always counts as missing. When something is missing: as root on a machine with apt-get,
# the packages are installed (RECALL_NO_INSTALL=1 turns that off); otherwise one line names them and
# the target stops, instead of a raw compiler or shell error further down.
#
# need.sh --npm TARGET DIR PACKAGE@RANGE - an npm package the target needs, kept in DIR/node_modules
# (a folder under build/, never global): installed with the npm client from the registry when
# missing (RECALL_NO_INSTALL=1: named and stopped instead); nothing is fetched when it is there.
if [ "$1" = "--npm" ]; then
  target=$2 dir=$3 spec=$4
  name=${spec%@*}
  [ -e "$dir/node_modules/$name/package.json" ] && exit 0
  if [ -z "$RECALL_NO_INSTALL" ] && command -v npm >/dev/null 2>&1; then
    echo "make $target: installing npm package $spec into $dir" >&2
    mkdir -p "$dir" && npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$spec" >&2 && exit 0
    echo "make $target: 'npm install --prefix $dir $spec' failed (see npm's message above)" >&2
    exit 1
  fi
  echo "make $target needs the npm package $spec in $dir (npm install --prefix $dir $spec)" >&2
  exit 1
fi
target=$1
shift
missing=""
for spec in "$@"; do
  check=${spec%%:*}
  pkg=${spec#*:}
  case $check in
    "") ok=1 ;;
    /*) [ -e "$check" ]; ok=$? ;;
    *) command -v "$check" >/dev/null 2>&1; ok=$? ;;
  esac
  if [ "$ok" -ne 0 ]; then
    case " $missing " in *" $pkg "*) ;; *) missing="$missing $pkg" ;; esac
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "$RECALL_NO_INSTALL" ]; then
  echo "make $target: installing Debian packages:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  if apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null; then
    exit 0
  fi
  echo "make $target: 'apt-get install -y$missing' failed (see apt's message above)" >&2
  exit 1
fi
echo "make $target needs Debian packages:$missing (as root: apt-get install -y$missing)" >&2
exit 1
