#!/usr/bin/env bash
# hub-sync against a real smart-HTTP git server (lighttpd + git http-backend, HTTP Basic with the
# token) and the test LFS batch-API server (tests/fixtures/git-server.sh), checked with Debian's
# own git and git-lfs: what hub-sync pushed must clone and smudge byte for byte.
. "$(dirname "$0")/../lib.sh"
HS=$BIN/hub-sync
FX=$TOP/tests/fixtures/git-server.sh

if [ -z "${LMTK_GIT_URL:-}" ] || [ -z "${LMTK_GIT_DIR:-}" ]; then
	fail git_server_fixture "no git server (LMTK_GIT_URL unset): run through tests/run.sh"
	exit 1
fi
G=$LMTK_GIT_DIR
export GIT_TERMINAL_PROMPT=0 HOME=$T/home
unset HF_TOKEN
mkdir -p "$HOME"
git config --global user.name "hub-sync test" && git config --global user.email test@example.org
git config --global init.defaultBranch main
TOKEN=$LMTK_GIT_TOKEN
printf '%s\n' "$TOKEN" >"$T/token" && chmod 600 "$T/token"
printf 'hf_not_the_token_0123456789\n' >"$T/bad-token" && chmod 600 "$T/bad-token"
ALL=$T/all-output   # every stdout and stderr of hub-sync, searched for the token at the end
: >"$ALL"

# git with the token from a credential helper given on the command line: nothing stored
g() { git -c credential.helper= -c 'credential.helper=!f() { echo username=x; echo "password=$LMTK_GIT_TOKEN"; }; f' "$@"; }
# new_repo NAME: an empty repository P/NAME on the server and a clone of it in $T/NAME
P=hs$$
new_repo() {
	local url; url=$(bash "$FX" create "$G" "$P/$1") || return 1
	g clone -q "$url" "$T/$1" 2>/dev/null
}
# hs DIR ARGS...: hub-sync with the token file and quick retries; output in $T/out, $T/err
hs() {
	local dir=$1; shift
	"$HS" --repo-path "$dir" --token-file "$T/token" --retry-delay 0.05 "$@" >"$T/out" 2>"$T/err"
	local rc=$?
	cat "$T/out" "$T/err" >>"$ALL"
	return $rc
}
# expect_hs NAME RC DIR ARGS...
expect_hs() {
	local n=$1 want=$2; shift 2
	hs "$@"; local rc=$?
	if [ "$rc" = "$want" ]; then ok "$n"; return 0; fi
	fail "$n" "exit $rc, wanted $want; stderr: $(head -c 600 "$T/err")"; return 1
}
# fresh clone of NAME into DIR with the real git + git-lfs (smudging)
clone_check() { rm -rf "$2"; g clone -q "$LMTK_GIT_URL/$P/$1.git" "$2" 2>"$T/clone.err"; }
# update_check DIR: the clone DIR (made by clone_check) brought to the remote's main with the real
# git + git-lfs, its tree then the remote's exactly, as a fresh clone's would be (reset --hard,
# clean); only what is new is fetched and smudged, where a fresh clone of "run" fetches its
# every object again (seven of those were a minute of this test).  A failed update removes DIR,
# as a failed clone leaves none.
update_check() {
	{ g -C "$1" fetch -q origin && g -C "$1" reset -q --hard origin/main && git -C "$1" clean -qffdx; } 2>"$T/clone.err" ||
		{ echo "    update of $1 failed: $(head -c 400 "$T/clone.err")"; rm -rf "$1"; return 1; }
}
lfs_stat() { bash "$FX" stats "$G" "$P/$1" "$2"; }
git_401s() { grep -c " /$P/$1.git/.* 401 " "$G/log/access.log"; }
# stored_once N: the LFS server stored N objects for "run", each exactly once
stored_once() {
	bash "$FX" stats "$G" "$P/run" | /usr/bin/python3 -c 'import json, sys
s = json.load(sys.stdin)["stored"]
sys.exit(0 if len(s) == int(sys.argv[1]) and all(v == 1 for v in s.values()) else 1)' "$1"
}
ahead() { git -C "$1" rev-list --count "origin/main..HEAD" 2>/dev/null || git -C "$1" rev-list --count HEAD; }
# a training-log-like text file of about $2 bytes
mklog() {
	awk -v n="$2" -v s="${3:-0}" 'BEGIN { srand(7 + s); b = 0; i = s;
		while (b < n) { l = sprintf(" iteration %8d/  300000 | consumed samples: %10d | elapsed time per iteration (ms): %.1f | learning rate: %.3E | lm loss: %.6E | grad norm: %.3f |", i, i * 2048, 20000 + rand() * 900, 6e-5 * rand(), 2 + rand(), rand() * 3);
		print l; b += length(l) + 1; i++ } }'
}

