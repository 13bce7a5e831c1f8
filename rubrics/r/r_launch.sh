# Root launcher of the testthat grader's two R processes (research-bench rubrics):
#   sh r_launch.sh RB RUN_DIR TESTS CANARY WORKSPACE SECONDS
# RUN_DIR (copies of the held-out tests under h/, our canary file) becomes the referee's alone
# (uid 2999, mode 0700). Two FIFOs in RUN_DIR.io connect the processes of rb_bridge.R: the
# worker (the agent's uid 1000, cwd the workspace, this exec's environment, stdio to
# /dev/null) sources the agent's files and runs its functions; the referee (uid 2999, cwd
# RUN_DIR, a minimal environment) runs the tests and writes RUN_DIR/testthat.tsv. When the
# referee ends (or SECONDS pass) every process of both uids is killed, then the report is
# printed on stdout (at most 16 MiB + 1 byte). Exit 3: no report (the referee's stderr tail on
# stderr); 4: timed out; 81: no setpriv; 90: our own set-up failed.
set -u
rb="$1"; run="$2"; tests="$3"; canary="$4"; ws="$5"; secs="$6"
io="$run.io"
# rb_bridge.R is loaded with source() (one parse of the file), not run as `Rscript FILE`: R reads a
# script file as a console would, re-parsing its one long expression line after line (~0.18 s of
# CPU in each process).
load='source(Sys.getenv("RB_BRIDGE"))'
command -v setpriv >/dev/null 2>&1 || exit 81
rm -rf "$io" && mkdir -p "$io" && chmod 755 "$io" || exit 90
mkfifo "$io/a2w" "$io/w2a" || exit 90
chown 2999:1000 "$io/a2w" "$io/w2a" && chmod 640 "$io/a2w" && chmod 420 "$io/w2a" || exit 90
mkdir -p "$run/tmp" && chown -R 2999:2999 "$run" && chmod 700 "$run" || exit 90
(
  cd "$ws" || exit 1
  HOME="${HOME:-/tmp}" RB_BRIDGE="$rb/rb_bridge.R" exec setpriv --reuid=1000 --regid=1000 \
    --clear-groups Rscript --vanilla -e "$load" worker "$io/a2w" "$io/w2a"
) </dev/null >/dev/null 2>&1 &
cd "$run" || exit 90
env -i PATH="$PATH" HOME="$run" TMPDIR="$run/tmp" LANG=C.UTF-8 RB_WORKSPACE="$ws" \
  WORKSPACE="${WORKSPACE:-$ws}" RB_HIDDEN="$run/h" RB_BRIDGE="$rb/rb_bridge.R" \
  timeout -s KILL "$secs" setpriv --reuid=2999 --regid=2999 --clear-groups \
  Rscript --vanilla -e "$load" referee "$io/a2w" "$io/w2a" "$tests" "$run/testthat.tsv" \
  "$canary" "$run/h" </dev/null >/dev/null 2>"$run/referee.err"
code=$?
setpriv --reuid=1000 --regid=1000 --clear-groups sh -c "kill -9 -1" 2>/dev/null
setpriv --reuid=2999 --regid=2999 --clear-groups sh -c "kill -9 -1" 2>/dev/null
if [ "$code" = 137 ] || [ "$code" = 124 ]; then echo "the R test run timed out" >&2; exit 4; fi
if [ ! -f "$run/testthat.tsv" ] || [ -L "$run/testthat.tsv" ]; then
  tail -c 4000 "$run/referee.err" >&2
  exit 3
fi
head -c 16777217 "$run/testthat.tsv"
