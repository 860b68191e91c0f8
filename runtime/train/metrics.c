/*
 * metrics.c - what a run tells: progress lines on rank 0's stdout (unless
 * --quiet) and JSON lines in <run_dir>/metrics.jsonl (start, first_step,
 * step, eval, stop, checkpoint, end events; runtime/README.md lists their
 * fields), which `dtrain-submit status` and `make bench` read.
 */
#include "runtime/train/trainer.h"

#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --- the metrics file --- */

void rt__open_metrics(struct trainer *t)
{
	char path[4200];
	int fd;

	if (t->g->rank != 0 || !t->s->run_dir)
		return;
	/* dtrain-submit made it; a spec run by hand may name a new one */
	dt_mkdirs(t->s->run_dir, 0755);
	snprintf(path, sizeof(path), "%s/metrics.jsonl", t->s->run_dir);
	/* a requeued job appends; never through a link planted in the run dir */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	t->metrics = fd < 0 ? NULL : fdopen(fd, "a");
	if (!t->metrics) {
		fprintf(stderr, "dtrain-run: warning: cannot write %s: %s%s\n", path, strerror(errno),
			errno == ELOOP ? " (a symbolic link that dtrain did not make: remove it)" : "");
		if (fd >= 0)
			close(fd);
	}
}

/* --- helpers --- */