# --- usage and bad input ------------------------------------------------------------------------
expect_rc usage_no_repo_exits_2 2 "$HS" --patterns x
contains usage_names_repo_path "$T/err" 'give --repo-path'
expect_rc usage_no_patterns_exits_2 2 "$HS" --repo-path "$T"
contains usage_says_patterns "$T/err" 'nothing to sync: give --patterns'
expect_rc help_exits_0 0 "$HS" --help
contains help_lists_allow_deletions "$T/out" '--allow-deletions'
expect_rc not_a_clone_exits_2 2 "$HS" --repo-path "$T" --patterns x
expect_rc bad_size_exits_2 2 "$HS" --repo-path "$T" --patterns x --lfs-threshold lots
expect_rc segment_over_threshold_exits_2 2 "$HS" --repo-path "$T" --patterns x --lfs-threshold 1M --segment-size 2M
expect_rc missing_token_file_exits_2 2 "$HS" --repo-path "$T" --patterns x --token-file "$T/nope"

new_repo creds
git -C "$T/creds" remote set-url origin "http://x:$TOKEN@${LMTK_GIT_URL#http://}/$P/creds.git"
echo hi >"$T/creds/a.txt"
expect_rc credentials_in_url_refused 2 "$HS" --repo-path "$T/creds" --patterns '*.txt'
contains credentials_in_url_says_why "$T/err" 'has credentials in it'
lacks credentials_in_url_message_hides_token "$T/err" "$TOKEN"
cat "$T/out" "$T/err" >>"$ALL"
git -C "$T/creds" remote set-url origin "$LMTK_GIT_URL/$P/creds.git"
git -C "$T/creds" checkout -q --detach 2>/dev/null || git -C "$T/creds" commit -q --allow-empty -m x
git -C "$T/creds" checkout -q --detach
expect_rc detached_head_exits_2 2 "$HS" --repo-path "$T/creds" --patterns '*.txt'
contains detached_head_says_so "$T/err" 'HEAD is detached'

new_repo empty
expect_hs empty_clone_nothing_to_sync 0 "$T/empty" --patterns logs
contains empty_clone_says_nothing_to_sync "$T/err" 'nothing to sync'
check empty_clone_no_commit_made [ -z "$(git -C "$T/empty" rev-parse -q --verify HEAD)" ]

# --- first sync: every kind of file, then the real git-lfs clones it byte for byte ---------------
new_repo run || { fail make_repo "cannot create/clone a repository on the fixture"; exit 1; }
R=$T/run
mkdir -p "$R/logs/main" "$R/tensorboard/tr1" "$R/checkpoints/global_step100" "$R/other"
printf '*tfevents* filter=lfs diff=lfs merge=lfs -text\n*.pt filter=lfs diff=lfs merge=lfs -text\n' >"$R/.gitattributes"
git -C "$R" add .gitattributes && git -C "$R" commit -qm "Hub defaults" && g -C "$R" push -q origin main 2>/dev/null
mklog x 30000000 >"$R/logs/main/main_log.txt"                     # 30 MB growing text log: segments
head -c 3000000 /dev/urandom >"$R/tensorboard/tr1/events.out.tfevents.1700000000.node1"  # LFS by attribute
head -c 12000000 /dev/urandom >"$R/checkpoints/global_step100/mp_rank_00_model_states.pt"
head -c 11000000 /dev/urandom >"$R/logs/main/core dump [1].bin"   # binary over 10 MiB: LFS + new attribute
for i in $(seq 50); do echo "rank $i ok" >"$R/logs/main/rank-$i.txt"; done
echo '{"iteration": 100}' >"$R/checkpoints/latest.json"
echo "not synced" >"$R/other/notes.txt"
PATS=(--patterns 'logs/*/*' 'tensorboard/*/*tfevents*' 'checkpoints')

