# flock(1) between processes, run by run.rs's `file_locks_match_linux` natively and
# under `uvfs run`: three racing read-modify-write loops under one lock lose no update;
# -n fails while another holds the lock, and succeeds after; shared and exclusive.
# $1: a directory to work in.
d=$1; f=$d/cnt; echo 0 > $f
inc() { for i in $(seq 15); do flock $d/lock -c "n=\$(cat $f); sleep 0.005; echo \$((n+1)) > $f"; done; }
inc & inc & inc & wait; cat $f
flock $d/l -c 'sleep 0.6' & sleep 0.2
flock -n $d/l -c true; echo nb=$?
flock -s -n $d/l -c true; echo shared-nb=$?
wait
flock -n $d/l -c true; echo after=$?
exec 9>$d/l9; flock -s 9; flock -n -s $d/l9 -c true; echo sh-sh=$?; flock -n $d/l9 -c true; echo sh-ex=$?; flock -u 9; flock -n $d/l9 -c true; echo unlocked=$?
