/* hub-sync_lfs.c - LFS pointers as git-lfs writes and reads them, the endpoint derivation rules,
 * which URLs get credentials, and the token scrubbed out of every message. */
#include "t.h"
#include "hub-sync/batch.h"
#include "hub-sync/lfs.h"
#include "hub-sync/token.h"

#include <stdlib.h>

int main(void)
{
	const char *oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
	char buf[2048];
	struct lfs_pointer p;

	T_CASE("pointer_format_is_git_lfs_canonical") {
		struct lfs_pointer q = {"", 12345};
		memcpy(q.oid, oid, 65);
		size_t n = lfs_pointer_format(&q, buf, sizeof buf);
		T_STREQ(buf, "version https://git-lfs.github.com/spec/v1\n"
			     "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
			     "size 12345\n");
		T_ASSERT(lfs_pointer_parse(buf, n, &p) == 0);
		T_STREQ(p.oid, oid);
		T_ASSERT(p.size == 12345);
	}

	T_CASE("pointer_parse_rejects_near_misses") {
		const char *bad[] = {
			"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1\n",
			"version https://git-lfs.github.com/spec/v1\nsize 1\n",
			"version https://example.org/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1\n",
			"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize x\n",
			"version https://git-lfs.github.com/spec/v1\noid sha256:4D7A214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1\n",
			"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1",
			"hello world\n",
			NULL,
		};
		for (int i = 0; bad[i]; i++)
			T_ASSERT(lfs_pointer_parse(bad[i], strlen(bad[i]), &p) < 0);
		/* extensions are allowed, as in the spec */
		snprintf(buf, sizeof buf, "version https://git-lfs.github.com/spec/v1\n"
			 "ext-0-foo sha256:%s\noid sha256:%s\nsize 7\n", oid, oid);
		T_ASSERT(lfs_pointer_parse(buf, strlen(buf), &p) == 0 && p.size == 7);
	}

	T_CASE("object_store_layout") {
		lfs_object_path("/r/.git", oid, buf, sizeof buf);
		T_STREQ(buf, "/r/.git/lfs/objects/4d/7a/4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393");
	}

	T_CASE("endpoint_from_remote_url_never_doubles_dot_git") {
		lfs_endpoint_from_url("https://huggingface.co/bigscience/tr11-176B-logs", buf, sizeof buf);
		T_STREQ(buf, "https://huggingface.co/bigscience/tr11-176B-logs.git/info/lfs");
		lfs_endpoint_from_url("https://huggingface.co/bigscience/tr11-176B-logs.git", buf, sizeof buf);
		T_STREQ(buf, "https://huggingface.co/bigscience/tr11-176B-logs.git/info/lfs");
		lfs_endpoint_from_url("http://127.0.0.1:8080/u/m.git/", buf, sizeof buf);
		T_STREQ(buf, "http://127.0.0.1:8080/u/m.git/info/lfs");
	}

	T_CASE("credentials_only_for_the_same_origin") {
		const char *ep = "https://huggingface.co/u/m.git/info/lfs";
		T_ASSERT(batch_same_origin("https://huggingface.co/u/m.git/info/lfs/objects/x?sig=1", ep));
		T_ASSERT(batch_same_origin("https://HuggingFace.co:443/other", ep));
		T_ASSERT(!batch_same_origin("https://s3.amazonaws.com/bucket/x", ep));
		T_ASSERT(!batch_same_origin("http://huggingface.co/u/m.git/info/lfs", ep));
		T_ASSERT(!batch_same_origin("https://huggingface.co:8443/u", ep));
		T_ASSERT(!batch_same_origin("https://huggingface.co.evil.org/u", ep));
	}

	T_CASE("token_scrubbed_from_messages") {
		char msg[512];
		setenv("HF_TOKEN", "hf_SeCrEtToKeN123", 1);
		T_ASSERT(token_load(NULL, msg, sizeof msg) == 0);
		T_STREQ(token_get(), "hf_SeCrEtToKeN123");
		snprintf(msg, sizeof msg, "failed: Authorization hf_SeCrEtToKeN123 for "
			 "https://user:hf_SeCrEtToKeN123@h/x and https://bob:pw12345@h/y, http://ann:ab@h/");
		token_scrub(msg);
		T_ASSERT(!strstr(msg, "SeCrEt"));
		T_ASSERT(!strstr(msg, "pw12345"));
		T_ASSERT(!strstr(msg, ":ab@"));
		T_ASSERT(strstr(msg, "https://bob:***@h/y") != NULL);
		T_ASSERT(token_url_has_password("https://u:p@h/x"));
		T_ASSERT(!token_url_has_password("https://u@h/x"));
		T_ASSERT(!token_url_has_password("https://h/x@y"));
		T_ASSERT(!token_url_has_password("https://h:8080/x"));
	}
	T_DONE();
}