expect_hs dry_run_exits_0 0 "$R" "${PATS[@]}" --dry-run
contains dry_run_lists_lfs "$T/out" '^A lfs 12000000 checkpoints/global_step100/mp_rank_00_model_states.pt$'
contains dry_run_lists_segments "$T/out" '^A seg [0-9]+ logs/main/main_log.txt$'
check dry_run_commits_nothing [ "$(git -C "$R" rev-list --count HEAD)" = 1 ]
check dry_run_stores_no_lfs_object [ ! -d "$R/.git/lfs/objects" ]

LMTK_PROGRESS=1 expect_hs first_sync_exits_0 0 "$R" "${PATS[@]}"
# the upload progress (forced into a file): ends on the 3 objects' 26000000 bytes, all sent
contains first_sync_progress_ends_at_the_lfs_bytes "$T/err" '^hub-sync: LFS uploads: sent 24\.80 MiB of 24\.80 MiB \(100%\), [0-9.]+ (KiB|MiB|GiB)/s, ETA 0:00:00$'
lacks first_sync_progress_not_on_stdout "$T/out" 'LFS uploads'
# the hashing before the uploads: its last line is all the LFS files' bytes, summed here by stat
lfs_bytes=$(( $(stat -c %s "$R/checkpoints/global_step100/mp_rank_00_model_states.pt" \
	"$R/tensorboard/tr1/events.out.tfevents.1700000000.node1" "$R/logs/main/core dump [1].bin" | paste -sd+) ))
lfs_mib=$(awk -v b="$lfs_bytes" 'BEGIN { printf "%.2f MiB", b / 1048576 }')
last=$(grep '^hub-sync: LFS files: hashed' "$T/err" | tail -1)
if [[ "$last" =~ ^hub-sync:\ LFS\ files:\ hashed\ ${lfs_mib}\ of\ ${lfs_mib}\ \(100%\),\ [0-9.]+\ (B|KiB|MiB|GiB|TiB)/s,\ ETA\ 0:00:00$ ]]; then
	ok first_sync_hashing_progress_ends_at_the_lfs_bytes
else
	fail first_sync_hashing_progress_ends_at_the_lfs_bytes "want hashed $lfs_mib of $lfs_mib; last line: ${last:-none}"
fi
lacks first_sync_hashing_progress_not_on_stdout "$T/out" 'hashed'
contains first_sync_tfevents_via_lfs "$T/out" '^A lfs 3000000 tensorboard/tr1/events.out.tfevents.1700000000.node1$'
contains first_sync_big_binary_via_lfs "$T/out" '^A lfs 11000000 logs/main/core dump \[1\].bin$'
contains first_sync_log_in_segments "$T/out" '^A seg [0-9]+ logs/main/main_log.txt$'
contains first_sync_small_file_plain "$T/out" '^A git 11 logs/main/rank-17.txt$'
lacks first_sync_leaves_other_paths "$T/out" 'other/notes.txt'
contains first_sync_summary "$T/err" 'committed [0-9a-f]+ \(55 files: 3 LFS, 1 in segments, 0 deleted\); uploaded 3 LFS objects'
contains gitattributes_gained_anchored_entry "$R/.gitattributes" '^/logs/main/core\[\[:space:\]\]dump\[\[:space:\]\]\\\[1\\\]\.bin filter=lfs diff=lfs merge=lfs -text$'
check first_sync_pushed_everything [ "$(ahead "$R")" = 0 ]
check local_git_status_clean [ -z "$(git -C "$R" status --porcelain -- logs tensorboard checkpoints)" ]

C=$T/clone
if clone_check run "$C"; then ok real_git_lfs_clones; else fail real_git_lfs_clones "$(cat "$T/clone.err")"; fi
same=1
for f in tensorboard/tr1/events.out.tfevents.1700000000.node1 checkpoints/global_step100/mp_rank_00_model_states.pt \
	"logs/main/core dump [1].bin" logs/main/rank-7.txt checkpoints/latest.json; do
	cmp -s "$R/$f" "$C/$f" || { same=0; echo "    differs: $f"; }
