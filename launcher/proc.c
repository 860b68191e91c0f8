/*
 * proc.c - run a program the way dtrain-submit runs sbatch, squeue, scontrol,
 * scancel and bash: found on $PATH, started with fork/exec and an argv (never
 * a shell), stdin fed from memory, stdout (and stderr) captured or passed on,
 * in our environment or (sbatch) in it without Slurm's input variables and
 * what the site locks.
 *
 * Sections: the environment, PATH lookup, the run loop.
 */
#include "launcher/internal.h"
#include "base/clock.h"
#include "site/site.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* --- the environment --- */

bool launch__slurm_input(const char *entry)
{
	return (!strncmp(entry, "SBATCH_", 7) || !strncmp(entry, "SLURM_", 6)) &&
	       strncmp(entry, "SLURM_CONF=", 11) != 0;
}

const char *launch__env_lock(const char *lock)
{
	if (!strcmp(lock, "env"))
		return "";
	if (strncmp(lock, "env.", 4))
		return NULL;
	return strcmp(lock + 4, "*") ? lock + 4 : "";
}

/* The name of "NAME=value" (len chars) matches any of v's NAME or PREFIX*
 * entries, taken through launch__env_lock when locks; only the starred
 * ones when star, only the others when not. */
static bool env_matches(const struct spec_strs *v, bool locks, bool star, const char *name,
			size_t len)
{
	size_t i, n;

	for (i = 0; i < v->n; i++) {
		const char *w = locks ? launch__env_lock(v->v[i]) : v->v[i];

		if (!w || !*w || (strchr(w, '*') != NULL) != star)
			continue;
		n = strlen(w) - star;
		if (star ? n <= len && !strncmp(w, name, n) : n == len && !strncmp(w, name, n))
			return true;
	}
	return false;
}

/* A login's own variables, which "env.*" leaves to the job (the same list
 * as the batch script's dtrain_locked). */
static bool login_own(const char *name, size_t len)
{
	static const char *const own[] = { "HOME", "USER", "LOGNAME", "PATH", "SHELL", "TERM",
					   "LANG", "TZ", "TMPDIR", "PWD", "SHLVL", "HOSTNAME" };
	size_t i;

	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == len && !strncmp(own[i], name, len))
			return true;
	return !strncmp(name, "LC_", 3) && len >= 3;
}

bool launch__env_dropped(const struct site *site, const char *entry)
{
	const char *eq = strchr(entry, '=');
	size_t len = eq ? (size_t)(eq - entry) : strlen(entry), i;
	bool all = false;

	/* bash reads these before a script's first line */
	if ((len == 8 && !strncmp(entry, "BASH_ENV", 8)) || (len == 3 && !strncmp(entry, "ENV", 3)) ||
	    !strncmp(entry, "BASH_FUNC_", 10))
		return true;
	if (!site || !strncmp(entry, "SLURM_", 6) || !strncmp(entry, "SLURMD_", 7))
		return false;
	if (env_matches(&site->locked, true, false, entry, len))
		return true;
	if (env_matches(&site->env_allow, false, false, entry, len) ||
	    env_matches(&site->env_allow, false, true, entry, len))
		return false;
	for (i = 0; i < site->locked.n; i++) {
		const char *e = launch__env_lock(site->locked.v[i]);

		all |= e && !*e;
	}
	if (all)
		return !login_own(entry, len);
	return env_matches(&site->locked, true, true, entry, len);
}

/* environ without the Slurm inputs and what launch__env_dropped drops: a
 * NULL-terminated array of borrowed strings (caller frees the array), or
 * NULL when out of memory. */
