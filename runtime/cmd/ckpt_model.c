/*
 * ckpt_model.c - a checkpoint's model in one process (ckpt_model.h), and
 * `dtrain-ckpt eval`: the loss of a checkpoint on a data set, and its
 * logits when asked (what tests compare against PyTorch).
 *
 * Sections: loading, eval, the commands.
 */
#include "runtime/cmd/ckpt_model.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/cli.h"
#include "checkpoint/ckpt.h"
#include "runtime/train/device.h"
#include "runtime/model/device.h"
#include "runtime/train/checkpointing.h"
#include "runtime/data/data.h"
#include "runtime/kernels/kernels.h"

/* --- loading --- */

/* the checkpoint that path names (ckpt_resolve), saying which one a
 * directory stood for */
static int find_ckpt(const char *path, char *out, size_t size, struct dt_err *err)
{
	struct dt_err warn = { 0 };
	bool newest = false;
	int rc = ckpt_resolve(path, out, size, &newest, &warn, err);

	dt_err_print("dtrain-ckpt", "", &warn);
	if (!rc && newest)
		fprintf(stderr, "dtrain-ckpt: %s: using its newest checkpoint, %s\n", path, out);
	return rc;
}

/* model.type and the model config's keys into s (model.<key>, the spec
 * table's rows: what dtrain-run wrote from them) */
static int spec_of(struct spec *s, const struct ckpt_meta *meta, const char *ckpt,
		   struct dt_err *err)
{
	struct json_object *cfg = json_tokener_parse(meta->model_config), *type;
	char key[128];
	int rc = 0;

	memset(s, 0, sizeof(*s));
	if (!cfg || !json_object_is_type(cfg, json_type_object)) {
		json_object_put(cfg);
		return dt_err_add(err, "%s: model config is not a JSON object", ckpt), -EINVAL;
	}
	type = json_object_new_string(meta->model_type);
	rc = spec_field_set(spec_field_find("model.type"), type, s, ckpt, "", err);
	json_object_put(type);
	json_object_object_foreach(cfg, k, v) {
		const struct spec_field *f;

		snprintf(key, sizeof(key), "model.%s", k);
		f = spec_field_find(key);
		if (!f) {
			rc = dt_err_add(err, "%s: model config key \"%s\" is not one this dtrain knows", ckpt, k);
			continue;
		}
		if (spec_field_set(f, v, s, ckpt, "", err))
			rc = -EINVAL;
	}
	json_object_put(cfg);
	return rc ? -EINVAL : 0;
}

int rt_ckpt_model_load(struct rt_ckpt_model *m, const char *ckpt, struct rt_dev *dev,
		       struct dt_err *err)
{
	struct ckpt_reader r = { 0 };
	struct ckpt_tensor *ct = NULL;
	const struct rt_model_ops *ops;
	float *host = NULL; /* where the tensors are read: the parameters on a host device */
	int first[2] = { 0, 0 }, i, rc;

	memset(m, 0, sizeof(*m));
	m->step = -1;
	r.open_stage = r.file = -1;
	rc = find_ckpt(ckpt, m->path, sizeof(m->path), err);
	if (!rc)
		rc = ckpt_verify(m->path, true, err);
	if (!rc)
		rc = ckpt_reader_open(&r, m->path, err);
	if (!rc) {
		m->step = r.m->meta.step;
		rc = spec_of(&m->s, &r.m->meta, m->path, err);
	}
	if (rc)
		goto out;
	ops = rt_model_find(&m->s, err);
	if (!ops || ops->check(&m->s, err)) {
		rc = -EINVAL;
		goto out;
	}
	first[1] = ops->blocks(&m->s);
	rc = rt_stage_init_on(&m->st, dev, &m->s, 0, 1, first, err);
	if (!rc && rt_ckpt_tensors(m->st.tensors, m->st.n_tensors, &ct))
		rc = (dt_err_add(err, "out of memory for %d tensors", m->st.n_tensors), -ENOMEM);
	if (!rc)
		host = dev->host ? m->st.params : malloc(m->st.n_params * sizeof(float));
	if (!rc && !host)
		rc = (dt_err_add(err, "out of memory for %zu parameters", m->st.n_params), -ENOMEM);
	for (i = 0; !rc && i < m->st.n_tensors; i++)
		rc = ckpt_read_tensor(&r, &ct[i], host + ct[i].offset, NULL, err);
	if (!rc)
		rt_dev_put(dev, m->st.params, host, m->st.n_params * sizeof(float));
out:
	if (host != m->st.params)
		free(host);
	free(ct);
	ckpt_reader_close(&r);
	return rc;
}

void rt_ckpt_model_free(struct rt_ckpt_model *m)
{
	rt_stage_free(&m->st);
	spec_free(&m->s);
}

/* --- eval --- */