done
check lfs_files_smudged_byte_identical [ $same = 1 ]
check lfs_files_are_lfs_for_git_lfs [ "$(git -C "$C" lfs ls-files | wc -l)" = 3 ]
check log_segments_rebuild_the_log cmp -s <(cat "$C"/logs/main/main_log.txt.[0-9]*) "$R/logs/main/main_log.txt"
check log_segments_under_10MiB [ -z "$(find "$C/logs/main" -name 'main_log.txt.[0-9]*' -size +10240k)" ]
contains manifest_says_how_to_rebuild "$C/logs/main/main_log.txt.manifest" 'cat main_log.txt.\[0-9\]\* > main_log.txt'
check git_lfs_fsck_clean git -C "$C" lfs fsck
check first_sync_stored_3_objects stored_once 3

# --- nothing to do -----------------------------------------------------------------------------
b0=$(lfs_stat run requests)
expect_hs unchanged_exits_0 0 "$R" "${PATS[@]}"
contains unchanged_says_nothing_to_sync "$T/err" 'nothing to sync'
check unchanged_makes_no_lfs_request [ "$(lfs_stat run requests)" = "$b0" ]
touch "$R/checkpoints/global_step100/mp_rank_00_model_states.pt"   # same bytes, new mtime
expect_hs touched_lfs_file_exits_0 0 "$R" "${PATS[@]}"
check touched_lfs_file_makes_no_commit [ "$(git -C "$R" rev-list --count HEAD)" = "$(git -C "$C" rev-list --count HEAD)" ]

# --- an hour later: the log grew, tfevents grew --------------------------------------------------
nseg=$(ls "$C"/logs/main/main_log.txt.[0-9]* | wc -l)
mklog x 1000000 400000 >>"$R/logs/main/main_log.txt"
head -c 100000 /dev/urandom >>"$R/tensorboard/tr1/events.out.tfevents.1700000000.node1"
expect_hs hourly_sync_exits_0 0 "$R" "${PATS[@]}"
contains hourly_log_modified "$T/out" '^M seg [0-9]+ logs/main/main_log.txt$'
changed=$(git -C "$R" diff --name-only HEAD~1 HEAD -- logs/main | sort | tr '\n' ' ')
last=$(printf 'logs/main/main_log.txt.%05d' $((nseg - 1)))
case "$changed" in
"$last logs/main/main_log.txt.manifest "|"$last $(printf 'logs/main/main_log.txt.%05d' "$nseg") logs/main/main_log.txt.manifest ")
	ok hourly_sync_rewrites_only_the_tail ;;
*) fail hourly_sync_rewrites_only_the_tail "changed: $changed (had $nseg segments)" ;;
esac
contains hourly_pack_is_small "$T/err" 'pushed 1 commit to origin/main \(([0-9.]+ KiB|[0-3]\.[0-9]+ MiB)\)'
update_check "$C"
check hourly_log_still_rebuilds cmp -s <(cat "$C"/logs/main/main_log.txt.[0-9]*) "$R/logs/main/main_log.txt"
check hourly_tfevents_identical cmp -s "$R/tensorboard/tr1/events.out.tfevents.1700000000.node1" "$C/tensorboard/tr1/events.out.tfevents.1700000000.node1"

# --- deletions: a scratch purge must not delete the Hub's copy ---------------------------------
rm "$R/logs/main/rank-1.txt" "$R/logs/main/main_log.txt"
expect_hs deletion_not_synced_exits_0 0 "$R" "${PATS[@]}"
contains deletion_warns "$T/err" '2 deleted files not synced, the Hub keeps them \(--allow-deletions'
update_check "$C"
check deleted_file_stays_on_remote [ -f "$C/logs/main/rank-1.txt" ]
check deleted_log_segments_stay_on_remote [ -f "$C/logs/main/main_log.txt.00000" ]
expect_hs deletion_allowed_exits_0 0 "$R" "${PATS[@]}" --allow-deletions
contains deletion_allowed_lists_it "$T/out" '^D git 0 logs/main/rank-1.txt$'
contains deletion_allowed_lists_log "$T/out" '^D seg 0 logs/main/main_log.txt$'
update_check "$C"
check allowed_deletion_reaches_remote [ ! -e "$C/logs/main/rank-1.txt" -a ! -e "$C/logs/main/main_log.txt.00000" -a -f "$C/logs/main/rank-2.txt" ]

