/*
 * checkpointing.c - saves and resumes for the trainer (checkpointing.h has
 * the protocol).
 *
 * Sections: helpers, life cycle, resume (choosing, verifying, loading),
 * saving (meta, begin, the writer thread, commit).
 */
#include "runtime/train/checkpointing.h"
#include "runtime/train/ckpt_internal.h"

#include "base/fault.h"
#include "base/json.h"
#include "runtime/world/preempt.h"
#include "runtime/data/bpe.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

/* The rank that reported, the one that did not: see rt_agree. */
#include "runtime/world/agree.h"
#include "base/clock.h"

/* --- helpers --- */

/* The optimizer's states as the checkpoint names them (PyTorch's names). */
static int optim_states(const struct rt_optim *o, const char *names[CKPT_MAX_STATES],
			float *bufs[CKPT_MAX_STATES])
{
	if (o->type == RT_OPTIM_ADAMW) {
		names[0] = "exp_avg";
		names[1] = "exp_avg_sq";
		bufs[0] = o->m;
		bufs[1] = o->v;
		return 2;
	}
	names[0] = "momentum_buffer";
	bufs[0] = o->m;
	return 1;
}

/* "replicated", or "sharded over N replicas", into buf. */
static const char *shards_str(int shards, char *buf, size_t size)
{
	if (shards > 1)
		snprintf(buf, size, "sharded over %d replicas", shards);
	else
		snprintf(buf, size, "replicated");
	return buf;
}

/* The same optimizer states, by name and in order. */
static bool same_states(const struct ckpt_meta *a, const struct ckpt_meta *b)
{
	int k;

	if (a->n_states != b->n_states)
		return false;
	for (k = 0; k < a->n_states; k++)
		if (strcmp(a->states[k], b->states[k]))
			return false;
	return true;
}

/* Everything that must match to continue a run, in the checkpoint's
 * words: the model (by its hash), the optimizer, and what the sampler's
 * position means (global batch, training set size). Every rank decides
 * alike from the same manifest; rank 0 reports. */
static int compatible(const char *path, const struct ckpt_meta *m,
		      const struct ckpt_meta *ours, struct dt_err *err)
{
	int bad = 0;

	if (!strcmp(m->optimizer, "none")) /* dtrain-ckpt import's */
		return dt_err_add(err, "%s: holds a model's parameters only (an import, or another program's weights), no training state to resume (hint: start a new run from it with checkpoint.init_from)",
				  path), -EINVAL;
	if (strcmp(m->model_hash, ours->model_hash)) {
		dt_err_add(err, "%s: a checkpoint of another model (%s %s; this job has %s %s)", path,
			   m->model_type, m->model_config, ours->model_type, ours->model_config);
		bad = 1;
	}
	if (strcmp(m->optimizer, ours->optimizer)) {
		dt_err_add(err, "%s: written with optimizer \"%s\" but train.optimizer.type is \"%s\"",
			   path, m->optimizer, ours->optimizer);
		bad = 1;
	} else if (!same_states(m, ours)) {
		/* the reader fills one buffer per listed state, in order */
		dt_err_add(err, "%s: optimizer \"%s\" with states other than \"%s\"%s%s%s: a damaged or edited manifest",
			   path, m->optimizer, ours->states[0], ours->n_states > 1 ? ", \"" : "",
			   ours->n_states > 1 ? ours->states[1] : "", ours->n_states > 1 ? "\"" : "");
		bad = 1;
	}
	if (m->global_batch != ours->global_batch) {
		dt_err_add(err, "%s: written with train.global_batch %lld but this job has %lld "
			   "(hint: keep the global batch when resuming; change parallel.data or "
			   "parallel.micro_batches instead)", path, (long long)m->global_batch,
			   (long long)ours->global_batch);
		bad = 1;
	}
	if (m->train_rows != ours->train_rows) {
		dt_err_add(err, "%s: written for a training set of %lld rows but data.train has %lld",
			   path, (long long)m->train_rows, (long long)ours->train_rows);
		bad = 1;
	}
	return bad ? -EINVAL : 0;
}

/* --- meta --- */

static int fill_meta(const struct rt_ckpt *c, const struct rt_ckpt_pos *pos, struct ckpt_meta *m,
		     struct dt_err *err)
{
	const struct spec *s = c->s;
	const char *names[CKPT_MAX_STATES];
	float *bufs[CKPT_MAX_STATES];
	const char *job = getenv("SLURM_JOB_ID");
	time_t now = time(NULL);
	struct dt_buf cfg = { 0 };
	struct tm tm;
	int k;