static void fmt_duration(double s, char *buf, size_t size)
{
	long t = s < 0 ? 0 : (long)(s + 0.5);

	snprintf(buf, size, "%02ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* Seconds since the time (Unix seconds) in the environment variable name,
 * which the batch script sets: DTRAIN_JOB_START when the batch job started,
 * DTRAIN_STEP_START when this job step (this start of the ranks: the first,
 * or one after a crash) began. -1 when unknown. */
static double since_env(const char *name)
{
	const char *v = getenv(name);
	char *end;
	double start;

	if (!v || !*v)
		return -1;
	start = strtod(v, &end);
	if (*end || start <= 0)
		return -1;
	return dt_wall_s() - start;
}

/* The epoch as the progress lines show it: "2/10", or "2" where
 * train.max_steps alone bounds the run (train.epochs 0) */
static const char *epoch_text(const struct spec *s, int64_t epoch, char *buf, size_t size)
{
	if (s->train.epochs > 0)
		snprintf(buf, size, "%lld/%ld", (long long)epoch + 1, s->train.epochs);
	else
		snprintf(buf, size, "%lld", (long long)epoch + 1);
	return buf;
}

/* Which key bounds a run of total steps, per_epoch an epoch */
static const char *bound_text(const struct spec *s, int64_t total, int64_t per_epoch)
{
	if (s->train.epochs <= 0 || (s->train.max_steps > 0 && total < s->train.epochs * per_epoch))
		return "train.max_steps";
	return "train.epochs";
}

/* --- the run's events --- */

void rt__log_start(struct trainer *t, struct rt_progress *pg, int64_t step, int64_t total,
		   int64_t per_epoch)
{
	const struct spec *s = t->s;
	size_t tied = rt_model_tied_params(s);
	char copies[96] = "", *hw = dt_json_quote(t->hardware);

	pg->t0 = pg->tw = dt_mono_s();
	if (tied)
		snprintf(copies, sizeof(copies), " (%zu without the tied copies)",
			 rt_model_params(s) - tied);
	if (t->g->rank == 0 && !pg->quiet) {
		printf("dtrain-run: training %s: %zu parameters%s, %lld steps (%lld per epoch; %s "
		       "ends it), schedule %s, %d micro-batches%s\n", s->name, (size_t)rt_model_params(s),
		       copies, (long long)total, (long long)per_epoch, bound_text(s, total, per_epoch),
		       s->parallel.schedule, t->micro, step ? ", resumed" : "");
		if (t->sharded)
			printf("dtrain-run: optimizer: sharded over the %d replicas of each stage, each updating its 1/%d with its 1/%d of the state (gradients reduce-scattered, parameters all-gathered)\n",
			       t->replicas, t->replicas, t->replicas);
		if (t->tsplit)
			printf("dtrain-run: threads: each of the %d threads of a rank computes a block of "
			       "every layer\n", rt_pool_gang_size(&t->pool));
		if (t->dp.split)
			printf("dtrain-run: gradients: the %d replicas on each node share parameters in "
			       "memory and split every layer over the node's batch, each its 1/%d%s\n",
			       t->dp.locals, t->dp.locals,
			       t->dp.cross != MPI_COMM_NULL ? ", blocks allreduced between nodes" : "");
		else if (t->dp.shared)
			printf("dtrain-run: gradients: the %d replicas of a stage on each node share "
			       "parameters in memory, each updates 1/%d%s\n", t->dp.locals, t->dp.locals,
			       t->dp.cross != MPI_COMM_NULL ? ", parts allreduced between nodes" : "");
		else if (t->replicas > 1)
			printf("dtrain-run: gradients: allreduce between the %d replicas\n", t->replicas);
		if (t->flops_per_token > 0 && t->peak_flops_node > 0)
			printf("dtrain-run: MFU: %.4g model FLOPs per token against %.4g TFLOP/s per "
			       "node (%s)\n", t->flops_per_token, t->peak_flops_node / 1e12,
			       !strcmp(t->peak_source, "declared") ? "resources.peak_tflops_per_node" :
			       !strcmp(t->peak_source, "recorded") ?
				       "measured at this run's first start on such nodes, in its metrics.jsonl" :
				       "measured now: the matrix product of each rank, summed per node");
		if (step >= total)
			printf("dtrain-run: the checkpoint is at the end of training: nothing left to do\n");
		fflush(stdout);
	}
	dt_json_line(t->metrics, "{\"event\":\"start\",\"total_steps\":%lld,\"steps_per_epoch\":%lld,\"epochs\":%ld,"
		      "\"step\":%lld,\"grad_sync\":\"%s\",\"replicas_per_node\":%d,\"threads\":\"%s\","
		      "\"device\":\"%s\",\"precision\":\"%s\",\"collectives\":\"%s\","
		      "\"flops_per_token\":%.6g,\"nodes\":%d,\"peak_flops_per_node\":%.6g,"
		      "\"peak\":\"%s\",\"hardware\":%s,\"ranks_per_node\":%d,\"cpus_per_task\":%ld,"
		      "\"data\":%d,\"pipeline\":%d}",
		   (long long)total,
		   (long long)per_epoch, s->train.epochs, (long long)step,
		   t->dp.split ? "split" : t->dp.shared ? "shared" : t->replicas > 1 ? "allreduce" : "none",
		   t->dp.shared ? t->dp.locals : 1, t->tsplit ? "split" : "blas", t->dev->kind,
		   s->train.precision ? s->train.precision : "fp32", t->dev->collectives,
		   t->flops_per_token, t->nodes, t->peak_flops_node, t->peak_source, dt_json_or_null(hw),
		   t->nodes > 0 ? t->g->world / t->nodes : 0, s->resources.cpus_per_task,
		   t->g->size[RT_DIM_DATA], t->g->size[RT_DIM_PIPE]);
	free(hw);
	rt__ranks_log_layout(t);
}

/* The first step of this process: when it came, after this start of the
 * ranks (a restart in place after a crash is one) and after the job's. */
static void log_first_step(struct trainer *t, struct rt_progress *pg, int64_t step)
{
	double since = since_env("DTRAIN_JOB_START"), since_step = since_env("DTRAIN_STEP_START");

	if (t->start_step > 0 && since >= 0 && t->g->rank == 0 && !pg->quiet) {
		if (since_step >= 0 && since_step < since - 0.5)
			printf("dtrain-run: first step after the resume done %.2f s after this start "
			       "(%.2f s after the job started)\n", since_step, since);
		else
			printf("dtrain-run: first step after the resume done %.2f s after the job "
			       "started\n", since);
		fflush(stdout);
	}
	dt_json_line(t->metrics, "{\"event\":\"first_step\",\"step\":%lld,\"resumed\":%s,"
		      "\"since_job_start_s\":%.3f,\"since_step_start_s\":%.3f,"
		      "\"since_process_start_s\":%.3f,\"unix_time\":%.6f}", (long long)step,
		   t->start_step > 0 ? "true" : "false", since, since_step, dt_mono_s() - t->t_proc,
		   dt_wall_s());
}

/* A loss as the progress line shows it: 4 decimals, or 4 significant
 * digits once it is too large for that to read (a diverging run's). */
static const char *loss_text(double loss, char *buf, size_t size)
{
	snprintf(buf, size, fabs(loss) < 1e6 ? "%.4f" : "%.4g", loss);
	return buf;
}

int rt__log_step(struct trainer *t, struct rt_progress *pg, int64_t step, int64_t total,
		 int64_t epoch, int64_t batch_rows, double loss, double lr, double norm)
{
	const struct spec *s = t->s;
	double now, rate, eta, tm[6];
	char eta_s[32], tokens[128] = "", loss_s[32], ep[48];
	int rc;

	pg->window_rows += batch_rows;
	pg->window_steps++;
	if (step == t->start_step + 1)
		log_first_step(t, pg, step);
	if (step % s->train.log_every != 0 && step != total)
		return 0;
	now = dt_mono_s();
	rate = (double)pg->window_rows / (now - pg->tw);
	/* the steps of this start, not of the run: a resumed run's first
	 * steps say nothing of the time the earlier ones took */
	eta = (now - pg->t0) / (double)(step - t->start_step) * (double)(total - step);
	rc = rt__ranks_window(t, step, now - pg->tw, pg->window_steps, tm);
	if (rc)
		return rc;
	fmt_duration(eta, eta_s, sizeof(eta_s));
	if (t->labels > 1)
		snprintf(tokens, sizeof(tokens), "\"tokens_per_s\":%.1f,", rate * t->labels);
	/* model FLOPs per second over the job's nodes at their peak */
	if (t->labels > 1 && t->flops_per_token > 0 && t->peak_flops_node > 0 && t->nodes > 0)
		snprintf(tokens + strlen(tokens), sizeof(tokens) - strlen(tokens), "\"mfu\":%.6g,",
			 rate * t->labels * t->flops_per_token / (t->peak_flops_node * t->nodes));
	if (t->g->rank == 0 && !pg->quiet) {
		/* a language model's samples are windows: its rate is in tokens */
		printf("dtrain-run: step %lld/%lld epoch %s loss %s lr %.3g "
		       "grad_norm %.3g %s/s %.0f eta %s\n",
		       (long long)step, (long long)total, epoch_text(s, epoch, ep, sizeof(ep)),
		       loss_text(loss, loss_s, sizeof(loss_s)), lr, norm,
		       t->labels > 1 ? "tokens" : "samples", rate * t->labels, eta_s);
		fflush(stdout);
	}
	dt_json_line(t->metrics, "{\"event\":\"step\",\"step\":%lld,\"total_steps\":%lld,\"epoch\":%lld,"
		      "\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"samples_per_s\":%.1f,"
		      "%s\"eta_s\":%.3f,\"steps\":%lld,\"time\":{\"step_s\":%.6g,\"compute_s\":%.6g,"
		      "\"pipe_wait_s\":%.6g,\"grad_wait_s\":%.6g,\"data_s\":%.6g,\"optim_s\":%.6g},"
		      "\"unix_time\":%.3f}",
		   (long long)step, (long long)total, (long long)epoch + 1, loss, lr, norm,
		   rate, tokens, eta, (long long)pg->window_steps,
		   tm[0], tm[1], tm[2], tm[3], tm[4], tm[5], dt_wall_s());
	pg->tw = dt_mono_s(); /* the window's reduction is not part of the next */
	pg->window_rows = 0;
	pg->window_steps = 0;
	memset(&t->tm, 0, sizeof(t->tm));
	return 0;
}

void rt__log_eval(struct trainer *t, int64_t step, int64_t epoch, int64_t samples, double loss,
		  double acc, bool quiet)
{
	/* byte-level text: nats per token / ln 2 = bits per byte */
	double bpb = t->test.byte_level ? loss / M_LN2 : NAN;

	char bits[48] = "", ep[48];

	if (!isnan(bpb))
		snprintf(bits, sizeof(bits), " bits/byte %.4f", bpb);
	if (t->g->rank == 0 && !quiet && t->labels > 1) {
		printf("dtrain-run: step %lld val loss %.4f%s next-token accuracy %.4f\n",
		       (long long)step, loss, bits, acc);
		fflush(stdout);
	} else if (t->g->rank == 0 && !quiet) {
		printf("dtrain-run: epoch %s test loss %.4f accuracy %.4f\n",
		       epoch_text(t->s, epoch, ep, sizeof(ep)), loss, acc);
		fflush(stdout);
	}
	if (!isnan(bpb))
		snprintf(bits, sizeof(bits), ",\"bits_per_byte\":%.6f", bpb);
	dt_json_line(t->metrics, "{\"event\":\"eval\",\"step\":%lld,\"epoch\":%lld,\"test_loss\":%.9g,"
		      "\"test_accuracy\":%.6f%s,\"samples\":%lld,\"unix_time\":%.3f}", (long long)step,
		      (long long)epoch + 1, loss, acc, bits, (long long)samples, dt_wall_s());
}

/* The end of training: the steps this start ran (after a resume, not the
 * run's) and their time. */
void rt__log_end(struct trainer *t, const struct rt_progress *pg, int64_t step)
{
	double secs = dt_mono_s() - pg->t0;
	long long ran = (long long)(step - t->start_step);

	dt_json_line(t->metrics, "{\"event\":\"end\",\"step\":%lld,\"steps\":%lld,\"seconds\":%.3f,"
		     "\"unix_time\":%.3f}", (long long)step, ran, secs, dt_wall_s());
	if (t->g->rank == 0 && !pg->quiet && t->start_step > 0)
		printf("dtrain-run: done: %lld steps in %.1f s (steps %lld-%lld, resumed at step %lld)\n", ran, secs,
		       (long long)t->start_step + 1, (long long)step, (long long)t->start_step);
	else if (t->g->rank == 0 && !pg->quiet)
		printf("dtrain-run: done: %lld steps in %.1f s\n", ran, secs);
	fflush(stdout);
}