# --- multipart uploads, as the Hub answers large objects -----------------------------------------
echo 1048576 >"$G/lfs-multipart"
head -c 3500000 /dev/urandom >"$R/checkpoints/global_step100/optim.pt"
expect_hs multipart_upload_exits_0 0 "$R" "${PATS[@]}"
rm -f "$G/lfs-multipart"
check multipart_parts_put [ "$(lfs_stat run 'PUT part 200')" -ge 4 ]
check multipart_completed [ "$(lfs_stat run 'POST complete 200')" -ge 1 ]
update_check "$C"
check multipart_object_identical cmp -s "$R/checkpoints/global_step100/optim.pt" "$C/checkpoints/global_step100/optim.pt"

# --- transient failures: retried with backoff inside the run ------------------------------------
echo 2 >"$G/lfs-fail-uploads"
head -c 2000000 /dev/urandom >"$R/checkpoints/global_step100/a.pt"
LMTK_PROGRESS=1 expect_hs upload_failures_retried_exit_0 0 "$R" "${PATS[@]}" --retries 3
# the failed tries' bytes are sent again: the progress still ends with all it set out to send
# sent, at least the object's 2000000 bytes (1.91 MiB)
last=$(grep '^hub-sync: LFS uploads: sent' "$T/err" | tail -1)
if [[ $last =~ ^hub-sync:\ LFS\ uploads:\ sent\ ([0-9.]+\ [KMG]?i?B)\ of\ ([0-9.]+\ [KMG]?i?B)\ \(100%\),\ .*ETA\ 0:00:00$ ]] &&
   [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] &&
   awk -v v="${BASH_REMATCH[1]}" 'BEGIN { split(v, a, " "); exit !(a[2] == "MiB" && a[1] >= 1.91) }'; then
	ok upload_retried_progress_ends_at_100_percent
else
	fail upload_retried_progress_ends_at_100_percent "last line: ${last:-none}"
fi
contains upload_retry_announced "$T/err" 'HTTP 500.*retrying in'
update_check "$C"
check retried_object_identical cmp -s "$R/checkpoints/global_step100/a.pt" "$C/checkpoints/global_step100/a.pt"

# --- a failed run leaves its commit; the next run pushes it, with nothing new ----------------------
: >"$G/lfs-fail-uploads"   # every upload fails
head -c 2000000 /dev/urandom >"$R/checkpoints/global_step100/b.pt"
expect_hs upload_failing_exits_3 3 "$R" "${PATS[@]}" --retries 1
contains upload_failing_says_next_run "$T/err" 'gave up after 2 attempts.*next run pushes it'
check failed_run_leaves_local_commit [ "$(ahead "$R")" = 1 ]
rm -f "$G/lfs-fail-uploads"
expect_hs next_run_pushes_leftover_exits_0 0 "$R" "${PATS[@]}"
check next_run_pushed_it [ "$(ahead "$R")" = 0 ]
update_check "$C"
check leftover_object_identical cmp -s "$R/checkpoints/global_step100/b.pt" "$C/checkpoints/global_step100/b.pt"

# the server is down: exit 3 after the retries; up again: the next run completes
bash "$FX" stop-http "$G"
echo "step 200" >"$R/logs/main/rank-2.txt"
head -c 1500000 /dev/urandom >"$R/checkpoints/global_step100/c.pt"
expect_hs server_down_exits_3 3 "$R" "${PATS[@]}" --retries 2
contains server_down_says_cannot_connect "$T/err" "(Couldn't connect|Failed to connect|failed to connect)"
bash "$FX" start-http "$G"
expect_hs server_back_exits_0 0 "$R" "${PATS[@]}"
check server_back_pushed [ "$(ahead "$R")" = 0 ]

