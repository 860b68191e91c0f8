/*
 * heartbeat.c - the heartbeat file's line (heartbeat.h): names, format,
 * parse, read.
 */
#include "base/heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const phase_names[DT_PHASE_COUNT] = {
	"start", "step", "sync", "eval", "save", "end",
};

const char *dt_phase_name(enum dt_phase phase)
{
	return phase >= 0 && phase < DT_PHASE_COUNT ? phase_names[phase] : "?";
}

double dt_heartbeat_period(double bound)
{
	double p = bound / 10;

	if (bound <= 0 || p > 5)
		return 5;
	return p < 0.2 ? 0.2 : p;
}

bool dt_heartbeat_silent(const struct dt_heartbeat *h, double now)
{
	return h->phase != DT_PHASE_END && now - h->at > 3 * dt_heartbeat_period(h->bound) + 1.0;
}

bool dt_heartbeat_same_start(const struct dt_heartbeat *a, const struct dt_heartbeat *b)
{
	return a->start - b->start < 2.0 && b->start - a->start < 2.0;
}

int dt_heartbeat_path(const char *dir, int rank, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/rank-%d", dir, rank);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* FNV-1a over the line before its " sum ": a line mixed from two writes
 * (a read racing a rewrite) does not pass for a heartbeat. */
static unsigned sum_of(const char *text, size_t len)
{
	unsigned h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)text[i]) * 16777619u;
	return h;
}

int dt_heartbeat_format(const struct dt_heartbeat *h, char *buf, size_t size)
{
	char node[sizeof(h->node)];
	size_t i;
	int n, m;

	if (size < DT_HEARTBEAT_BYTES + 1)
		return -ENAMETOOLONG;
	for (i = 0; i + 1 < sizeof(node) && h->node[i]; i++)
		node[i] = h->node[i] > ' ' && h->node[i] < 127 ? h->node[i] : '?';
	node[i] = '\0';
	n = snprintf(buf, size,
		     "dtrain-heartbeat %d rank %d world %d pid %ld node %s start %.3f step %lld stepped %.3f phase %s since %.3f at %.3f bound %.3f waits %lld %lld",
		     DT_HEARTBEAT_VERSION, h->rank, h->world, h->pid, node[0] ? node : "?", h->start,
		     h->step, h->stepped, dt_phase_name(h->phase), h->since, h->at, h->bound,
		     h->waits_begun, h->waits_ended);
	if (n < 0 || n >= DT_HEARTBEAT_BYTES - 16)
		return -ENAMETOOLONG;
	m = snprintf(buf + n, size - (size_t)n, " sum %08x", sum_of(buf, (size_t)n));
	if (m < 0 || n + m >= DT_HEARTBEAT_BYTES)
		return -ENAMETOOLONG;
	n += m;
	memset(buf + n, ' ', (size_t)(DT_HEARTBEAT_BYTES - 1 - n));
	buf[DT_HEARTBEAT_BYTES - 1] = '\n';
	buf[DT_HEARTBEAT_BYTES] = '\0';
	return 0;
}

int dt_heartbeat_parse(const char *line, struct dt_heartbeat *h)
{
	struct dt_heartbeat v = { 0 };
	char phase[16];
	unsigned sum = 0;
	int version = 0, body = 0, used = 0, p;

	if (sscanf(line, "dtrain-heartbeat %d ", &version) != 1)
		return -EINVAL;
	if (version == DT_HEARTBEAT_VERSION) {
		if (sscanf(line,
			   "dtrain-heartbeat %d rank %d world %d pid %ld node %63s start %lf step %lld stepped %lf phase %15s since %lf at %lf bound %lf waits %lld %lld%n sum %8x%n",
			   &version, &v.rank, &v.world, &v.pid, v.node, &v.start, &v.step, &v.stepped,
			   phase, &v.since, &v.at, &v.bound, &v.waits_begun, &v.waits_ended, &body,
			   &sum, &used) != 15)
			return -EINVAL;
	} else if (version == 1) { /* a rank of an earlier dtrain: no wait counts */
		if (sscanf(line,
			   "dtrain-heartbeat %d rank %d world %d pid %ld node %63s start %lf step %lld stepped %lf phase %15s since %lf at %lf bound %lf%n sum %8x%n",
			   &version, &v.rank, &v.world, &v.pid, v.node, &v.start, &v.step, &v.stepped,
			   phase, &v.since, &v.at, &v.bound, &body, &sum, &used) != 13)
			return -EINVAL;
		v.waits_begun = v.waits_ended = -1;
	} else {
		return -EINVAL;
	}
	if (used == 0 || sum != sum_of(line, (size_t)body))
		return -EINVAL;
	/* all of it: padding, then the '\n' that ends a whole line */
	while (line[used] == ' ')
		used++;
	if (strcmp(line + used, "\n") != 0)
		return -EINVAL;
	for (p = 0; p < DT_PHASE_COUNT && strcmp(phase, phase_names[p]); p++)
		;
	if (p == DT_PHASE_COUNT || v.rank < 0 || v.world <= v.rank || v.step < 0 || v.bound < 0)
		return -EINVAL;
	v.phase = (enum dt_phase)p;
	*h = v;
	return 0;
}

int dt_heartbeat_read(const char *dir, int rank, struct dt_heartbeat *h)
{
	char path[4096], line[DT_HEARTBEAT_BYTES + 1];
	int fd, tries, rc = -EINVAL;

	rc = dt_heartbeat_path(dir, rank, path, sizeof(path));
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC); /* a planted link: not ours */
	if (fd < 0)
		return -errno;
	/* a line caught half rewritten: its writer is done within microseconds */
	for (tries = 0, rc = -EINVAL; tries < 5 && rc == -EINVAL; tries++) {
		ssize_t n;

		if (tries)
			usleep(2000);
		do
			n = pread(fd, line, DT_HEARTBEAT_BYTES, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			rc = -errno;
			break;
		}
		line[n] = '\0';
		rc = dt_heartbeat_parse(line, h);
		if (!rc && h->rank != rank)
			rc = -EINVAL;
	}
	close(fd);
	return rc;
}