static char **env_for_sbatch(const struct site *locks)
{
	size_t n = 0, k = 0;
	char **out;

	while (environ && environ[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (n = 0; environ && environ[n]; n++)
		if (!launch__slurm_input(environ[n]) && !launch__env_dropped(locks, environ[n]))
			out[k++] = environ[n];
	return out;
}

/* --- PATH lookup --- */

static bool is_executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *launch__which(const char *name)
{
	const char *path = getenv("PATH");
	const char *p, *end;

	if (!*name)
		return NULL;
	if (strchr(name, '/'))
		return is_executable_file(name) ? strdup(name) : NULL;
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; ; p = end + 1) {
		struct dt_buf cand = {0};

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		/* An empty PATH element means the current directory (POSIX). */
		if (end == p ? dt_buf_puts(&cand, "./") :
		    dt_buf_printf(&cand, "%.*s/", (int)(end - p), p))
			return NULL;
		if (dt_buf_puts(&cand, name)) {
			dt_buf_free(&cand);
			return NULL;
		}
		if (is_executable_file(cand.p))
			return cand.p;
		dt_buf_free(&cand);
		if (!*end)
			return NULL;
	}
}

/* --- the run loop --- */

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* In the child: make fd `to` refer to `from`, or to /dev/null when from < 0. */
static int child_redirect(int from, int to, int flags)
{
	int fd = from;

	if (fd < 0) {
		fd = open("/dev/null", flags);
		if (fd < 0)
			return -1;
	}
	if (dup2(fd, to) < 0)
		return -1;
	return 0;
}

/* Read what is there from *fd into b (NULL: discard); closes *fd at EOF. */
static int drain(int *fd, struct dt_buf *b)
{
	char chunk[8192];
	ssize_t n = read(*fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close_fd(fd);
		return n < 0 ? -errno : 0;
	}
	return b ? dt_buf_add(b, chunk, (size_t)n) : 0;
}

/* The pipes of one run, -1 where closed or not needed; [0] reads, [1]
 * writes. */
struct pipes {
	int in[2];  /* our memory to the child's stdin */
	int out[2]; /* the child's stdout to p->out */
	int eo[2];  /* the child's stderr to p->err (LAUNCH__STDERR_CAPTURE) */
	int ex[2];  /* close-on-exec: the child's errno when exec fails */
};

/* Every end still open, at the one exit; closed ends are -1 already. */
static void close_pipes(struct pipes *pp)
{
	close_fd(&pp->in[0]);
	close_fd(&pp->in[1]);
	close_fd(&pp->out[0]);
	close_fd(&pp->out[1]);
	close_fd(&pp->eo[0]);
	close_fd(&pp->eo[1]);
	close_fd(&pp->ex[0]);
	close_fd(&pp->ex[1]);
}

/* In the child: plain signal dispositions, our pipes on 0, 1, 2, then the
 * program; never returns. An exec that fails tells the parent why. */
static _Noreturn void child_exec(const struct launch__proc *p, const char *path,
				 char **envp, const struct pipes *pp)
{
	int e;

	signal(SIGPIPE, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	if (child_redirect(p->in ? pp->in[0] : -1, 0, O_RDONLY) < 0 ||
	    (p->out && child_redirect(pp->out[1], 1, O_WRONLY) < 0) ||
	    (p->err_mode == LAUNCH__STDERR_CAPTURE && child_redirect(pp->eo[1], 2, O_WRONLY) < 0) ||
	    (p->err_mode == LAUNCH__STDERR_QUIET && child_redirect(-1, 2, O_WRONLY) < 0))
		e = errno;
	else {
		execve(path, (char *const *)p->argv, envp ? envp : environ);
		e = errno;
	}
	/* Tell the parent why, through the close-on-exec pipe. */
	if (write(pp->ex[1], &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* Write what the child can take of p->in past *off; closes *fd when all
 * is written, or when the child stopped reading (EPIPE: its status tells). */
static void feed(int *fd, const struct launch__proc *p, size_t *off)
{
	ssize_t w = write(*fd, p->in + *off, p->in_len - *off);

	if (w < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (w < 0) {
		close_fd(fd);
		return;
	}
	*off += (size_t)w;
	if (*off == p->in_len)
		close_fd(fd);
}

/* Feed stdin and collect stdout and stderr together, so that a child that
 * fills one pipe while we wait on another cannot deadlock; until all three
 * are closed or one fails. */
static int pump(const struct launch__proc *p, struct pipes *pp, pid_t pid, double deadline)
{
	size_t in_off = 0;
	int rc = 0, wait_ms = -1;

	while (pp->in[1] >= 0 || pp->out[0] >= 0 || pp->eo[0] >= 0) {
		struct pollfd fds[3];
		nfds_t n = 0;
		int i;

		if (deadline > 0) {
			double left = deadline - dt_mono_s();

			if (left <= 0) {
				/* its pipes close as it dies (a grandchild holding
				 * them is not waited for) */
				kill(pid, SIGKILL);
				return -ETIMEDOUT;
			}
			wait_ms = (int)(left * 1000) + 1;
		}

		if (pp->in[1] >= 0)
			fds[n++] = (struct pollfd){ .fd = pp->in[1], .events = POLLOUT };
		if (pp->out[0] >= 0)
			fds[n++] = (struct pollfd){ .fd = pp->out[0], .events = POLLIN };
		if (pp->eo[0] >= 0)
			fds[n++] = (struct pollfd){ .fd = pp->eo[0], .events = POLLIN };
		if (poll(fds, n, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (i = 0; i < (int)n; i++) {
			if (!fds[i].revents)
				continue;
			if (fds[i].fd == pp->in[1])
				feed(&pp->in[1], p, &in_off);
			else if (fds[i].fd == pp->out[0])
				rc = drain(&pp->out[0], p->out);
			else
				rc = drain(&pp->eo[0], p->err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Wait for the child and turn its end into *status, or into an error:
 * exec failed (its errno on ex_fd) or rc, what went wrong while it ran. */
static int reap(const struct launch__proc *p, const char *path, pid_t pid, int ex_fd,
		double deadline, int rc, int *status, struct dt_err *err)
{
	int wst = 0, exec_errno = 0;

	/* a child that closed its pipes early still gets only until the
	 * deadline to end */
	while (deadline > 0 && !rc) {
		pid_t r = waitpid(pid, &wst, WNOHANG);

		if (r == pid)
			goto waited;
		if (r < 0 && errno != EINTR)
			break;
		if (dt_mono_s() >= deadline) {
			kill(pid, SIGKILL);
			rc = -ETIMEDOUT;
			break;
		}
		usleep(10000);
	}
	while (waitpid(pid, &wst, 0) < 0) {
		if (errno != EINTR) {
			if (!rc)
				rc = -errno;
			break;
		}
	}
waited:
	if (read(ex_fd, &exec_errno, sizeof(exec_errno)) == (ssize_t)sizeof(exec_errno)) {
		if (!rc)
			rc = -exec_errno;
		dt_err_add(err, "%s: cannot run %s: %s", p->argv[0], path, strerror(exec_errno));
	} else if (rc == -ETIMEDOUT) {
		dt_err_add(err, "%s: no answer within %.0f s: killed", p->argv[0], p->timeout_s);
	} else if (rc) {
		dt_err_add(err, "%s: lost contact with the program: %s", p->argv[0], strerror(-rc));
	} else if (WIFEXITED(wst)) {
		*status = WEXITSTATUS(wst);
	} else if (WIFSIGNALED(wst)) {
		*status = 128 + WTERMSIG(wst);
	}
	return rc;
}

int launch__run(const struct launch__proc *p, int *status, struct dt_err *err)
{
	struct pipes pp = { {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1} };
	struct sigaction ign = {0}, old_pipe;
	bool pipe_ignored = false;
	char *path = NULL, **envp = NULL;
	pid_t pid = -1;
	int rc = 0;
	double deadline = p->timeout_s > 0 ? dt_mono_s() + p->timeout_s : 0;

	*status = -1;
	path = launch__which(p->argv[0]);
	if (!path) {
		dt_err_add(err, "%s: command not found on PATH", p->argv[0]);
		rc = -ENOENT;
		goto out;
	}
	if (p->slurm_env_off && !(envp = env_for_sbatch(p->locks))) {
		rc = -ENOMEM;
		dt_err_add(err, "%s: out of memory for its environment", p->argv[0]);
		goto out;
	}
	if ((p->in && pipe2(pp.in, O_CLOEXEC) < 0) || (p->out && pipe2(pp.out, O_CLOEXEC) < 0) ||
	    (p->err_mode == LAUNCH__STDERR_CAPTURE && pipe2(pp.eo, O_CLOEXEC) < 0) ||
	    pipe2(pp.ex, O_CLOEXEC) < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot create a pipe: %s", p->argv[0], strerror(-rc));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		dt_err_add(err, "%s: cannot fork: %s", p->argv[0], strerror(-rc));
		goto out;
	}
	if (pid == 0)
		child_exec(p, path, envp, &pp);
	close_fd(&pp.in[0]);
	close_fd(&pp.out[1]);
	close_fd(&pp.eo[1]);
	close_fd(&pp.ex[1]);

	if (p->in) {
		/* A child that stops reading early must not kill us with SIGPIPE. */
		ign.sa_handler = SIG_IGN;
		sigemptyset(&ign.sa_mask);
		if (sigaction(SIGPIPE, &ign, &old_pipe) == 0)
			pipe_ignored = true;
		if (fcntl(pp.in[1], F_SETFL, O_NONBLOCK) < 0)
			rc = -errno;
		else if (p->in_len == 0)
			close_fd(&pp.in[1]);
	}
	if (!rc)
		rc = pump(p, &pp, pid, deadline);
	close_fd(&pp.in[1]);
	close_fd(&pp.out[0]);
	close_fd(&pp.eo[0]);
	rc = reap(p, path, pid, pp.ex[0], deadline, rc, status, err);
out:
	if (pipe_ignored)
		sigaction(SIGPIPE, &old_pipe, NULL);
	close_pipes(&pp);
	free(envp);
	free(path);
	return rc;
}