static const char usage_eval[] =
	"usage: dtrain-ckpt eval CKPT DATA [--samples N] [--batch B] [--logits OUT.f32]\n"
	"                        [--device D]\n"
	"\n"
	"The model of checkpoint CKPT (any layout; a run directory stands for its\n"
	"newest checkpoint) on the first N samples of DATA: a token stream for a\n"
	"language model (samples are windows of model.context + 1 tokens, as\n"
	"dtrain-run reads them), a data set for an MLP. Prints one line:\n"
	"  samples N targets M loss L accuracy A [bits_per_byte B]\n"
	"the mean cross-entropy (nats) over every target, the share of targets\n"
	"that are the arg max, and for byte-level text L / ln 2.\n"
	"\n"
	"Options:\n"
	"  --samples N     samples to evaluate (default: all)\n"
	"  --batch B       samples per forward pass (default 16)\n"
	"  --logits FILE   also write the logits, float32 [N][outputs] row-major\n"
	"                  (a language model: [N][context][vocab_size])\n"
	"  --device D      cpu (default) or cuda (the first visible GPU)\n"
	"\n"
	"Exit codes: 0 evaluated, 1 failure (checkpoint or data unusable), 2 usage error.\n";

struct eval_opts {
	const char *ckpt, *data, *logits, *device;
	long samples, batch;
};

static int parse_eval(int argc, char **argv, struct eval_opts *o)
{
	static const struct option opts[] = {
		{ "samples", required_argument, NULL, 'n' }, { "batch", required_argument, NULL, 'b' },
		{ "logits", required_argument, NULL, 'l' }, { "help", no_argument, NULL, 'h' },
		{ "device", required_argument, NULL, 'd' }, { NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	o->samples = -1;
	o->batch = 16;
	o->device = "cpu";
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage_eval, stdout);
			return 1;
		case 'n':
		case 'b':
			errno = 0;
			v = strtol(optarg, &end, 10);
			*(c == 'n' ? &o->samples : &o->batch) = v;
			if (errno || *end || end == optarg || v < 1)
				return dt_usage_error("dtrain-ckpt", usage_eval, "--%s: expected a positive integer (got \"%s\")",
						      c == 'n' ? "samples" : "batch", optarg);
			break;
		case 'l':
			o->logits = optarg;
			break;
		case 'd':
			o->device = optarg;
			if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "sim"))
				return dt_usage_error("dtrain-ckpt", usage_eval, "--device: expected cpu or cuda (got \"%s\")", optarg);
			break;
		case ':':
			return dt_usage_error("dtrain-ckpt", usage_eval, "%s: needs a value", argv[optind - 1]);
		default:
			return dt_unknown_option("dtrain-ckpt", usage_eval, argv[optind - 1], opts);
		}
	}
	if (argc - optind != 2)
		return dt_usage_error("dtrain-ckpt", usage_eval, "expected CKPT and DATA (got %d arguments)",
				      argc - optind);
	o->ckpt = argv[optind];
	o->data = argv[optind + 1];
	if (o->batch > 1 << 20)
		o->batch = 1 << 20;
	return 0;
}

/* One batch's arrays: on the device (dx, dy), and where the host reads
 * them (x, y: the same on a host device) and the logits it writes. */
struct eval_bufs {
	float *x, *dx, *lg;
	int32_t *y, *dy;
};

static int eval_alloc(struct eval_bufs *b, struct rt_dev *dev, const struct rt_stage *st,
		      int rows, int labels, bool logits, struct dt_err *err)
{
	size_t nx = (size_t)rows * (size_t)st->in * sizeof(float);
	size_t ny = (size_t)rows * (size_t)labels * sizeof(int32_t);

	if (rt_dev_alloc(dev, nx, "a batch", &b->dx, err) || rt_dev_alloc(dev, ny, "a batch's targets", &b->dy, err))
		return -ENOMEM;
	b->x = dev->host ? b->dx : malloc(nx);
	b->y = dev->host ? b->dy : malloc(ny);
	if (logits && !dev->host)
		b->lg = malloc((size_t)rows * (size_t)st->out * sizeof(float));
	if (!b->x || !b->y || (logits && !dev->host && !b->lg))
		return dt_err_add(err, "out of memory for %d samples of %d floats", rows, st->in), -ENOMEM;
	return 0;
}

static void eval_free(struct eval_bufs *b, struct rt_dev *dev)
{
	if (!dev->host) {
		free(b->x);
		free(b->y);
		free(b->lg);
	}
	rt_dev_free(dev, b->dx);
	rt_dev_free(dev, b->dy);
}

/* The first n samples of d through m in batches of rows; the summed loss
 * and correct count from the device's accumulator; the logits to out. */