	memset(m, 0, sizeof(*m));
	m->step = pos->step;
	m->steps_per_epoch = pos->steps_per_epoch;
	m->epoch = pos->step / pos->steps_per_epoch;
	m->epoch_step = pos->step % pos->steps_per_epoch;
	m->total_steps = pos->total_steps;
	m->lr = rt_lr_at(s, pos->step, pos->total_steps);
	m->rng_seed = (uint64_t)s->train.seed;
	m->rng_stream = (uint64_t)m->epoch;
	m->shuffle = s->data.shuffle;
	m->global_batch = s->train.global_batch;
	m->train_rows = c->train_rows;
	snprintf(m->optimizer, sizeof(m->optimizer), "%s", s->train.optimizer.type);
	m->optimizer_step = c->opt ? c->opt->step : 0;
	m->optimizer_shards = c->shard ? c->shard->replicas : 1;
	m->n_states = c->opt ? optim_states(c->opt, names, bufs) : 0;
	for (k = 0; k < m->n_states; k++)
		snprintf(m->states[k], sizeof(m->states[k]), "%s", names[k]);
	m->format_version = CKPT_VERSION;
	snprintf(m->model_type, sizeof(m->model_type), "%s", c->st->ops->type);
	if (c->st->ops->config(s, &cfg) || cfg.len >= sizeof(m->model_config)) {
		dt_buf_free(&cfg);
		return dt_err_add(err, "checkpoint meta: the model's config does not fit in %d bytes",
				  CKPT_CONFIG_MAX - 1);
	}
	memcpy(m->model_config, cfg.p, cfg.len + 1);
	dt_buf_free(&cfg);
	m->n_blocks = c->st->n_model_blocks;
	memcpy(m->spec_hash, c->spec_hash, sizeof(m->spec_hash));
	m->data = c->g->size[RT_DIM_DATA];
	m->pipeline = c->g->size[RT_DIM_PIPE];
	for (k = 0; k <= m->pipeline; k++)
		m->stage_first[k] = c->first[k];
	gmtime_r(&now, &tm);
	strftime(m->created, sizeof(m->created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(m->job_id, sizeof(m->job_id), "%s", job && strlen(job) < sizeof(m->job_id) ? job : "");
	return ckpt_meta_finish(m, err);
}

/* The resolved spec's hash, leaving out what names the run rather than
 * the training (name, run_dir, where checkpoints go and come from). */
static int hash_spec(const struct spec *s, char out[17])
{
	struct spec t = *s;
	struct dt_buf b = { 0 };
	int rc;

	t.name = (char *)"-";
	t.run_dir = NULL;
	t.checkpoint.dir = NULL;
	t.checkpoint.resume = (char *)"auto";
	rc = spec_dump(&t, &b);
	if (!rc)
		ckpt_hash64(b.p, b.len, out);
	dt_buf_free(&b);
	return rc;
}

/* --- life cycle --- */

static int tensor_tables(struct rt_ckpt *c, struct dt_err *err)
{
	int rc;

	rc = rt_ckpt_tensors(c->st->tensors, c->st->n_tensors, &c->stage_tensors);
	c->n_stage_tensors = c->st->n_tensors;
	if (!rc && c->g->rank == 0)
		rc = rt_ckpt_model_table(c->s, &c->model_tensors, &c->n_model_tensors, err);
	return rc;
}

/* The checkpoint directory made (rank 0, make) and held open in c->held.
 * The run dir's own "checkpoints" is opened without following a link:
 * one planted there (a shared file system) would take the saves, and
 * retention's deletes, elsewhere; checkpoint.dir is the user's, as given.
 * Opened once: a link planted at either later changes nothing, as every
 * save works relative to the directory held. */
static int hold_dir(struct rt_ckpt *c, const struct spec *s, bool make, struct dt_err *e)
{
	int rc = make ? dt_mkdirs(s->checkpoint.dir ? c->dir : s->run_dir, 0755) : 0, fd = -1;

	if (!rc && !s->checkpoint.dir)
		fd = dt_dir_open_in(s->run_dir, "checkpoints", make ? 0755 : -1);
	else if (!rc && (fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		fd = -errno;
	rc = rc ? rc : fd < 0 ? fd : 0;
	if (rc)
		return dt_err_add(e, make ? "%s: cannot create the checkpoint directory: %s%s"
					  : "%s: cannot open the checkpoint directory: %s%s",
				  c->dir, strerror(-rc),
				  rc == -ELOOP ? " (a symbolic link that dtrain did not make: remove it)" : ""),
		       rc;
	c->held = (struct ckpt_dir){ .fd = fd, .path = c->dir };
	return make ? ckpt_clean_tmp(&c->held, e) : 0;
}

/* Rank 0: the tokenizer that data.train records (dtrain-data text --bpe
 * or --tokenizer), kept to go into every save, so that `dtrain-ckpt
 * sample` reads and writes text: the count of its files. A tokenizer that
 * cannot be read is a warning, not an error of this rank alone: the
 * checkpoints then carry none. */
static int record_tokenizer(struct rt_ckpt *c, const struct spec *s)
{
	struct rt_bpe_files f;
	struct dt_err e = { 0 };
	int rc;

	if (!s->data.train || !strcmp(s->model.type, "mlp")) /* token streams are a language model's */
		return 0;
	rc = rt_bpe_load_tokens(&c->bpe, s->data.train, &e);
	if (rc && rc != -ENOENT) {
		dt_err_add(&e, "data.train's tokenizer is not recorded in the checkpoints");
		rt__ckpt_warn_lines(c, &e);
	}
	if (rc)
		return 0;
	rt_bpe_files(c->bpe, &f);
	return f.n;
}

int rt_ckpt_init(struct rt_ckpt *c, const struct spec *s, const struct rt_grid *g,
		 struct rt_stage *st, struct rt_optim *opt, const struct rt_dp *dp,
		 const struct rt_shard *shard, const int *first, int64_t train_rows, FILE *metrics,
		 bool quiet, struct dt_err *err)
{
	struct dt_err e = { 0 };
	int rc = 0, stage = g->coord[RT_DIM_PIPE];

	memset(c, 0, sizeof(*c));
	c->held.fd = c->tmp_held.fd = -1;
	c->s = s;
	c->g = g;
	c->st = st;
	c->opt = opt;
	c->dp = dp;
	c->shard = shard;
	c->first = first;
	c->metrics = metrics;
	c->train_rows = train_rows;
	c->quiet = quiet;
	c->last_step = -1;
	c->writer = rt_grid_stage_writer(g, stage) == g->rank;
	atomic_init(&c->thread_done, 0);
	atomic_init(&c->commit_done, 0);
	atomic_init(&c->copy_pending, 0);
	if (pthread_mutex_init(&c->copy_lock, NULL))
		return -ENOMEM;
	if (pthread_cond_init(&c->copy_cond, NULL)) {
		pthread_mutex_destroy(&c->copy_lock);
		return -ENOMEM;
	}
	c->copy_sync_ready = true;
	if (s->checkpoint.dir)
		snprintf(c->dir, sizeof(c->dir), "%s", s->checkpoint.dir);
	else if (s->run_dir)
		snprintf(c->dir, sizeof(c->dir), "%s/checkpoints", s->run_dir);
	if (hash_spec(s, c->spec_hash))
		return dt_err_add(err, "rank %d: out of memory for the spec's hash", g->rank), -ENOMEM;
	c->meta = calloc(1, sizeof(*c->meta));
	/* the root, a shard per stage, and with a sharded optimizer a piece
	 * per replica of each (ckpt_meta_finish bounds their number) */
	c->n_files = g->size[RT_DIM_PIPE] + 1 +
		     (shard ? g->size[RT_DIM_PIPE] * g->size[RT_DIM_DATA] : 0);
	if (c->n_files > CKPT_MAX_FILES) { /* every rank alike */
		if (g->rank == 0)
			dt_err_add(err, "parallel.optimizer: \"sharded\" over %d replicas on %d stages would make checkpoints of %d files, more than %d (hint: \"replicated\", or fewer replicas)",
				   g->size[RT_DIM_DATA], g->size[RT_DIM_PIPE], c->n_files, CKPT_MAX_FILES);
		return -EINVAL;
	}
	if (g->rank == 0 && c->dir[0] && c->n_files + 2 <= CKPT_MAX_FILES)
		c->n_files += c->n_tok_files = record_tokenizer(c, s);
	c->files = calloc((size_t)c->n_files, sizeof(*c->files));
	if (!c->meta || !c->files || tensor_tables(c, err))
		return dt_err_add(err, "rank %d: out of memory for the checkpoint's tables", g->rank),
		       -ENOMEM;

	if (!c->dir[0]) {
		if (s->checkpoint.every_steps != 0) {
			char every[32];

			snprintf(every, sizeof(every), s->checkpoint.every_steps == SPEC_AUTO ?
				 "\"auto\"" : "%ld", s->checkpoint.every_steps);
			if (g->rank == 0)
				dt_err_add(err, "checkpoint.every_steps: %s, but there is no place for "
					   "checkpoints (hint: set run_dir or checkpoint.dir)", every);
			return -EINVAL;
		}
		return 0;
	}
	/* rank 0 makes it, then every rank holds it (the others only once it
	 * is there) */
	if (g->rank == 0)
		rc = hold_dir(c, s, true, &e);
	rc = rt__ckpt_agreed(rc, &e, err);
	if (rc) /* every rank alike */
		return rc;
	if (g->rank != 0)
		rc = hold_dir(c, s, false, &e);
	return rt__ckpt_agreed(rc, &e, err);
}

static int join_thread(struct rt_ckpt *c)
{
	if (c->thread_running) {
		pthread_join(c->thread, NULL);
		c->thread_running = false;
	}
	return 0;
}

/* Closes the save's tmp directory this rank held, if any. */
static void drop_tmp(struct rt_ckpt *c)
{
	if (c->tmp_held.path)
		close(c->tmp_held.fd);
	c->tmp_held = (struct ckpt_dir){ .fd = -1 };
}

void rt_ckpt_free(struct rt_ckpt *c)
{
	join_thread(c);
	drop_tmp(c);
	if (c->held.path)
		close(c->held.fd);
	c->held = (struct ckpt_dir){ .fd = -1 };
	rt_bpe_free(c->bpe);
	c->bpe = NULL;
	ckpt_shard_free(&c->w);
	ckpt_shard_free(&c->wp);
	free(c->files);
	c->files = NULL;
	free(c->stage_tensors);
	free(c->model_tensors);
	ckpt_root_cache_free(&c->root_cache);
	free(c->meta);
	c->meta = NULL;
	if (c->copy_sync_ready) {
		pthread_cond_destroy(&c->copy_cond);
		pthread_mutex_destroy(&c->copy_lock);
		c->copy_sync_ready = false;
	}
}

/* --- resume --- */

/* Replica 0 of each stage reads its layers; then broadcasts them. */
static int load_state(struct rt_ckpt *c, const char *path, struct dt_err *err)
{
	struct ckpt_reader r = { 0 };
	struct dt_err e = { 0 };
	const char *names[CKPT_MAX_STATES];
	float *bufs[CKPT_MAX_STATES];
	int n_states = optim_states(c->opt, names, bufs), i, k, rc = 0, mrc;

	rt_ckpt_wait_snapshot(c); /* no save runs at a resume: for safety */
	r.open_stage = -1;
	r.file = -1;
	if (c->g->coord[RT_DIM_DATA] == 0 || c->shard) {
		rc = ckpt_reader_open(&r, path, &e);
		for (i = 0; !rc && i < c->n_stage_tensors; i++) {
			const struct ckpt_tensor *t = &c->stage_tensors[i];
			float *states[CKPT_MAX_STATES];

			if (!c->shard) { /* parameters and state, broadcast below */
				for (k = 0; k < n_states; k++)
					states[k] = bufs[k] + t->offset;
				rc = ckpt_read_tensor(&r, t, c->st->params + t->offset, states, &e);
				continue;
			}
			/* sharded: replica 0 the parameters (broadcast below), every
			 * replica its own rows of the state */
			if (c->g->coord[RT_DIM_DATA] == 0)
				rc = ckpt_read_tensor(&r, t, c->st->params + t->offset, NULL, &e);
			for (k = 0; !rc && k < n_states; k++)
				rc = ckpt_read_rows(&r, t, k, c->shard->rows[i].row0,
						    c->shard->rows[i].rows,
						    bufs[k] + c->shard->pieces[i].at, &e);
		}
		ckpt_reader_close(&r);
	}
	rc = rt__ckpt_agreed(rc, &e, err);
	if (rc)
		return rc;
	mrc = rt_dp_bcast(c->dp, c->st->params, c->st->n_params);
	for (k = 0; mrc == MPI_SUCCESS && !c->shard && k < n_states; k++)
		mrc = rt_dp_bcast(c->dp, bufs[k], c->st->n_params);
	if (mrc != MPI_SUCCESS)
		return rt_mpi_error(err, "MPI_Bcast of the checkpoint", mrc);
	return 0;
}

/* The checkpoint to resume from, into path: this run's newest valid one,
 * else checkpoint.resume's (a checkpoint, which must be usable, or a
 * directory's newest valid one: a run dir's are in its checkpoints/).
 * *found = false: a fresh start.
 * Collective. */
static int find_resume_point(struct rt_ckpt *c, struct ckpt_manifest *m, char *path,
			     size_t size, bool *found, struct dt_err *err)
{
	const char *want = c->s->checkpoint.resume;
	int rc, skipped;

	/* this run's own checkpoints first: a requeued job continues itself */
	if (c->dir[0]) {
		rc = rt__ckpt_newest_valid(c, c->dir, m, path, size, found, &skipped, err);
		if (!rc && !*found && skipped > 0 && !strcmp(want, "auto")) {
			/* starting afresh would quietly write over them */
			if (c->g->rank == 0)
				dt_err_add(err, "%s: every checkpoint here is damaged (%d skipped, the lines above say why); not starting afresh over them (hint: dtrain-ckpt list %s --verify; checkpoint.resume \"never\" starts from step 0 anyway)",
					   c->dir, skipped, c->dir);
			return -EINVAL;
		}
		if (rc || *found || !strcmp(want, "auto"))
			return rc;
	}
	if (!strcmp(want, "auto"))
		return 0;
	return rt__ckpt_named_point(c, want, "checkpoint.resume", m, path, size, found, err);
}

/* The resume's lines (where from, on which layout, what changed) and its
 * metrics event. */
static void announce_resume(struct rt_ckpt *c, const struct rt_ckpt_pos *pos,
			    const struct ckpt_manifest *m, const struct ckpt_meta *ours,
			    const char *path, double t0)
{
	const char *job_start = getenv("DTRAIN_JOB_START");
	char *quoted;

	if (m->meta.data != ours->data || m->meta.pipeline != ours->pipeline)
		rt__ckpt_say(c, "resuming from %s: step %lld of %lld, written on data %d x pipeline %d, now "
		       "data %d x pipeline %d (loaded in %.2f s)", path, (long long)m->meta.step,
		    (long long)pos->total_steps, m->meta.data, m->meta.pipeline, ours->data,
		    ours->pipeline, dt_mono_s() - t0);
	else
		rt__ckpt_say(c, "resuming from %s: step %lld of %lld, epoch %lld (loaded in %.2f s)", path,
		    (long long)m->meta.step, (long long)pos->total_steps,
		    (long long)m->meta.epoch + 1, dt_mono_s() - t0);
	if (m->meta.optimizer_shards != ours->optimizer_shards) {
		char was[48], now[48];

		rt__ckpt_say(c, "the optimizer state was %s, now %s: re-sharded as it loaded",
		    shards_str(m->meta.optimizer_shards, was, sizeof(was)),
		    shards_str(ours->optimizer_shards, now, sizeof(now)));
	}
	if (m->meta.total_steps != pos->total_steps)
		rt__ckpt_say(c, "note: the checkpoint's run had %lld steps, this one has %lld: the learning "
		       "rate schedule follows the new length", (long long)m->meta.total_steps,
		    (long long)pos->total_steps);
	else if (strcmp(m->meta.spec_hash, c->spec_hash) && m->meta.data == ours->data &&
		 m->meta.pipeline == ours->pipeline)
		rt__ckpt_say(c, "note: the job spec differs from the checkpoint's (spec hash %s, was %s)",
		    c->spec_hash, m->meta.spec_hash);
	quoted = dt_json_quote(path);
	dt_json_line(c->metrics, "{\"event\":\"resume\",\"step\":%lld,\"path\":%s,\"load_s\":%.3f,"
		  "\"data\":%d,\"pipeline\":%d,\"from_data\":%d,\"from_pipeline\":%d%s%s}",
	       (long long)m->meta.step, dt_json_or_null(quoted), dt_mono_s() - t0, ours->data, ours->pipeline,
	       m->meta.data, m->meta.pipeline, job_start ? ",\"job_start\":" : "",
	       job_start && strspn(job_start, "0123456789.") == strlen(job_start) ? job_start : "");
	free(quoted);
}

int rt_ckpt_resume(struct rt_ckpt *c, const struct rt_ckpt_pos *pos, int64_t *step,
		   struct dt_err *err)
{
	struct ckpt_manifest *m = NULL;
	struct ckpt_meta *ours = NULL;
	char path[4200] = "";
	bool found = false;
	double t0 = dt_mono_s();
	int rc = 0;

	*step = 0;
	m = malloc(sizeof(*m));
	ours = malloc(sizeof(*ours));
	if (!m || !ours) {
		rc = -ENOMEM;
		goto out;
	}
	if (strcmp(c->s->checkpoint.resume, "never"))
		rc = find_resume_point(c, m, path, sizeof(path), &found, err);
	if (!rc && !found && c->s->checkpoint.init_from)
		rc = rt__ckpt_init_from(c, m, err); /* a new run from another's model */
	if (rc || !found)
		goto out; /* an error, or a fresh start */
	rc = fill_meta(c, pos, ours, err);
	if (!rc) {
		struct dt_err e = { 0 };

		rc = compatible(path, &m->meta, ours, &e);
		if (rc && c->g->rank == 0)
			dt_err_add(err, "%s", e.msg);
	}
	if (rc)
		goto out;
	rc = load_state(c, path, err);
	if (rc)
		goto out;
	c->opt->step = m->meta.optimizer_step;
	*step = m->meta.step;
	c->last_step = c->dir[0] && !strncmp(path, c->dir, strlen(c->dir)) ? m->meta.step : -1;
	announce_resume(c, pos, m, ours, path, t0);
out:
	free(m);
	free(ours);
	return rc;
}

/* --- saving --- */

/* The writer's snapshot copy is made: the trainer may change the state. */
static void copy_done(struct rt_ckpt *c)
{
	pthread_mutex_lock(&c->copy_lock);
	atomic_store(&c->copy_pending, 0);
	pthread_cond_broadcast(&c->copy_cond);
	pthread_mutex_unlock(&c->copy_lock);
}

/* Phase 1 on a writer's thread (or inline): an async save's snapshot copy
 * first, then the shard's bytes, fsync, checksum; rank 0 also seals the
 * root file. No MPI, no HDF5. */
static void *writer_main(void *arg)
{
	struct rt_ckpt *c = arg;

	if (c->w.copy_parts > 0 || c->wp.copy_parts > 0) {
		dt_fault_slow(DT_FAULT_SNAPSHOT, -1); /* base/fault.h: tests/integration/resume.sh */
		ckpt_shard_copy(&c->w);
		ckpt_shard_copy(&c->wp);
	}
	copy_done(c);
	if (!c->local_rc && c->writer)
		c->local_rc = ckpt_shard_write(&c->w, &c->local_err);
	if (!c->local_rc && c->shard)
		c->local_rc = ckpt_shard_write(&c->wp, &c->local_err);
	if (!c->local_rc && c->g->rank == 0) {
		c->local_rc = ckpt_file_seal(&c->tmp_held, CKPT_ROOT, &c->root_size, &c->root_crc,
					     &c->local_err);
	}
	if (!c->local_rc && c->bpe) {
		struct rt_bpe_files f;
		struct ckpt_tokenizer tok;

		rt_bpe_files(c->bpe, &f);
		tok = (struct ckpt_tokenizer){ f.n, { f.name[0], f.name[1] }, { f.data[0], f.data[1] },
					       { f.len[0], f.len[1] } };
		c->local_rc = ckpt_tokenizer_write(&c->tmp_held, &tok, c->tok_files, &c->local_err);
	}
	if (c->g->rank != 0)
		drop_tmp(c); /* rank 0 commits it */
	atomic_store(&c->thread_done, 1);
	return NULL;
}

/* Phase 2, collective: every rank's outcome to rank 0, which fills
 * c->files (or c->failed, the first rank that could not write its part).
 * Ends the save in flight on every rank. 0, -EIO (MPI), or -ENOMEM on rank
 * 0 alone (the others wait in the gather: the caller aborts the job). */
static int gather(struct rt_ckpt *c, struct dt_err *err)
{
	int64_t mine[7], *all = NULL;
	int world = c->g->world, k, r, mrc, at;

	join_thread(c);
	c->inflight = false;
	if (c->local_rc)
		rt__ckpt_warn_lines(c, &c->local_err);
	mine[0] = c->local_rc;
	mine[1] = (int64_t)c->w.size;
	mine[2] = (int64_t)c->w.crc;
	mine[3] = (int64_t)(c->stall_s * 1e6);
	mine[4] = (int64_t)((c->w.write_s + c->wp.write_s) * 1e6);
	mine[5] = (int64_t)c->wp.size;
	mine[6] = (int64_t)c->wp.crc;
	if (c->g->rank == 0) {
		all = malloc((size_t)world * sizeof(mine));
		if (!all) /* the others wait in the gather: the caller aborts */
			return dt_err_add(err, "rank 0: out of memory for the checkpoint results of %d ranks",
					  world), -ENOMEM;
	}
	mrc = MPI_Gather(mine, 7, MPI_INT64_T, all, 7, MPI_INT64_T, 0, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS) {
		free(all);
		return rt_mpi_error(err, "MPI_Gather of the checkpoint results", mrc);
	}
	if (c->g->rank != 0)
		return 0;
	c->failed = -1;
	c->max_stall_s = c->max_write_s = 0;
	for (r = 0; r < world; r++) {
		if (all[7 * r] && c->failed < 0)
			c->failed = r;
		if ((double)all[7 * r + 3] / 1e6 > c->max_stall_s)
			c->max_stall_s = (double)all[7 * r + 3] / 1e6;
		if ((double)all[7 * r + 4] / 1e6 > c->max_write_s)
			c->max_write_s = (double)all[7 * r + 4] / 1e6;
	}
	memset(c->files, 0, (size_t)c->n_files * sizeof(*c->files));
	snprintf(c->files[0].name, sizeof(c->files[0].name), "%s", CKPT_ROOT);
	c->files[0].stage = -1;
	c->files[0].size = c->root_size;
	c->files[0].crc = c->root_crc;
	c->bytes = c->root_size;
	for (k = 0; k < c->meta->pipeline; k++) {
		int w = rt_grid_stage_writer(c->g, k);

		ckpt_shard_name(k, c->files[k + 1].name, sizeof(c->files[k + 1].name));
		c->files[k + 1].stage = k;
		c->files[k + 1].size = (uint64_t)all[7 * w + 1];
		c->files[k + 1].crc = (uint32_t)all[7 * w + 2];
		c->bytes += c->files[k + 1].size;
	}
	for (k = 0, at = c->meta->pipeline + 1; c->shard && k < c->meta->pipeline; k++)
		for (r = 0; r < c->meta->data; r++, at++) {
			int w = rt_grid_rank_of(c->g, r, k);

			ckpt_piece_name(k, r, c->files[at].name, sizeof(c->files[at].name));
			c->files[at].stage = k;
			c->files[at].is_piece = true;
			c->files[at].piece = r;
			c->files[at].size = (uint64_t)all[7 * w + 5];
			c->files[at].crc = (uint32_t)all[7 * w + 6];
			c->bytes += c->files[at].size;
		}
	for (k = 0; c->bpe && k < c->n_tok_files; k++) {
		c->files[c->n_files - c->n_tok_files + k] = c->tok_files[k];
		c->bytes += c->tok_files[k].size;
	}
	free(all);
	return 0;
}

/* Phase 3, rank 0 alone, on its writer thread (async) or inline (sync):
 * manifest, rename, latest, retention. The result goes to commit_rc and
 * commit_err; report() tells the user. */
static void *commit_main(void *arg)
{
	struct rt_ckpt *c = arg;
	double t0 = dt_mono_s();

	dt_err_clear(&c->commit_err);
	c->committed = false;
	if (c->failed >= 0) {
		/* only the tmp directory this save made and holds: rank 0's
		 * ckpt_tmp_make may have failed because something else took
		 * the name (c->tmp_held then holds nothing) */
		ckpt_tmp_remove(&c->held, &c->tmp_held);
		c->commit_rc = -ECANCELED;
	} else {
		c->commit_rc = ckpt_commit(&c->held, &c->tmp_held, c->meta, c->model_tensors,
					   c->n_model_tensors, c->files, c->n_files,
					   (int)c->s->checkpoint.keep, &c->committed,
					   &c->commit_err);
	}
	drop_tmp(c);
	c->commit_s = dt_mono_s() - t0;
	c->t_done = dt_mono_s();
	atomic_store(&c->commit_done, 1);
	return NULL;
}

/* Rank 0, main thread: what became of the save. */
static int report(struct rt_ckpt *c)
{
	char name[32];
	char final[4400], *quoted;

	ckpt_step_name(c->meta->step, name, sizeof(name));
	if (c->failed >= 0) {
		fprintf(stderr, "dtrain-run: checkpoint at step %lld not saved: rank %d could not write "
			"its part (its message is above)%s\n", (long long)c->meta->step, c->failed,
			c->last_step >= 0 ? "; the previous checkpoint stays" : "");
		fflush(stderr);
		return -ECANCELED;
	}
	snprintf(final, sizeof(final), "%s/%s", c->dir, name);
	/* ckpt_commit says whether its rename committed this save: a step-N
	 * that stands there anyway (an earlier run's, damaged or not) is not
	 * this save */
	if (c->commit_rc && c->committed) {
		/* committed; only latest or the retention failed */
		fprintf(stderr, "dtrain-run: warning: %s\n", c->commit_err.msg);
		fflush(stderr);
		c->commit_rc = 0;
	}
	if (c->commit_rc) {
		fprintf(stderr, "dtrain-run: checkpoint at step %lld not saved: %s%s\n",
			(long long)c->meta->step, c->commit_err.msg,
			c->last_step >= 0 ? "; the previous checkpoint stays" : "");
		fflush(stderr);
		return -ECANCELED;
	}
	rt__ckpt_say(c, "checkpoint %s saved: %.1f MiB, written in %.2f s (%.0f MB/s), training stalled "
	       "%.3f s, committed %.2f s after the snapshot", final, (double)c->bytes / 1048576.0,
	    c->max_write_s, c->max_write_s > 0 ? (double)c->bytes / c->max_write_s / 1e6 : 0,
	    c->max_stall_s, c->t_done - c->t_start);
	quoted = dt_json_quote(final);
	dt_json_line(c->metrics, "{\"event\":\"checkpoint\",\"step\":%lld,\"path\":%s,\"bytes\":%llu,"
		  "\"write_s\":%.6f,\"stall_s\":%.6f,\"commit_s\":%.6f,\"total_s\":%.6f,\"async\":%s,"
		  "\"unix_time\":%.3f}",
	       (long long)c->meta->step, dt_json_or_null(quoted), (unsigned long long)c->bytes, c->max_write_s,
	       c->max_stall_s, c->commit_s, c->t_done - c->t_start, c->async ? "true" : "false",
	       dt_wall_s());
	free(quoted);
	return 0;
}

/* Rank 0: waits for a commit running on its thread and reports it. */
static int end_commit(struct rt_ckpt *c)
{
	int rc;

	if (!c->committing)
		return 0;
	join_thread(c);
	c->committing = false;
	rc = report(c);
	if (!rc)
		c->last_step = c->meta->step;
	return rc;
}

/* The whole end of a save, synchronously, with the result on every rank:
 * 0, -ECANCELED (the save failed; reported) or -EIO (MPI). */
static int commit_now(struct rt_ckpt *c, struct dt_err *err)
{
	int64_t result = 0;
	int rc, mrc;

	rc = gather(c, err);
	if (rc)
		return rc;
	if (c->g->rank == 0) {
		commit_main(c);
		c->committing = true; /* so that end_commit reports it */
		result = end_commit(c);
	}
	mrc = MPI_Bcast(&result, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS)
		return rt_mpi_error(err, "MPI_Bcast of the checkpoint result", mrc);
	if (!result)
		c->last_step = c->meta->step;
	return result ? -ECANCELED : 0;
}

/* This stage's state as the checkpoint module sees it: the stage's shard
 * (piece -1: its parameters, and its states unless they are in pieces),
 * or (sharded) this replica's optimizer piece, packed as the optimizer
 * holds it. A sync save writes before training goes on: no copy needed;
 * an async one copies on its writer thread. */
static void stage_view(const struct rt_ckpt *c, int piece, struct ckpt_stage_view *v)
{
	const char *names[CKPT_MAX_STATES];
	float *bufs[CKPT_MAX_STATES];
	int k, n = optim_states(c->opt, names, bufs);

	memset(v, 0, sizeof(*v));
	v->stage = c->st->stage;
	v->is_piece = piece >= 0;
	v->piece = piece >= 0 ? piece : 0;
	v->first_block = c->st->first_block;
	v->n_blocks = c->st->n_blocks;
	v->tensors = c->stage_tensors;
	v->n_tensors = c->n_stage_tensors;
	v->n = piece >= 0 ? c->shard->floats : c->st->n_params;
	v->params = piece >= 0 ? NULL : c->st->params;
	for (k = 0; k < n; k++)
		v->states[k] = bufs[k];
	v->borrow = !c->async;
	v->defer_copy = c->async;
}

/* The save's tmp directory, made afresh by rank 0 (ckpt_tmp_make: nothing
 * planted at its name is written through), before any rank writes into
 * it: rank 0 says whether it did (one broadcast, every rank), and the
 * other writers open it without following a link. Sets c->local_rc: 0,
 * the error, or -ECANCELED when rank 0 failed (its message says why). */
static int make_tmp(struct rt_ckpt *c, int64_t step)
{
	int made = 0, fd = -1;

	if (c->g->rank == 0 && !c->local_rc) {
		c->local_rc = ckpt_tmp_make(&c->held, step, &fd, &c->local_err);
		made = c->local_rc == 0;
	}
	if (MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS && !c->local_rc) {
		c->local_rc = -EIO;
		dt_err_add(&c->local_err, "rank %d: MPI_Bcast of the checkpoint directory failed",
			   c->g->rank);
	}
	if (!c->local_rc && c->g->rank != 0 && (c->writer || c->shard)) {
		if (!made)
			c->local_rc = -ECANCELED;
		else /* in the directory held, never through a link */
			c->local_rc = ckpt_tmp_open(&c->held, step, &fd, &c->local_err);
	}
	/* kept open for this save's writes and commit: a link planted at its
	 * path (or the checkpoint directory's) meanwhile is never written to */
	if (fd >= 0)
		c->tmp_held = (struct ckpt_dir){ .fd = fd, .path = c->tmp };
	return c->local_rc;
}

/* The main-thread part of a save: meta, HDF5 metadata (an async save's
 * snapshot is allocated here and copied by writer_main). */
static void begin(struct rt_ckpt *c, const struct rt_ckpt_pos *pos)
{
	struct ckpt_stage_view v;

	dt_err_clear(&c->local_err);
	drop_tmp(c);
	c->local_rc = 0;
	c->w.size = c->wp.size = 0;
	c->w.crc = c->wp.crc = 0;
	c->w.write_s = c->wp.write_s = 0;
	c->root_size = 0;
	c->root_crc = 0;
	ckpt_tmp_path(c->dir, pos->step, c->tmp, sizeof(c->tmp));
	c->local_rc = fill_meta(c, pos, c->meta, &c->local_err);
	if (make_tmp(c, pos->step) || !(c->writer || c->shard || c->g->rank == 0))
		return;
	if (c->writer) {
		stage_view(c, -1, &v);
		c->local_rc = ckpt_shard_begin(&c->w, &c->tmp_held, c->meta, &v, &c->local_err);
	}
	if (!c->local_rc && c->shard) {
		stage_view(c, c->shard->replica, &v);
		c->local_rc = ckpt_shard_begin(&c->wp, &c->tmp_held, c->meta, &v, &c->local_err);
	}
	if (!c->local_rc && c->g->rank == 0)
		c->local_rc = ckpt_root_write_cached(&c->root_cache, &c->tmp_held, c->meta,
						     c->model_tensors, c->n_model_tensors,
						     &c->local_err);
}

int rt_ckpt_poll(struct rt_ckpt *c, int *stop_sig, struct dt_err *err)
{
	int v[2], mrc, rc;

	/* rank 0: a commit finished on its thread */
	if (c->committing && atomic_load(&c->commit_done))
		end_commit(c); /* a failed periodic save was reported: go on */
	v[0] = rt_preempt_pending();
	v[1] = c->inflight && !atomic_load(&c->thread_done);
	mrc = MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (mrc != MPI_SUCCESS)
		return rt_mpi_error(err, "MPI_Allreduce of the stop flag", mrc);
	*stop_sig = v[0];
	if (!c->inflight || v[1] != 0)
		return 0;
	/* every writer is done: gather, and rank 0 commits in the background */
	rc = gather(c, err);
	if (rc)
		return rc;
	if (c->g->rank == 0) {
		atomic_store(&c->commit_done, 0);
		c->committing = true;
		if (pthread_create(&c->thread, NULL, commit_main, c) == 0)
			c->thread_running = true;
		else
			commit_main(c);
	}
	return 0;
}

/* Ends the save in flight, whatever phase it is in (every rank). */
static int drain(struct rt_ckpt *c, struct dt_err *err)
{
	int rc = 0;

	if (c->inflight)
		rc = commit_now(c, err);
	else if (c->committing)
		rc = end_commit(c);
	return rc == -ECANCELED ? 0 : rc; /* a failed earlier save was reported */
}

int rt_ckpt_save(struct rt_ckpt *c, const struct rt_ckpt_pos *pos, bool sync, struct dt_err *err)
{
	double t0 = dt_mono_s();
	int rc;

	if (!c->dir[0])
		return 0;
	/* at most one in flight: finish it first */
	rc = drain(c, err);
	if (rc)
		return rc;
	if (pos->step == c->last_step)
		return 0;
	c->t_start = t0;
	c->async = !sync;
	begin(c, pos);
	c->inflight = true;
	c->stall_s = dt_mono_s() - t0;
	atomic_store(&c->thread_done, 0);
	if (!sync && !c->local_rc && (c->writer || c->shard || c->g->rank == 0)) {
		/* a shard begun, not copied yet (a failed begin leaves no copy) */
		atomic_store(&c->copy_pending, c->w.copy_parts > 0 || c->wp.copy_parts > 0);
		if (pthread_create(&c->thread, NULL, writer_main, c) == 0) {
			c->thread_running = true;
			return 0;
		}
		/* no thread: copy and write here, then as below */
		writer_main(c);
		c->stall_s = dt_mono_s() - t0;
	}
	if (!sync) {
		atomic_store(&c->thread_done, 1); /* nothing (more) to write here, or failed already */
		return 0;
	}
	writer_main(c);
	c->stall_s = dt_mono_s() - t0;
	return commit_now(c, err);
}

void rt_ckpt_wait_snapshot(struct rt_ckpt *c)
{
	double t0;

	/* cleared only after the copy, so 0 here means the copy's reads
	 * happened before anything this thread does next */
	if (!atomic_load(&c->copy_pending))
		return;
	t0 = dt_mono_s();
	pthread_mutex_lock(&c->copy_lock);
	while (atomic_load(&c->copy_pending))
		pthread_cond_wait(&c->copy_cond, &c->copy_lock);
	pthread_mutex_unlock(&c->copy_lock);
	c->stall_s += dt_mono_s() - t0;
}

bool rt_ckpt_async_inflight(const struct rt_ckpt *c)
{
	return c->inflight && c->async;
}