# the server goes down in the middle of a large upload
head -c 150000000 /dev/urandom >"$R/checkpoints/global_step100/big.pt"
rm -rf "$G"/lfs-tmp/put-* 2>/dev/null
( "$HS" --repo-path "$R" --token-file "$T/token" --retries 1 --retry-delay 0.5 "${PATS[@]}" >"$T/bg.out" 2>"$T/bg.err"; echo $? >"$T/bg.rc" ) &
bg=$!
wait_for 60 sh -c "ls '$G'/lfs-tmp/ 2>/dev/null | grep -q '^put-'"
bash "$FX" stop-http "$G"
wait $bg
cat "$T/bg.out" "$T/bg.err" >>"$ALL"
check server_down_mid_upload_exits_3 [ "$(cat "$T/bg.rc")" = 3 ]
check server_down_mid_upload_leaves_commit [ "$(ahead "$R")" = 1 ]
bash "$FX" start-http "$G"
expect_hs after_mid_upload_failure_next_run_exits_0 0 "$R" "${PATS[@]}"
update_check "$C"
check mid_upload_object_identical_after_next_run cmp -s "$R/checkpoints/global_step100/big.pt" "$C/checkpoints/global_step100/big.pt"

# --- a wrong token: one clear error, no retry storm ---------------------------------------------
head -c 1000000 /dev/urandom >"$R/checkpoints/global_step100/d.pt"
b401=$(lfs_stat run 'POST batch-upload 401')
hs "$R" "${PATS[@]}" --token-file "$T/bad-token" --retries 5; rc=$?
check wrong_token_lfs_exits_3 [ $rc = 3 ]
contains wrong_token_lfs_clear_error "$T/err" 'authentication failed: check the token'
check wrong_token_lfs_one_request [ "$(lfs_stat run 'POST batch-upload 401')" = $((b401 + 1)) ]
lacks wrong_token_lfs_no_retries "$T/err" 'retrying'
expect_hs right_token_then_syncs 0 "$R" "${PATS[@]}"
new_repo auth
echo hello >"$T/auth/a.txt"
sleep 1; a0=$(git_401s auth)
hs "$T/auth" --patterns '*.txt' --token-file "$T/bad-token" --retries 5; rc=$?
check wrong_token_git_exits_3 [ $rc = 3 ]
contains wrong_token_git_clear_error "$T/err" 'authentication failed: check the token'
sleep 1
a1=$(git_401s auth)
check wrong_token_git_bounded_requests [ $((a1 - a0)) -ge 1 -a $((a1 - a0)) -le 3 ]
[ $((a1 - a0)) -le 3 ] || echo "    $((a1 - a0)) requests answered 401"

# --- someone else pushed: a clear message, no damage ------------------------------------------------
clone_check auth "$T/other"
expect_hs auth_repo_syncs 0 "$T/auth" --patterns '*.txt'
echo web-edit >"$T/auth/README.md"
(cd "$T/other" && g pull -q 2>/dev/null; echo "edited on the Hub" >README.md && git add README.md &&
	git commit -qm web && g push -q origin main 2>/dev/null)
echo more >>"$T/auth/a.txt"
expect_hs non_fast_forward_exits_3 3 "$T/auth" --patterns '*.txt'
contains non_fast_forward_says_pull "$T/err" 'git pull in'

# --- two runs at once on the same clone ------------------------------------------------------------
for i in $(seq 100); do echo "$i" >"$R/logs/main/c$i.txt"; done
head -c 20000000 /dev/urandom >"$R/checkpoints/global_step100/e.pt"
( "$HS" --repo-path "$R" --token-file "$T/token" "${PATS[@]}" >"$T/c1.out" 2>"$T/c1.err"; echo $? >"$T/c1.rc" ) &
p1=$!
( "$HS" --repo-path "$R" --token-file "$T/token" "${PATS[@]}" >"$T/c2.out" 2>"$T/c2.err"; echo $? >"$T/c2.rc" ) &
p2=$!
wait $p1 $p2
cat "$T"/c[12].out "$T"/c[12].err >>"$ALL"
check concurrent_runs_both_exit_0 [ "$(cat "$T/c1.rc" "$T/c2.rc" | tr -d '\n')" = 00 ]
check concurrent_one_waited grep -q 'waiting for another hub-sync' "$T/c1.err" "$T/c2.err"
check concurrent_files_committed_once [ "$(cat "$T/c1.out" "$T/c2.out" | grep -c '^A git .* logs/main/c[0-9]*.txt$')" = 100 ]
check concurrent_local_fsck_clean git -C "$R" fsck --no-progress
check concurrent_remote_fsck_clean git --git-dir="$G/repos/$P/run.git" fsck --no-progress
check concurrent_pushed_everything [ "$(ahead "$R")" = 0 ]
update_check "$C"
check concurrent_result_identical cmp -s "$R/checkpoints/global_step100/e.pt" "$C/checkpoints/global_step100/e.pt"
flock "$R/.git/hub-sync.lock" sleep 4 &
holder=$!
sleep 0.3
expect_hs lock_held_exits_3 3 "$R" "${PATS[@]}" --lock-wait 1s
contains lock_held_names_it "$T/err" 'another hub-sync .* holds .*hub-sync.lock; gave up after'
wait $holder