static int eval_batches(struct rt_ckpt_model *m, struct rt_data *d, int64_t n, int rows,
			struct eval_bufs *b, FILE *out, const char *out_path, double *loss,
			int64_t *correct, struct dt_err *err)
{
	struct rt_dev *dev = m->st.dev;
	struct rt_acts acts = { 0 };
	int64_t *idx = malloc((size_t)rows * sizeof(*idx)), done;
	int labels = d->labels, rc = 0;

	if (!idx || rt_acts_init(&acts, &m->st, rows)) {
		rc = (dt_err_add(err, "out of %s memory for %d samples' activations",
				 dev->host ? "host" : "device", rows), -ENOMEM);
		goto out;
	}
	dev->ops->loss_zero(dev);
	for (done = 0; done < n && !rc; done += rows) {
		int r = (int)(n - done < rows ? n - done : rows), i;
		size_t nl = (size_t)r * (size_t)m->st.out;
		const float *logits;

		for (i = 0; i < r; i++)
			idx[i] = done + i;
		rc = rt_data_read(d, idx, r, b->x, b->y, err);
		if (rc)
			break;
		rt_dev_put(dev, b->dx, b->x, (size_t)r * (size_t)m->st.in * sizeof(float));
		rt_dev_put(dev, b->dy, b->y, (size_t)r * (size_t)labels * sizeof(int32_t));
		rc = rt_stage_forward(&m->st, &acts, b->dx, r, &logits);
		if (rc)
			break;
		dev->ops->loss_add(dev, logits, b->dy, r * labels, m->st.out / labels, 1.0f, NULL);
		if (!out)
			continue;
		rt_dev_get(dev, b->lg ? b->lg : (float *)logits, logits, nl * sizeof(float));
		if (fwrite(b->lg ? b->lg : logits, sizeof(float), nl, out) != nl)
			rc = (dt_err_add(err, "%s: cannot write: %s", out_path, strerror(errno)), -EIO);
	}
	if (!rc)
		rc = dev->ops->loss_fetch(dev, loss, correct, err);
out:
	rt_acts_free(&acts);
	free(idx);
	return rc;
}

static int eval_run(const struct eval_opts *o, struct rt_dev *dev, struct dt_err *err)
{
	struct rt_ckpt_model m;
	struct rt_data d = { 0 };
	struct eval_bufs b = { 0 };
	const struct rt_model_ops *ops;
	int64_t n, correct = 0;
	double loss = 0;
	int labels, classes, rows, rc;
	FILE *out = NULL;

	rc = rt_ckpt_model_load(&m, o->ckpt, dev, err);
	if (rc)
		goto out;
	ops = m.st.ops;
	rc = ops->reads_tokens ? rt_data_open_windows(&d, o->data, m.st.in, err)
			       : rt_data_open(&d, o->data, err);
	if (rc)
		goto out;
	labels = d.labels;
	classes = m.st.out / labels;
	if (d.features != m.st.in || d.classes > classes) {
		rc = (dt_err_add(err, "%s: %lld features and %d classes a sample, but the model of %s takes %d and gives %d",
				o->data, (long long)d.features, d.classes, m.path, m.st.in, classes), -EINVAL);
		goto out;
	}
	n = o->samples > 0 && o->samples < d.n ? o->samples : d.n;
	rows = (int)(o->batch < n ? o->batch : n);
	rc = eval_alloc(&b, dev, &m.st, rows, labels, o->logits != NULL, err);
	if (rc)
		goto out;
	if (o->logits && !(out = fopen(o->logits, "wb"))) {
		int e = errno;

		rc = (dt_err_add(err, "%s: cannot create: %s", o->logits, strerror(e)), -e);
		goto out;
	}
	rc = eval_batches(&m, &d, n, rows, &b, out, o->logits, &loss, &correct, err);
	if (out && fclose(out) && !rc)
		rc = (dt_err_add(err, "%s: cannot write: %s", o->logits, strerror(errno)), -EIO);
	out = NULL;
	if (rc)
		goto out;
	loss /= (double)n * labels;
	printf("samples %lld targets %lld loss %.9g accuracy %.6f", (long long)n, (long long)n * labels, loss,
	       (double)correct / ((double)n * labels));
	if (d.byte_level)
		printf(" bits_per_byte %.6f", loss / M_LN2);
	printf("\n");
out:
	if (out)
		fclose(out);
	eval_free(&b, dev);
	rt_data_close(&d);
	rt_ckpt_model_free(&m);
	return rc;
}

int rt_cmd_eval(int argc, char **argv)
{
	struct rt_dev *dev = NULL;
	struct eval_opts o = { 0 };
	struct dt_err err = { 0 };
	int rc = parse_eval(argc, argv, &o);

	if (rc)
		return rc == 1 ? DT_EXIT_OK : rc;
	rt_blas_threads(1);
	rc = rt_device_open_named(o.device, &dev, &err);
	if (!rc)
		rc = eval_run(&o, dev, &err);
	dt_err_print("dtrain-ckpt", "", &err);
	rt_device_close(dev);
	return rc ? DT_EXIT_FAIL : DT_EXIT_OK;
}
