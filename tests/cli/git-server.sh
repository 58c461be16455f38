#!/usr/bin/env bash
# Self-test of tests/fixtures/git-server.sh + lfs-server.py (the local stand-in for the Hub):
# smart-HTTP fetch/push with the token from a command-line credential helper, the real git-lfs
# client pushing, cloning and smudging through the LFS server, wrong tokens, the Hub's 10 MiB
# rule, Hub-style multipart uploads driven with curl, fault injection, stop-http/start-http.
. "$(dirname "$0")/../lib.sh"
GS=$TOP/tests/fixtures/git-server.sh
PY=/usr/bin/python3
export GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org \
	GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org

if [ -z "${LMTK_GIT_URL:-}" ] || [ "$(curl -s -o /dev/null -w '%{http_code}' "$LMTK_GIT_URL/x.git/info/refs")" != 401 ]; then
	fail git_fixture_available "LMTK_GIT_URL=${LMTK_GIT_URL:-unset} does not answer 401: the fixture did not start"
	exit 1
fi
ok git_fixture_available

# g: git with the token from the environment through a command-line credential helper (never
# written to .git/config) and the LFS filter whatever the system config says.
g() {
	git -c credential.helper= \
		-c 'credential.helper=!f() { echo username=x; echo "password=$LMTK_GIT_TOKEN"; }; f' \
		-c filter.lfs.clean='git-lfs clean -- %f' -c filter.lfs.smudge='git-lfs smudge -- %f' \
		-c filter.lfs.process='git-lfs filter-process' -c filter.lfs.required=true "$@"
}
stat_of() { bash "$GS" stats "$1" "$2" "$3"; }   # DIR NAME KEY
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
sha() { sha256sum "$1" | cut -c1-64; }
gone() { ! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

# --- the shared fixture: plain git + git-lfs round trip ----------------------------------------
N=st$$/repo
URL=$(bash "$GS" create "$LMTK_GIT_DIR" "$N")
check create_prints_url [ "$URL" = "$LMTK_GIT_URL/$N.git" ]
check create_default_branch_main [ "$(git --git-dir="$LMTK_GIT_DIR/repos/$N.git" symbolic-ref HEAD)" = refs/heads/main ]
check git_anonymous_401 [ "$(code "$URL/info/refs?service=git-upload-pack")" = 401 ]
check git_wrong_token_401 [ "$(code -u x:nope "$URL/info/refs?service=git-upload-pack")" = 401 ]
check git_basic_any_user_200 [ "$(code -u anybody:"$LMTK_GIT_TOKEN" "$URL/info/refs?service=git-receive-pack")" = 200 ]
check git_bearer_200 [ "$(code -H "Authorization: Bearer $LMTK_GIT_TOKEN" "$URL/info/refs?service=git-upload-pack")" = 200 ]

W=$T/w1
expect_rc clone_empty 0 g clone "$URL" "$W"
check clone_no_token_in_config sh -c "! grep -r -- '$LMTK_GIT_TOKEN' '$W/.git/config'"
(
	cd "$W" || exit 1
	git lfs install --local >/dev/null && git lfs track '*.bin' >/dev/null &&
	echo "hello, hub" >small.txt &&
	head -c 3000000 /dev/urandom >big.bin &&
	head -c 2000000 /dev/urandom >mid.dat &&   # not LFS: a pack > http.postBuffer, sent chunked
	git add -A && git commit -qm one
) || fail lfs_setup "could not commit in $W"
OID=$(sha "$W/big.bin")
t0=$SECONDS
expect_rc push_with_lfs 0 g -C "$W" push origin main
echo "push of 3 MB LFS + 2 MB plain: $((SECONDS - t0)) s"
lacks push_no_locking_noise "$T/err" 'Locking support|locking API|Authentication error'
check lfs_object_on_server cmp -s "$W/big.bin" "$LMTK_GIT_DIR/lfs/$N/${OID:0:2}/${OID:2:2}/$OID"
git --git-dir="$LMTK_GIT_DIR/repos/$N.git" show main:big.bin >"$T/pointer" 2>&1
contains repo_holds_pointer "$T/pointer" "^oid sha256:$OID$"
check lfs_stored_once [ "$(bash "$GS" stats "$LMTK_GIT_DIR" "$N" | $PY -c 'import json,sys; print(json.load(sys.stdin)["stored"].get(sys.argv[1]))' "$OID")" = 1 ]
check lfs_one_put [ "$(stat_of "$LMTK_GIT_DIR" "$N" 'PUT object 200')" = 1 ]
check lfs_verify_called [ "$(stat_of "$LMTK_GIT_DIR" "$N" 'POST verify 200')" = 1 ]
check push_no_token_in_dotgit sh -c "! grep -r -- '$LMTK_GIT_TOKEN' '$W/.git'"

W2=$T/w2
expect_rc clone_smudges 0 g clone "$URL" "$W2"
check clone_big_identical cmp -s "$W/big.bin" "$W2/big.bin"
check clone_small_identical cmp -s "$W/small.txt" "$W2/small.txt"
check clone_mid_identical cmp -s "$W/mid.dat" "$W2/mid.dat"
git -C "$W2" lfs ls-files >"$T/ls" 2>&1
contains clone_lfs_ls_files "$T/ls" 'big\.bin'
check clone_no_token_in_dotgit sh -c "! grep -r -- '$LMTK_GIT_TOKEN' '$W2/.git'"
expect_rc url_without_dot_git 0 g ls-remote "$LMTK_GIT_URL/$N"
contains url_without_dot_git_lists_main "$T/out" 'refs/heads/main'

# a second push with the same LFS object: nothing uploaded again
(cd "$W2" && echo more >>small.txt && git commit -qam two) || fail second_commit "commit failed"
expect_rc push_again 0 g -C "$W2" push origin main
check push_again_no_upload [ "$(stat_of "$LMTK_GIT_DIR" "$N" 'PUT object 200')" = 1 ]

# --- wrong token: fails with 401, a bounded number of attempts ---------------------------------
# (git-lfs 3.3 itself resubmits a 401 forever when the credential helper keeps returning the same
# wrong password -- git-lfs/git-lfs#2833, fixed upstream by PR #6231 -- so the real client is only
# run here without any credentials; the counters are checked exact with curl.)
(cd "$W2" && head -c 100000 /dev/urandom >other.bin && git add other.bin && git commit -qm three) ||
	fail third_commit "commit failed"
expect_rc lfs_push_no_credentials_fails 2 timeout 60 git -c credential.helper= -C "$W2" lfs push origin main
contains lfs_push_no_credentials_says_why "$T/err" 'credentials .* not found|could not read Username'
check lfs_nothing_stored_without_token [ "$(stat_of "$LMTK_GIT_DIR" "$N" 'PUT object 200')" = 1 ]
b401=$(stat_of "$LMTK_GIT_DIR" "$N" 'POST batch-upload 401') s401=$(stat_of "$LMTK_GIT_DIR" - 'status 401')
for _ in 1 2 3; do
	curl -s -o /dev/null -u x:hf_wrong -H 'Accept: application/vnd.git-lfs+json' \
		--data-binary '{"operation":"upload","objects":[]}' "$URL/info/lfs/objects/batch"
done
check lfs_401s_counted_exactly [ "$(($(stat_of "$LMTK_GIT_DIR" "$N" 'POST batch-upload 401') - b401))" = 3 ]
check lfs_401s_counted_in_total [ "$(($(stat_of "$LMTK_GIT_DIR" - 'status 401') - s401))" = 3 ]
(cd "$W2" && git reset -q --hard HEAD~1 && echo plain >>small.txt && git commit -qam four) ||
	fail fourth_commit "commit failed"
git401() { grep -c "^[^ ]* 401 [A-Z]* /$N\.git/" "$LMTK_GIT_DIR/log/git.log"; }
a401=$(git401)
LMTK_GIT_TOKEN=hf_wrong expect_rc git_push_wrong_token_fails 128 g -C "$W2" push origin main
contains git_push_wrong_token_says_auth "$T/err" 'Authentication failed'
n=$(($(git401) - a401))
echo "git with a wrong token: $n 401s (anonymous probe + one retry with the helper's password)"
check git_wrong_token_two_401s [ "$n" = 2 ]
expect_rc git_push_right_token_after 0 g -C "$W2" push origin main

# --- the Hub's 10 MiB rule for non-LFS files ----------------------------------------------------
(cd "$W2" && head -c 11000000 /dev/urandom >huge.dat && git add huge.dat && git commit -qm huge) ||
	fail huge_commit "commit failed"
expect_rc push_11mb_plain_rejected 1 g -C "$W2" push origin main
contains push_11mb_plain_message "$T/err" 'rejected because it contains files larger than 10 MiB'
(cd "$W2" && git reset -q --hard HEAD~1)

# --- LFS batch API details with curl ------------------------------------------------------------
LFS=$URL/info/lfs
batch() {  # TOKEN JSON -> body in $T/batch, prints the status, headers in $T/batch.h
	curl -s -o "$T/batch" -D "$T/batch.h" -w '%{http_code}' -u "x:$1" \
		-H 'Accept: application/vnd.git-lfs+json' -H 'Content-Type: application/vnd.git-lfs+json' \
		--data-binary "$2" "$LFS/objects/batch"
}
jq_py() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($1)" "$T/batch"; }
check batch_wrong_token_401 [ "$(batch nope '{"operation":"upload","objects":[]}')" = 401 ]
contains batch_401_lfs_authenticate "$T/batch.h" '^LFS-Authenticate: Basic realm="lfs"'
check batch_bearer_200 [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $LMTK_GIT_TOKEN" \
	-H 'Accept: application/vnd.git-lfs+json' --data-binary '{"operation":"download","objects":[]}' "$LFS/objects/batch")" = 200 ]
check batch_wrong_accept_406 [ "$(curl -s -o /dev/null -w '%{http_code}' -u "x:$LMTK_GIT_TOKEN" \
	-H 'Accept: application/json' --data-binary '{"operation":"download","objects":[]}' "$LFS/objects/batch")" = 406 ]
MISSING=$(printf missing | sha256sum | cut -c1-64)
batch "$LMTK_GIT_TOKEN" "{\"operation\":\"download\",\"objects\":[{\"oid\":\"$OID\",\"size\":3000000},{\"oid\":\"$MISSING\",\"size\":7}]}" >/dev/null
check batch_download_href [ "$(jq_py 'd["objects"][0]["actions"]["download"]["href"]' | cut -d/ -f1-3)" = "$LMTK_GIT_URL" ]
check batch_download_missing_404 [ "$(jq_py 'd["objects"][1]["error"]["code"]')" = 404 ]
batch "$LMTK_GIT_TOKEN" "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$OID\",\"size\":3000000}]}" >/dev/null
check batch_upload_present_no_actions [ "$(jq_py '"actions" in d["objects"][0]')" = False ]
printf 'abc' >"$T/abc"
ABC=$(sha "$T/abc")
batch "$LMTK_GIT_TOKEN" "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$ABC\",\"size\":3}]}" >/dev/null
PUT_URL=$(jq_py 'd["objects"][0]["actions"]["upload"]["href"]')
VERIFY_URL=$(jq_py 'd["objects"][0]["actions"]["verify"]["href"]')
TICKET=$(jq_py 'd["objects"][0]["actions"]["verify"]["header"]["Authorization"]')
printf 'abd' >"$T/abd"
check put_wrong_bytes_422 [ "$(code -X PUT --data-binary @"$T/abd" "$PUT_URL")" = 422 ]
check put_bad_signature_403 [ "$(code -X PUT --data-binary @"$T/abc" "${PUT_URL%sig=*}sig=00")" = 403 ]
check verify_needs_auth_401 [ "$(code --data-binary "{\"oid\":\"$ABC\",\"size\":3}" "$VERIFY_URL")" = 401 ]
check verify_before_upload_404 [ "$(code -u "x:$LMTK_GIT_TOKEN" --data-binary "{\"oid\":\"$ABC\",\"size\":3}" "$VERIFY_URL")" = 404 ]
check put_presigned_no_auth_200 [ "$(code -X PUT --data-binary @"$T/abc" "$PUT_URL")" = 200 ]
check verify_wrong_size_404 [ "$(code -u "x:$LMTK_GIT_TOKEN" --data-binary "{\"oid\":\"$ABC\",\"size\":4}" "$VERIFY_URL")" = 404 ]
check verify_200 [ "$(code -u "x:$LMTK_GIT_TOKEN" --data-binary "{\"oid\":\"$ABC\",\"size\":3}" "$VERIFY_URL")" = 200 ]
check verify_with_action_header_200 [ "$(code -H "Authorization: $TICKET" --data-binary "{\"oid\":\"$ABC\",\"size\":3}" "$VERIFY_URL")" = 200 ]
check verify_ticket_bound_to_size_401 [ "$(code -H "Authorization: $TICKET" --data-binary "{\"oid\":\"$ABC\",\"size\":4}" "$VERIFY_URL")" = 401 ]
check lfs_log_written grep -q "PUT /$N.git/info/lfs/objects/$ABC 200" "$LMTK_GIT_DIR/log/lfs.log"
check stats_endpoint [ "$(curl -s "http://127.0.0.1:$(cat "$LMTK_GIT_DIR/lfs.port")/stats" |
	$PY -c 'import json,sys; print(json.load(sys.stdin)["repos"][sys.argv[1]]["PUT object 422"])' "$N")" = 1 ]

# --- a private instance: multipart, fault injection, stop-http/start-http, stop -------------------
D=$T/gs
t0=$EPOCHREALTIME
if ! out=$(bash "$GS" start "$D" 2>"$T/gs.err"); then
	fail private_start "$(tail -c 600 "$T/gs.err")"
	exit 1
fi
echo "start: $($PY -c "print(round($EPOCHREALTIME - $t0, 2))") s"
echo "$out" >"$T/start.out"
contains private_start_prints_exports "$T/start.out" "^export LMTK_GIT_URL=http://127\.0\.0\.1:[0-9]+ LMTK_GIT_DIR=$D LMTK_GIT_TOKEN=hf_[0-9a-f]{32}$"
PORT=$(cat "$D/port")
check private_second_start_refused sh -c "! bash '$GS' start '$D' 2>/dev/null"
(
	eval "$out"
	U=$(bash "$GS" create "$D" hub/model)
	L=$U/info/lfs
	batch() {
		curl -s -o "$T/batch" -w '%{http_code}' -u "x:$LMTK_GIT_TOKEN" \
			-H 'Accept: application/vnd.git-lfs+json' -H 'Content-Type: application/vnd.git-lfs+json' \
			--data-binary "$1" "$L/objects/batch"
	}
	head -c 2621440 /dev/urandom >"$T/mp"   # 2.5 MiB: 3 parts of 1 MiB
	O=$(sha "$T/mp")
	REQ="{\"operation\":\"upload\",\"transfers\":[\"basic\",\"multipart\"],\"ref\":{\"name\":\"refs/heads/main\"},\"objects\":[{\"oid\":\"$O\",\"size\":2621440}],\"hash_algo\":\"sha256\"}"
	echo 1048576 >"$D/lfs-multipart"
	check mp_batch_200 [ "$(batch "$REQ")" = 200 ]
	check mp_transfer_multipart [ "$(jq_py 'd["transfer"]')" = multipart ]
	check mp_chunk_size_string [ "$(jq_py 'repr(d["objects"][0]["actions"]["upload"]["header"]["chunk_size"])')" = "'1048576'" ]
	check mp_part_keys [ "$(jq_py '" ".join(sorted(k for k in d["objects"][0]["actions"]["upload"]["header"] if k.isdigit()))')" = "00001 00002 00003" ]
	check mp_has_verify [ "$(jq_py '"verify" in d["objects"][0]["actions"]')" = True ]
	COMPLETE=$(jq_py 'd["objects"][0]["actions"]["upload"]["href"]')
	VERIFY=$(jq_py 'd["objects"][0]["actions"]["verify"]["href"]')
	mapfile -t PARTS < <(jq_py '"\n".join(u for _, u in sorted((int(k), u) for k, u in d["objects"][0]["actions"]["upload"]["header"].items() if k.isdigit()))')
	split -b 1048576 -d -a 1 "$T/mp" "$T/mp.part"
	etags=() ok_parts=1
	for i in 0 1 2; do
		e=$(curl -s -D - -o /dev/null -X PUT --data-binary @"$T/mp.part$i" "${PARTS[$i]}" | tr -d '\r' |
			sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
		[ -n "$e" ] || ok_parts=0
		etags+=("$e")
	done
	check mp_parts_put_with_etags [ "$ok_parts" = 1 ]
	check mp_complete_wrong_etag_400 [ "$(code -H 'Content-Type: application/vnd.git-lfs+json' --data-binary \
		"{\"oid\":\"$O\",\"parts\":[{\"partNumber\":1,\"etag\":\"x\"},{\"partNumber\":2,\"etag\":${etags[1]}},{\"partNumber\":3,\"etag\":${etags[2]}}]}" "$COMPLETE")" = 400 ]
	PAY=$($PY -c 'import json,sys; print(json.dumps({"oid": sys.argv[1], "parts": [{"partNumber": i + 1, "etag": e} for i, e in enumerate(sys.argv[2:])]}))' "$O" "${etags[@]}")
	check mp_complete_200 [ "$(code -H 'Content-Type: application/vnd.git-lfs+json' --data-binary "$PAY" "$COMPLETE")" = 200 ]
	check mp_verify_200 [ "$(code -u "x:$LMTK_GIT_TOKEN" --data-binary "{\"oid\":\"$O\",\"size\":2621440}" "$VERIFY")" = 200 ]
	check mp_object_stored cmp -s "$T/mp" "$D/lfs/hub/model/${O:0:2}/${O:2:2}/$O"
	check mp_stored_once [ "$(bash "$GS" stats "$D" hub/model | $PY -c 'import json,sys; print(json.load(sys.stdin)["stored"][sys.argv[1]])' "$O")" = 1 ]
	batch "$REQ" >/dev/null
	check mp_then_no_actions [ "$(jq_py '"actions" in d["objects"][0]')" = False ]
	# a bad assembly: parts of other bytes
	head -c 100 /dev/urandom >"$T/mp2"; O2=$(sha "$T/mp2")
	batch "{\"operation\":\"upload\",\"transfers\":[\"multipart\"],\"objects\":[{\"oid\":\"$O2\",\"size\":100}]}" >/dev/null
	C2=$(jq_py 'd["objects"][0]["actions"]["upload"]["href"]')
	P2=$(jq_py 'd["objects"][0]["actions"]["upload"]["header"]["00001"]')
	e=$(head -c 100 /dev/zero | curl -s -D - -o /dev/null -X PUT --data-binary @- "$P2" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
	check mp_complete_wrong_bytes_422 [ "$(code -H 'Content-Type: application/vnd.git-lfs+json' --data-binary \
		"{\"oid\":\"$O2\",\"parts\":[{\"partNumber\":1,\"etag\":$e}]}" "$C2")" = 422 ]
	# basic-only clients get basic unless forced
	batch "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$O2\",\"size\":100}]}" >/dev/null
	check mp_basic_client_gets_basic [ "$(jq_py 'd["transfer"] + " " + str("chunk_size" in d["objects"][0]["actions"]["upload"]["header"])')" = "basic False" ]
	echo "4096 force" >"$D/lfs-multipart"
	batch "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[{\"oid\":\"$O2\",\"size\":10000}]}" >/dev/null
	check mp_forced [ "$(jq_py 'd["transfer"] + " " + d["objects"][0]["actions"]["upload"]["header"]["chunk_size"] + " " + str(sum(k.isdigit() for k in d["objects"][0]["actions"]["upload"]["header"]))')" = "multipart 4096 3" ]
	echo "1048576 min=5000" >"$D/lfs-multipart"
	batch "{\"operation\":\"upload\",\"transfers\":[\"basic\",\"multipart\"],\"objects\":[{\"oid\":\"$O2\",\"size\":100},{\"oid\":\"$ABC\",\"size\":6000}]}" >/dev/null
	check mp_min_size [ "$(jq_py '" ".join(str("chunk_size" in o["actions"]["upload"]["header"]) for o in d["objects"])')" = "False True" ]
	rm -f "$D/lfs-multipart"

	# fault injection: the first PUT fails with 500, git-lfs retries, the push completes
	W3=$T/w3
	g clone -q "$U" "$W3" 2>/dev/null
	(cd "$W3" && git lfs install --local >/dev/null && git lfs track '*.bin' >/dev/null &&
		head -c 500000 /dev/urandom >a.bin && git add -A && git commit -qm a) || fail fi_commit "commit failed"
	echo 1 >"$D/lfs-fail-uploads"
	expect_rc fault_push_retries 0 g -C "$W3" push origin main
	check fault_one_500 [ "$(stat_of "$D" hub/model 'PUT object 500')" = 1 ]
	check fault_then_200 [ "$(stat_of "$D" hub/model 'PUT object 200')" = 1 ]
	check fault_file_consumed [ ! -e "$D/lfs-fail-uploads" ]
	echo status=503 >"$D/lfs-fail-batch"
	(cd "$W3" && head -c 1000 /dev/urandom >b.bin && git add -A && git commit -qm b) || fail fi_commit2 "commit failed"
	t1=$SECONDS
	expect_rc fault_batch_503_push_fails 1 g -C "$W3" push origin main
	echo "push against a failing batch endpoint gave up after $((SECONDS - t1)) s, $(stat_of "$D" hub/model 'POST batch-upload 503') batch attempts"
	rm -f "$D/lfs-fail-batch"

	# lighttpd down mid-session, back on the same port; the LFS server stays up
	LFSPID=$(cat "$D/lfs.pid") HTTPPID=$(cat "$D/lighttpd.pid")
	expect_rc stop_http 0 bash "$GS" stop-http "$D"
	check stop_http_lighttpd_gone gone "$HTTPPID"
	check stop_http_lfs_alive kill -0 "$LFSPID"
	check stop_http_refused [ "$(code "$U/info/refs")" = 000 ]
	expect_rc push_while_down_fails 128 g -C "$W3" push origin main
	expect_rc start_http 0 bash "$GS" start-http "$D"
	check start_http_same_port [ "$(code "http://127.0.0.1:$PORT/hub/model.git/info/refs")" = 401 ]
	expect_rc push_after_restart 0 g -C "$W3" push origin main
	rm -rf "$T/w4"
	g clone -q "$U" "$T/w4" 2>/dev/null
	check clone_after_restart cmp -s "$W3/b.bin" "$T/w4/b.bin"
	check clone_after_restart_a cmp -s "$W3/a.bin" "$T/w4/a.bin"
	expect_rc start_http_idempotent 0 bash "$GS" start-http "$D"
)
LFSPID=$(cat "$D/lfs.pid") HTTPPID=$(cat "$D/lighttpd.pid")
expect_rc stop 0 bash "$GS" stop "$D"
check stop_lfs_gone gone "$LFSPID"
check stop_lighttpd_gone gone "$HTTPPID"
check stop_port_closed [ "$(code "http://127.0.0.1:$PORT/")" = 000 ]
check stop_pidfiles_removed [ ! -e "$D/lfs.pid" -a ! -e "$D/lighttpd.pid" ]
expect_rc stop_idempotent 0 bash "$GS" stop "$D"
