/* fuzz: a checkpoint's manifest.json (src/ckpt/shards.c sh_open_manifest), with one
 * small shard file beside it for the manifests that name rank_tp00_pp000.safetensors. */
#include <sys/stat.h>

#include "fuzz.h"
#include "ckpt/shards.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char shard[] = "\x10\0\0\0\0\0\0\0{}              ";
	struct sh_ckpt c;
	char dir[300], err[1024];
	snprintf(dir, sizeof dir, "%s/global_step1", fuzz_dir());
	mkdir(dir, 0755);
	fuzz_file("global_step1/manifest.json", data, size);
	fuzz_file("global_step1/rank_tp00_pp000.safetensors", shard, sizeof shard - 1);
	sh_open_manifest(&c, dir, err, sizeof err);
	sh_close(&c);   /* after a failure too: it frees what was read */
	return 0;
}