# a .git/hub-sync.lock planted as a symbolic link (someone else's doing, in a shared clone): the
# file it names is neither truncated nor overwritten with the holder, a dangling one creates
# nothing, and the run stops before it touches the clone (exit 2: a clone a person must look at)
new_repo lnk
echo "keep me" >"$T/lnk/keep.txt"
printf 'precious\n' >"$T/precious"
ln -s "$T/precious" "$T/lnk/.git/hub-sync.lock"
expect_hs lock_symlink_refused_exits_2 2 "$T/lnk" --patterns '*.txt'
contains lock_symlink_names_it "$T/err" 'lnk/\.git/hub-sync\.lock: is a symbolic link; refusing'
check lock_symlink_target_untouched [ "$(cat "$T/precious")" = precious ]
check lock_symlink_nothing_committed [ -z "$(git -C "$T/lnk" rev-parse -q --verify HEAD)" ]
rm "$T/lnk/.git/hub-sync.lock"
ln -s "$T/made-by-hub-sync" "$T/lnk/.git/hub-sync.lock"
expect_hs lock_dangling_symlink_refused_exits_2 2 "$T/lnk" --patterns '*.txt'
check lock_dangling_symlink_creates_nothing [ ! -e "$T/made-by-hub-sync" ]
rm "$T/lnk/.git/hub-sync.lock"

check every_lfs_object_uploaded_once stored_once 11

# --- slurm/hub-sync.slurm, as cron.hourly submits it -----------------------------------------------
new_repo cron
mkdir -p "$T/cron/logs/x" && echo "from the wrapper" >"$T/cron/logs/x/main_log.txt"
finished() { [ -z "$(squeue --noheader --jobs="$1" 2>/dev/null)" ]; }
(
	export LMTK=$TOP HUB_SYNC_REPO=$T/cron HUB_SYNC_TOKEN_FILE=$T/token HUB_SYNC_PATTERNS='logs/*/*.txt other/*' \
		HUB_SYNC_ARGS='--retry-delay 0.1 --retries 1'
	if sinfo >/dev/null 2>&1; then
		J=$(sbatch --parsable --cpus-per-task=1 --output="$T/wrapper.out" "$TOP/slurm/hub-sync.slurm")
		wait_for 60 finished "$J"
	else
		echo "    (no SLURM cluster: running the script with bash)"
		bash "$TOP/slurm/hub-sync.slurm" >"$T/wrapper.out" 2>&1
	fi
)
cat "$T/wrapper.out" >>"$ALL"
contains slurm_wrapper_syncs "$T/wrapper.out" '^A git 17 logs/x/main_log.txt$'
clone_check cron "$T/cron-check"
check slurm_wrapper_result_on_remote cmp -s "$T/cron/logs/x/main_log.txt" "$T/cron-check/logs/x/main_log.txt"

# --- secrets: nowhere on disk in the clone, nowhere in what hub-sync printed -------------------------
lacks token_not_in_git_config "$R/.git/config" "$TOKEN"
check token_not_anywhere_in_dot_git [ -z "$(grep -rlF -- "$TOKEN" "$R/.git" "$T/auth/.git" 2>/dev/null)" ]
lacks token_not_in_any_output "$ALL" "$TOKEN"
check token_not_in_gitattributes_or_exclude [ -z "$(grep -lF -- "$TOKEN" "$R/.gitattributes" "$R/.git/info/exclude")" ]
