/*
 * data_sets.c - the data sets a run trains and evaluates on (data.train,
 * data.test), opened and checked against the model as rank 0's start does:
 * a language model reads token streams as windows of model.context + 1
 * tokens within its vocabulary, a model of rows a feature table of
 * model.inputs features and at most model.outputs classes; and the
 * training set holds a global batch. The trainer opens them here
 * (rt__open_sets), and `dtrain-run --check-data` checks a spec with them
 * before a job is queued (rt_check_data, train.h).
 */
#include "runtime/train/trainer.h"
#include "runtime/train/train.h"

#include <errno.h>

#include "runtime/data/data.h"
#include "runtime/data/tokens.h"
#include "runtime/model/model.h"

/* A token stream's vocabulary fits the model's. */
static int check_vocab(const struct rt_data *d, const char *path, long vocab, struct dt_err *err)
{
	if (d->classes > vocab)
		return dt_err_add(err, "%s: a vocabulary of %d tokens but model.vocab_size is only %ld",
				  path, d->classes, vocab), -EINVAL;
	return 0;
}

/* A language model's token streams as windows of model.context + 1 tokens. */
static int open_windows(const struct spec *s, const struct rt_model_ops *ops, struct rt_data *train,
			struct rt_data *test, int *has_test, struct dt_err *err)
{
	int T = (int)ops->width(s, 0), rc;
	long vocab = ops->width(s, ops->blocks(s)) / T;

	rc = rt_data_open_windows(train, s->data.train, T, err);
	if (rc == -EINVAL && !rt_tokens_is_stream(s->data.train))
		dt_err_add(err, "hint: model.type \"%s\" trains on token streams; make them with dtrain-data text FILE... DIR, or dtrain-data tokens SHARD... DIR",
			   ops->type);
	if (!rc)
		rc = check_vocab(train, s->data.train, vocab, err);
	if (rc || !s->data.test)
		return rc;
	rc = rt_data_open_windows(test, s->data.test, T, err);
	*has_test = rc == 0;
	return rc ? rc : check_vocab(test, s->data.test, vocab, err);
}

/* A feature table's rows, for a model of rows. */
static int open_tables(const struct spec *s, const struct rt_model_ops *ops, struct rt_data *train,
		       struct rt_data *test, int *has_test, struct dt_err *err)
{
	int rc;

	rc = rt_data_open(train, s->data.train, err);
	if (rc == -EINVAL && rt_tokens_is_stream(s->data.train))
		dt_err_add(err, "hint: %s is a token stream, for a language model (model.type \"gpt\"); model.type \"%s\" trains on a feature table: dtrain-data fashion-mnist DIR, or dtrain-data synthetic FILE",
			   s->data.train, ops->type);
	if (rc)
		return rc;
	if (train->features != s->model.inputs)
		return dt_err_add(err, "%s: %lld features per sample but model.inputs is %ld",
				  s->data.train, (long long)train->features, s->model.inputs);
	if (train->classes > s->model.outputs)
		return dt_err_add(err, "%s: %d classes but model.outputs is only %ld",
				  s->data.train, train->classes, s->model.outputs);
	if (s->data.test) {
		rc = rt_data_open(test, s->data.test, err);
		if (rc)
			return rc;
		*has_test = 1;
		if (test->features != train->features)
			return dt_err_add(err, "%s: %lld features per sample but the training set has %lld",
					  s->data.test, (long long)test->features,
					  (long long)train->features);
	}
	return 0;
}

int rt__open_sets(const struct spec *s, const struct rt_model_ops *ops, struct rt_data *train,
		  struct rt_data *test, int *has_test, struct dt_err *err)
{
	int rc;

	*has_test = 0;
	if (!s->data.train)
		return dt_err_add(err, "data.train: not set; dtrain-run needs a training set "
				  "(make one with: dtrain-data fashion-mnist DIR, dtrain-data synthetic FILE, or for a language model dtrain-data text FILE... DIR)");
	rc = ops->reads_tokens ? open_windows(s, ops, train, test, has_test, err) :
				 open_tables(s, ops, train, test, has_test, err);
	if (!rc && s->train.global_batch > train->n)
		rc = dt_err_add(err, "train.global_batch: %ld is more than the %lld samples of %s: every step would take the whole set, fewer samples than asked (hint: a smaller train.global_batch, or more data)",
				s->train.global_batch, (long long)train->n, s->data.train);
	return rc;
}

int rt_check_data(const struct spec *s, struct dt_err *err)
{
	const struct rt_model_ops *ops = rt_model_find(s, err);
	struct rt_data train = { 0 }, test = { 0 };
	int has_test = 0, rc;

	if (!ops)
		return -EINVAL;
	rc = rt__open_sets(s, ops, &train, &test, &has_test, err);
	rt_data_close(&test);
	rt_data_close(&train);
	return rc;
}
