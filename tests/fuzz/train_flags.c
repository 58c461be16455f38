/* fuzz: train's flag parser and plan, end to end - `bin/train --dry-run` run on a model's flags
 * followed by flags and values the input picks: every flag train --help lists, with values at
 * and past every edge (0, -1, 2^31, 2^63, 1e308, nan, 8x, ...).  Whatever the list, train exits
 * 0 or 2 (a plan, or a refusal naming the flag), never 1 or 3, never by a signal (the SIGFPE and
 * the negative counts that oversized flags once gave), and within 20 s.  Each input is one
 * process: the harness runs train as a user does. */
#include "fuzz.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

static const char *const values[] = {
	"0", "1", "2", "-1", "3", "8", "64", "1.5", "0.5", "1e-3", "1e308", "-1e308", "nan", "inf",
	"2147483648", "4294967297", "9223372036854775807", "99999999999999999999999", "1_000",
	"8x", "", "x", "65536", "1048577", "16777217", "1073741825", "1099511627777", "cpu", "adam",
	"lamb", "sgd", "alibi", "rotary", "cosine", "linear", "type:transformer", "h100", "a100",
	"json", "0.99", "1,2", "4 4 100", "bert", "t5", "GPT2BPETokenizer", "/nonexistent",
};

static char **flags;
static int nflags;

/* every --flag train --help shows */
static void load_flags(const char *train)
{
	char cmd[4200], line[4096];
	snprintf(cmd, sizeof cmd, "'%s' --help 2>/dev/null", train);
	FILE *p = popen(cmd, "r");
	if (!p)
		abort();
	while (fgets(line, sizeof line, p))
		for (char *s = line; (s = strstr(s, "--")); ) {
			char *e = s + 2;
			while ((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || *e == '-' || *e == '_')
				e++;
			if (e - s > 3 && nflags < 4096) {
				char *f = strndup(s, (size_t)(e - s));
				int dup = 0;
				for (int i = 0; i < nflags && !dup; i++)
					dup = !strcmp(flags[i], f);
				if (dup || !strcmp(f, "--help") || !strcmp(f, "--version") ||
				    !strcmp(f, "--save") || !strcmp(f, "--load") || !strcmp(f, "--log-path") ||
				    !strcmp(f, "--tensorboard-dir") || !strcmp(f, "--codecarbon-dir") ||
				    !strcmp(f, "--data-cache-path"))
					free(f);   /* nothing this harness runs writes files */
				else {
					flags = realloc(flags, (size_t)(nflags + 1) * sizeof *flags);
					flags[nflags++] = f;
				}
			}
			s = e;
		}
	pclose(p);
	if (nflags < 50)
		abort();   /* train --help lists far more: the binary is not train */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char train[4096];
	if (!train[0]) {
		/* beside this harness's build: build/fuzz-replay/NAME or build/fuzz/NAME -> bin/train;
		 * $TOP/bin/train where the harness was copied elsewhere */
		char self[3900];
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		const char *top = getenv("TOP");
		self[n > 0 ? n : 0] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		snprintf(train, sizeof train, "%s/../../bin/train", self);
		if (access(train, X_OK) != 0)
			snprintf(train, sizeof train, "%s/bin/train", top && *top ? top : ".");
		load_flags(train);
	}
	const char *argv[256] = {train, "--dry-run", "--nodes", "1", "--gpus-per-node", "1",
		"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
		"--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2",
		"--global-batch-size", "4", "--train-iters", "10", "--lr", "1e-3", "--vocab-size", "1000"};
	int argc = 26;
	char text[4096];
	if (size && data[0] == '#') {
		/* a seed written by hand: "#" then one argument a line (regressions by name, which
		 * the byte form cannot keep: its indices follow --help's order) */
		size_t n = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
		memcpy(text, data + 1, n);
		text[n] = '\0';
		for (char *save = NULL, *a = strtok_r(text, "\n", &save); a && argc < 250;
		     a = strtok_r(NULL, "\n", &save))
			argv[argc++] = a;
		size = 0;
	}
	for (size_t i = 0; i + 1 < size && argc < 250; i += 2) {
		argv[argc++] = flags[data[i] % nflags];
		if (data[i + 1] != 255)   /* 255: the flag without a value */
			argv[argc++] = values[data[i + 1] % (sizeof values / sizeof *values)];
	}
	argv[argc] = NULL;
	pid_t pid = fork();
	if (pid < 0)
		abort();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		alarm(20);
		execv(train, (char **)argv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		;
	if (WIFSIGNALED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 2)) {
		fprintf(stderr, "train_flags: %s %d:", WIFSIGNALED(st) ? "signal" : "exit",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		for (int i = 0; i < argc; i++)
			fprintf(stderr, " '%s'", argv[i]);
		fprintf(stderr, "\n");
		abort();
	}
	return 0;
}
