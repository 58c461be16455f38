#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "units.h"

struct buf {
	char *p;
	size_t n, cap;
};

static int buf_read(int fd, struct buf *b)
{
	if (b->cap - b->n < 4096) {
		size_t cap = b->cap ? b->cap * 2 : 16384;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	ssize_t r = read(fd, b->p + b->n, b->cap - b->n - 1);
	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -1;
	b->n += (size_t)r;
	b->p[b->n] = '\0';
	return r == 0 ? 0 : 1;
}

int run_capture(char *const argv[], int timeout_s, struct run_result *r, char *err, size_t errlen)
{
	int po[2], pe[2], px[2];
	pid_t pid;
	struct buf ob = {0}, eb = {0};
	int e, st = 0;
	double deadline = timeout_s > 0 ? units_now() + timeout_s : 0;

	memset(r, 0, sizeof *r);
	r->status = -1;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(px, O_CLOEXEC) < 0)
		return errf(err, errlen, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		return errf(err, errlen, "fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		if (devnull > 0)
			close(devnull);  /* else the program inherits a stray descriptor */
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execvp(argv[0], argv);
		e = errno;  /* tell the parent why exec failed through the close-on-exec pipe */
		if (write(px[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	setpgid(pid, pid);
	close(po[1]);
	close(pe[1]);
	close(px[1]);
	if (read(px[0], &e, sizeof e) == (ssize_t)sizeof e) {
		close(px[0]);
		close(po[0]);
		close(pe[0]);
		waitpid(pid, NULL, 0);
		return errf(err, errlen, "%s: %s", argv[0], strerror(e));
	}
	close(px[0]);

	struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
	int open_fds = 2;
	while (open_fds) {
		int wait_ms = -1;
		if (deadline) {
			double left = deadline - units_now();
			if (left <= 0) {
				r->timed_out = 1;
				kill(-pid, SIGKILL);
				break;
			}
			wait_ms = (int)(left * 1000) + 1;
		}
		int n = poll(fds, 2, wait_ms);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2 && n > 0; i++) {
			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			int rr = buf_read(fds[i].fd, i == 0 ? &ob : &eb);
			if (rr <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	/* a child can close its pipes and still hang (a daemonising tool): the deadline holds for
	 * the wait too */
	pid_t w = 0;
	while (deadline && !r->timed_out && (w = waitpid(pid, &st, WNOHANG)) == 0) {
		if (units_now() >= deadline) {
			r->timed_out = 1;
			kill(-pid, SIGKILL);
			break;
		}
		usleep(10000);
	}
	while (w != pid && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	r->out = ob.p ? ob.p : strdup("");
	r->out_len = ob.n;
	r->err = eb.p ? eb.p : strdup("");
	r->err_len = eb.n;
	return 0;
}

void run_free(struct run_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}
